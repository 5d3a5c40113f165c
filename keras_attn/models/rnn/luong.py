"""Functional builder of the RNN encoder–decoder translator with Luong attention."""

from __future__ import annotations

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.recurrent.luong_decoder import LuongDecoder
from keras_attn.models.rnn.attention import DECODER, encoder_decoder_translator, stack_options


@keras_attn_export("keras_attn.models.rnn_luong_translator")
def rnn_luong_translator(
    source_vocab_size: int,
    target_vocab_size: int,
    embedding_dim: int = 128,
    units: int = 256,
    cell: str = "lstm",
    score="general",
    distribution="softmax",
    attention: str | keras.layers.Layer = "global",
    window: int = 10,
    input_feeding: bool = True,
    attention_units: int | None = None,
    position_gradient_scale: float = 1.0,
    dropout: float = 0.1,
    name: str = "rnn_luong_translator",
    reset_after: bool = True,
    num_layers: int = 1,
    encoder_direction: str = "bi",
    reverse_source: bool = False,
) -> keras.Model:
    """Luong et al.'s attentional translator as a Keras functional model.

    source ids `(batch, T_x)` → embedding → encoder (by default bidirectional, `units // 2` per
    direction; `encoder_direction="uni"`: the paper's unidirectional one of `units`; the memory is
    `(batch, T_x, units)`) → its final states through `tanh` bridges → initial decoder state;
    target ids `(batch, T_y)` (teacher-forced, starting with START) → embedding → `LuongDecoder`
    → attentional states `h~` `(batch, T_y, units)` → dropout → `W_s` → logits
    `(batch, T_y, target_vocab_size)` (Luong eq. 6). The encoder is the one of the
    `rnn-attention` family; the layer names are the same, so
    `keras_attn.models.LuongTranslatorSteps` drives it.

    With `num_layers = L > 1` encoder and decoder are stacks of `L` layers, as in Luong et al.'s
    4-layer, 1000-unit models (section 4.1): the encoder's layer `l` initialises the decoder's
    layer `l` through its own bridges, input feeding enters the decoder's bottom layer and the
    attention reads its top layer's `h_t`; dropout between layers and residual connections
    from the third layer up (Wu et al., 2016). The paper's encoder is a unidirectional stack,
    `encoder_direction="uni"` (Sutskever et al.'s reads the reversed source,
    `reverse_source=True`): with 1000-dimensional embeddings and 50,000-word vocabularies on
    each side, global attention with the general score and input feeding, that model,
    `rnn_luong_translator(50_000, 50_000, embedding_dim=1000, units=1000, num_layers=4,
    encoder_direction="uni")`, has 229,090,000 parameters.

    Id 0 is padding in both vocabularies (`mask_zero=True`): padded source positions get zero
    attention and padded target positions carry a Keras mask to the loss.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes, padding id 0 included.
        embedding_dim: size of both embeddings.
        units: decoder state size; also the size of the encoder memory and of `h~`.
        cell: `"lstm"` or `"gru"` for encoder and decoder.
        score, distribution, attention, window, input_feeding, attention_units,
            position_gradient_scale: as in `keras_attn.layers.LuongDecoder` (`attention` is a
            name or an `Attention`/`LocalAttention` layer).
        dropout: dropout on embeddings and on `h~`.
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

    >>> model = rnn_luong_translator(50, 60, embedding_dim=8, units=16, attention="local-p")
    >>> [tuple(t.shape) for t in model.inputs], tuple(model.output.shape)
    ([(None, None), (None, None)], (None, None, 60))
    >>> deep = rnn_luong_translator(50, 60, embedding_dim=8, units=16, num_layers=4)
    >>> deep.get_layer("decoder").num_layers, deep.get_layer("encoder").num_states
    (4, 8)

    References:
        Luong, Pham and Manning, 2015, "Effective Approaches to Attention-based Neural Machine
        Translation", arXiv:1508.04025. Wu et al., 2016, arXiv:1609.08144.
    """
    decoder = LuongDecoder(
        units,
        cell=cell,
        score=score,
        distribution=distribution,
        attention=attention,
        window=window,
        input_feeding=input_feeding,
        attention_units=attention_units,
        position_gradient_scale=position_gradient_scale,
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
