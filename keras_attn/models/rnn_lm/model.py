"""Functional builder of a recurrent language model (Mikolov et al., 2010; Graves, 2013)."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent.unidirectional_encoder import UnidirectionalEncoder

# Layer names the decoding view (`RNNLMSteps`) looks up after a reload.
EMBEDDING = "embedding"
EMBEDDING_DROPOUT = "embedding_dropout"
RNN = "rnn"
OUTPUT_DROPOUT = "output_dropout"
LOGITS = "logits"


@keras_attn_export("keras_attn.models.rnn_lm")
def rnn_lm(
    vocabulary_size: int,
    embedding_dim: int = 128,
    units: int = 256,
    cell: str = "lstm",
    num_layers: int = 2,
    dropout: float = 0.1,
    name: str = "rnn_lm",
) -> keras.Model:
    """A recurrent language model as a Keras functional model.

        token ids (batch, T) → x^(t) = dropout(E[ids])            (batch, T, embedding_dim)
        h_l^(t) = RNN_l(dropout(h_{l-1}^(t)), h_l^(t-1))          (batch, T, units), l = 1..L
        logits^(t) = dropout(h_L^(t)) W + b                       (batch, T, vocabulary_size)

    `RNN_l` is an LSTM or a GRU (`cell`); the stack is a `keras_attn.layers.UnidirectionalEncoder`
    (residual connections from the third layer up). Position `t`'s logits predict token `t + 1`
    from tokens `0..t` only, so `softmax(logits^(t))` is `p(w_{t+1} | w_0..w_t)`; sampling from it
    one token at a time (`keras_attn.models.RNNLMSteps`) generates text. Dropout sits on the
    non-recurrent connections only (Zaremba et al., 2014). Id 0 is padding: a Keras mask reaches
    the loss, and padded steps leave the recurrent states unchanged.

    Args:
        vocabulary_size: number of token ids, padding id 0 included.
        embedding_dim: width of the token embedding.
        units: state width of every recurrent layer.
        cell: `"lstm"` or `"gru"`.
        num_layers: `L`, the stacked recurrent layers.
        dropout: dropout on the embeddings, between recurrent layers and before the output
            projection.
        name: model name.

    Returns:
        A `keras.Model` from `token_ids` (int32 `(batch, T)`) to float32 logits
        `(batch, T, vocabulary_size)`.

    Example:

    >>> model = rnn_lm(30, embedding_dim=8, units=16, num_layers=2)
    >>> tuple(model.output.shape), model.get_layer("rnn").num_states
    ((None, None, 30), 4)

    References:
        Mikolov et al., 2010, "Recurrent neural network based language model", Interspeech.
        Graves, 2013, "Generating sequences with recurrent neural networks", arXiv:1308.0850.
        Zaremba, Sutskever and Vinyals, 2014, "Recurrent neural network regularization",
        arXiv:1409.2329.
    """
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedded = keras.layers.Embedding(
        vocabulary_size, embedding_dim, mask_zero=True, name=EMBEDDING
    )(token_ids)
    embedded = keras.layers.Dropout(dropout, name=EMBEDDING_DROPOUT)(embedded)
    stack = UnidirectionalEncoder(
        units,
        cell=cell,
        num_layers=num_layers,
        layer_dropout=0.0 if num_layers == 1 else dropout,
        name=RNN,
    )
    hidden, *_ = stack(embedded)  # the top layer's sequence; the final states are the step view's
    hidden = keras.layers.Dropout(dropout, name=OUTPUT_DROPOUT)(hidden)
    logits = keras.layers.Dense(vocabulary_size, dtype="float32", name=LOGITS)(hidden)
    return keras.Model(token_ids, logits, name=name)
