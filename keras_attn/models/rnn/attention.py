"""Functional builder of the RNN encoder–decoder translator with Bahdanau attention."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent.bahdanau_decoder import BahdanauDecoder
from keras_attn.layers.recurrent.bidirectional_encoder import BidirectionalEncoder
from keras_attn.layers.recurrent.unidirectional_encoder import UnidirectionalEncoder

# Layer names the decoding adapter (`keras_attn.models.rnn.steps`) looks up after a reload.
SOURCE_EMBEDDING = "source_embedding"
ENCODER = "encoder"
ENCODER_DIRECTIONS = ("bi", "uni")
BRIDGE = "bridge_{}"
TARGET_EMBEDDING = "target_embedding"
DECODER = "decoder"
OUTPUT_PROJECTION = "output_projection"


@keras_attn_export("keras_attn.models.rnn_attention_translator")
def rnn_attention_translator(
    source_vocab_size: int,
    target_vocab_size: int,
    embedding_dim: int = 128,
    units: int = 256,
    cell: str = "lstm",
    score="additive",
    attention_units: int | None = None,
    dropout: float = 0.1,
    name: str = "rnn_attention_translator",
    reset_after: bool = True,
    num_layers: int = 1,
    encoder_direction: str = "bi",
    reverse_source: bool = False,
) -> keras.Model:
    """Bahdanau et al.'s translator as a Keras functional model.

    source ids `(batch, T_x)` → embedding → bidirectional encoder (`units // 2` per direction, so
    the memory is `(batch, T_x, units)`) → its final states through `tanh` bridges → initial
    decoder state; target ids `(batch, T_y)` (teacher-forced, starting with START) → embedding →
    `BahdanauDecoder` → dropout → logits `(batch, T_y, target_vocab_size)`.

    With `num_layers = L > 1` encoder and decoder are stacks of `L` layers: the encoder's layer
    `l` initialises the decoder's layer `l` through its own bridges, the attention reads the
    previous state of the decoder's top layer and its context enters the bottom layer, with
    dropout between layers and residual connections from the third layer up (Wu et al., 2016;
    see `keras_attn.layers.BahdanauDecoder` and `keras_attn.layers.BidirectionalEncoder`).

    Id 0 is padding in both vocabularies (`mask_zero=True`): padded source positions get zero
    attention and padded target positions carry a Keras mask to the loss.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes, padding id 0 included.
        embedding_dim: size of both embeddings.
        units: decoder state size; also the size of the encoder memory.
        cell: `"lstm"` or `"gru"` for encoder and decoder.
        score: alignment function of the decoder (`"additive"` is Bahdanau's).
        attention_units: hidden size of the additive alignment network (default: `units`).
        dropout: dropout on embeddings and on the decoder outputs.
        name: model name.
        reset_after: the GRU's form (`cell="gru"` only), for encoder and decoder alike: True
            (the default) is Keras' and cuDNN's, False Cho et al.'s equations (see
            `keras_attn.layers.BidirectionalEncoder`); False with `cell="lstm"` is a `ValueError`.
        num_layers: the number of stacked recurrent layers of the encoder and of the decoder
            (default 1); `dropout` is also the rate between layers.
        encoder_direction: `"bi"` (the default), a bidirectional encoder of `units // 2` per
            direction, or `"uni"`, a unidirectional one of `units`
            (`keras_attn.layers.UnidirectionalEncoder`).
        reverse_source: with `encoder_direction="uni"`, the encoder reads the source reversed
            (Sutskever et al., 2014).

    Returns:
        A `keras.Model` with inputs `{"source_ids", "target_ids"}` and the logits as output.

    Example:

    >>> model = rnn_attention_translator(50, 60, embedding_dim=8, units=16)
    >>> [tuple(t.shape) for t in model.inputs], tuple(model.output.shape)
    ([(None, None), (None, None)], (None, None, 60))
    >>> deep = rnn_attention_translator(50, 60, embedding_dim=8, units=16, num_layers=2)
    >>> deep.get_layer("decoder").num_layers, deep.get_layer("encoder").num_states
    (2, 4)

    References:
        Bahdanau, Cho and Bengio, 2015, arXiv:1409.0473. Wu et al., 2016, arXiv:1609.08144.
    """
    decoder = BahdanauDecoder(
        units,
        cell=cell,
        score=score,
        attention_units=attention_units,
        reset_after=reset_after,
        **stack_options(num_layers, dropout),
        name=DECODER,
    )
    return encoder_decoder_translator(
        decoder,
        source_vocab_size,
        target_vocab_size,
        embedding_dim,
        units,
        cell,
        dropout,
        name,
        reset_after=reset_after,
        num_layers=num_layers,
        encoder_direction=encoder_direction,
        reverse_source=reverse_source,
    )


def stack_options(num_layers: int, dropout: float) -> dict:
    """The depth keywords of an encoder or decoder layer: `dropout` between layers when deep."""
    return {"num_layers": num_layers, "layer_dropout": dropout if num_layers > 1 else 0.0}


def encoder_decoder_translator(
    decoder: keras.layers.Layer,
    source_vocab_size: int,
    target_vocab_size: int,
    embedding_dim: int,
    units: int,
    cell: str,
    dropout: float,
    name: str,
    reset_after: bool = True,
    num_layers: int = 1,
    attention: bool = True,
    encoder_direction: str = "bi",
    reverse_source: bool = False,
) -> keras.Model:
    """The encoder-decoder translator around a decoder layer.

    Everything but the decoder is shared by the RNN translator families (`encode_source` and
    `project_outputs`): embeddings, the bidirectional encoder, the `tanh` bridges to the decoder's
    initial state, output dropout and the projection to logits, under the layer names the
    decoding adapters look up. `decoder` must be named `DECODER` and take
    `decoder(target, memory, initial_state=[...])` (an attention decoder), or with
    `attention=False` `decoder(target, c, initial_state=[...])`, where `c` `(batch, units)` is
    the final hidden state of the encoder's top layer. `reset_after` is the encoder's GRU form
    and `num_layers` its depth, which must be the decoder's; `encoder_direction` and
    `reverse_source` choose the encoder (`encode_source`).
    """
    source_ids, target_ids = translator_inputs()
    memory, final_states, initial_state = encode_source(
        source_ids,
        source_vocab_size,
        embedding_dim,
        units,
        cell,
        dropout,
        reset_after,
        num_layers=num_layers,
        encoder_direction=encoder_direction,
        reverse_source=reverse_source,
    )
    if not attention:
        # c: the final hidden state of the encoder's top layer, (batch, units)
        memory = final_states[len(final_states) - len(final_states) // num_layers]
    target = embed_target(target_ids, target_vocab_size, embedding_dim, dropout)
    outputs = decoder(target, memory, initial_state=initial_state)
    logits = project_outputs(outputs, target_vocab_size, dropout)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits, name=name)


def translator_inputs() -> tuple:
    """The int32 `source_ids` and `target_ids` inputs `(batch, None)` of every translator."""
    return (
        keras.Input((None,), dtype="int32", name="source_ids"),
        keras.Input((None,), dtype="int32", name="target_ids"),
    )


def encode_source(
    source_ids,
    source_vocab_size: int,
    embedding_dim: int,
    units: int,
    cell: str,
    dropout: float,
    reset_after: bool = True,
    num_layers: int = 1,
    encoder_direction: str = "bi",
    reverse_source: bool = False,
) -> tuple:
    """Embedding, dropout, encoder and bridges of the RNN translators.

    `encoder_direction="bi"` (the default): a bidirectional encoder, `units // 2` per direction
    (`keras_attn.layers.BidirectionalEncoder`; `units` must be even), whose final states are
    `[h_fwd^(T); h_bwd^(1)]` (and the LSTM cell state likewise). `"uni"`: a unidirectional
    encoder of `units` (`keras_attn.layers.UnidirectionalEncoder`), over the reversed source
    with `reverse_source=True` (Sutskever et al., 2014), whose final states are those after
    the whole source.

    Returns `(memory (batch, T_x, units), final_states, initial_state)`: `final_states` are the
    encoder's final states, each `(batch, units)`, for every layer, bottom layer first;
    `initial_state` is `tanh(W_i final_states[i] + b_i)` per state, for the decoder layer of
    the same depth. `reset_after` is the encoder's GRU form and `num_layers` its depth
    (`dropout` between layers).
    """
    if encoder_direction not in ENCODER_DIRECTIONS:
        raise ValueError(
            f"Expected encoder_direction in {ENCODER_DIRECTIONS}. "
            f"Received: encoder_direction={encoder_direction!r}"
        )
    if reverse_source and encoder_direction != "uni":
        raise ValueError(
            "reverse_source needs encoder_direction='uni' (a bidirectional encoder reads both "
            f"ways). Received: encoder_direction={encoder_direction!r}"
        )
    if encoder_direction == "bi" and units % 2:
        raise ValueError(f"Expected an even number of units (two directions). Received: {units}")
    source = keras.layers.Embedding(
        source_vocab_size, embedding_dim, mask_zero=True, name=SOURCE_EMBEDDING
    )(source_ids)
    source = keras.layers.Dropout(dropout, name="source_dropout")(source)
    if encoder_direction == "uni":
        encoder = UnidirectionalEncoder(
            units,
            cell=cell,
            reset_after=reset_after,
            **stack_options(num_layers, dropout),
            reverse=reverse_source,
            name=ENCODER,
        )
    else:
        encoder = BidirectionalEncoder(
            units // 2,
            cell=cell,
            reset_after=reset_after,
            **stack_options(num_layers, dropout),
            name=ENCODER,
        )
    memory, *final_states = encoder(source)
    initial_state = [
        keras.layers.Dense(units, activation="tanh", name=BRIDGE.format(index))(state)
        for index, state in enumerate(final_states)
    ]
    return memory, final_states, initial_state


def embed_target(target_ids, target_vocab_size, embedding_dim, dropout):
    """The target embedding (Keras mask from id 0) and its dropout."""
    target = keras.layers.Embedding(
        target_vocab_size, embedding_dim, mask_zero=True, name=TARGET_EMBEDDING
    )(target_ids)
    return keras.layers.Dropout(dropout, name="target_dropout")(target)


def project_outputs(outputs, target_vocab_size, dropout):
    """Output dropout and the float32 projection of the decoder outputs to logits."""
    outputs = keras.layers.Dropout(dropout, name="output_dropout")(outputs)
    return keras.layers.Dense(target_vocab_size, name=OUTPUT_PROJECTION, dtype="float32")(outputs)
