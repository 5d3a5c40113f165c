from keras_attn.layers.recurrent.bahdanau_decoder import BahdanauDecoder
from keras_attn.layers.recurrent.bi_language_model import BiLanguageModel
from keras_attn.layers.recurrent.bidirectional_encoder import BidirectionalEncoder
from keras_attn.layers.recurrent.deep_rnn import DeepRNN
from keras_attn.layers.recurrent.elman_rnn import ElmanRNN
from keras_attn.layers.recurrent.elman_rnn_cell import ElmanRNNCell
from keras_attn.layers.recurrent.jordan_rnn import JordanRNN
from keras_attn.layers.recurrent.jordan_rnn_cell import JordanRNNCell
from keras_attn.layers.recurrent.luong_decoder import LuongDecoder
from keras_attn.layers.recurrent.neural_turing_machine import NeuralTuringMachine
from keras_attn.layers.recurrent.ntm_cell import NTMCell
from keras_attn.layers.recurrent.plain_decoder import PlainDecoder
from keras_attn.layers.recurrent.scalar_mix import ScalarMix
from keras_attn.layers.recurrent.teacher_forced_rnn import TeacherForcedRNN
from keras_attn.layers.recurrent.unidirectional_encoder import UnidirectionalEncoder
from keras_attn.layers.recurrent.vector_to_sequence import VectorToSequence

__all__ = [
    "BahdanauDecoder",
    "BiLanguageModel",
    "BidirectionalEncoder",
    "DeepRNN",
    "ElmanRNN",
    "ElmanRNNCell",
    "JordanRNN",
    "JordanRNNCell",
    "LuongDecoder",
    "NeuralTuringMachine",
    "NTMCell",
    "PlainDecoder",
    "ScalarMix",
    "TeacherForcedRNN",
    "UnidirectionalEncoder",
    "VectorToSequence",
]
