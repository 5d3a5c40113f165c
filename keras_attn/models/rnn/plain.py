"""Functional builder of the RNN encoder–decoder translator without attention."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent.plain_decoder import PlainDecoder
from keras_attn.models.rnn.attention import DECODER, encoder_decoder_translator, stack_options


@keras_attn_export("keras_attn.models.rnn_plain_translator")
def rnn_plain_translator(
    source_vocab_size: int,
    target_vocab_size: int,
    embedding_dim: int = 128,
    units: int = 256,
    cell: str = "lstm",
    context_feeding: bool = True,
    dropout: float = 0.1,
    name: str = "rnn_plain_translator",
    reset_after: bool = True,
    num_layers: int = 1,
    encoder_direction: str = "bi",
    reverse_source: bool = False,
) -> keras.Model:
    """The attention-free encoder–decoder (Sutskever et al.; Cho et al.) as a functional model.

    source ids `(batch, T_x)` → embedding → encoder (by default bidirectional, `units // 2` per
    direction; unidirectional with `encoder_direction="uni"`) → its final states (for the
    bidirectional encoder `[h_fwd^(T); h_bwd^(1)]`); the top layer's hidden one is the context `c`
    `(batch, units)`, and all of them through `tanh` bridges give the decoder's initial state.
    target ids `(batch, T_y)` (teacher-forced, starting with START) → embedding → `PlainDecoder`
    (`c` fed at every step with `context_feeding`, Cho et al.; only the initial state without,
    Sutskever et al.) → dropout → logits `(batch, T_y, target_vocab_size)`.

    The encoder, bridges, embeddings and projection are those of the `rnn-attention` family,
    under the same layer names; only the decoder differs: it never looks at the encoder's
    per-position outputs, so a whole sentence has to pass through `c` and `s^(0)`. Sutskever et
    al. read the source reversed with a deep unidirectional LSTM: `encoder_direction="uni",
    reverse_source=True, num_layers=4`. The default bidirectional encoder's final states serve
    the same purpose (both ends of the sentence are one step from `c`).

    With `num_layers = L > 1` encoder and decoder are stacks of `L` layers (Sutskever et al.
    use 4): the encoder's layer `l` initialises the decoder's layer `l` through its own
    bridges, `c` is the final hidden state of the encoder's top layer and enters the decoder's
    bottom layer; dropout between layers and residual connections from the third layer up
    (Wu et al., 2016).

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes, padding id 0 included.
        embedding_dim: size of both embeddings.
        units: decoder state size; also the size of the encoder summary `c`.
        cell: `"lstm"` or `"gru"` for encoder and decoder.
        context_feeding: feed `c` to the decoder at every step (`keras_attn.layers.PlainDecoder`).
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

    >>> model = rnn_plain_translator(50, 60, embedding_dim=8, units=16)
    >>> [tuple(t.shape) for t in model.inputs], tuple(model.output.shape)
    ([(None, None), (None, None)], (None, None, 60))

    References:
        Sutskever, Vinyals and Le, 2014, arXiv:1409.3215. Cho et al., 2014, arXiv:1406.1078.
        Wu et al., 2016, arXiv:1609.08144.
    """
    decoder = PlainDecoder(
        units,
        cell=cell,
        context_feeding=context_feeding,
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
        attention=False,
    )
