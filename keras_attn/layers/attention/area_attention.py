"""Area attention: attend to contiguous areas of the memory instead of single positions."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments
from keras_attn.layers.attention.attention import Attention

POOLINGS = ("mean", "max", "sum")


@keras_attn_export("keras_attn.layers.AreaAttention")
class AreaAttention(Attention):
    """1-D area attention: `c_t = sum_r p(a(k_r, q_t))_r v_r` over all areas `r` of width <= W.

    An area `r = (start, width)` is the run of memory positions `start, ..., start + width - 1`,
    for every `width` in `1..W` (`W = max_area_width`, capped at `T_k`). With keys
    `(batch, T_k, d_k)` and values `(batch, T_k, d_v)`, the area key is the pooled member keys
    (the mean in the paper) and the area value the pooled member values (the sum in the paper):

        k_r = mean_{i in r} k_i          v_r = sum_{i in r} v_i

    Scores and weights are `(batch, T_q, N)` over the `N = sum_{w=1..W} (T_k - w + 1)` areas; the
    context is `(batch, T_q, d_v)`. With `W = 1` this is ordinary attention: the pipeline is
    `Attention`'s, run over the areas (its memory step pools keys, values and the mask).

    Area ordering (the last axis of the weights): width-major, then by start, i.e. all width-1
    areas `(0, 1), (1, 1), ..., (T_k - 1, 1)`, then `(0, 2), ..., (T_k - 2, 2)`, and so on.
    `area_spans(T_k)` returns that list of `(start, width)` pairs.

    An area that contains a padded position is masked: it gets exactly zero weight. The memory
    length `T_k` must be known when the layer is called (static shape).

    Args:
        max_area_width: `W`, the widest area, a positive integer.
        score: a name from `keras_attn.scores.SCORES` or a `keras_attn.scores.Score` instance,
            applied to the queries and the area keys.
        distribution: `"softmax"` or a `keras_attn.distributions.Distribution` instance.
        key_pooling: how member keys make the area key: `"mean"` (paper), `"max"` or `"sum"`.
        value_pooling: how member values make the area value: `"sum"` (paper), `"mean"` or
            `"max"`.
        dropout: dropout rate on the attention weights during training.

    Call arguments:
        query: `(batch, T_q, d_q)`.
        value: `(batch, T_k, d_v)`.
        key: `(batch, T_k, d_k)`, defaults to `value`.
        query_mask: bool `(batch, T_q)`; padded queries get a zero context. Filled from Keras
            masking when not given.
        value_mask: bool `(batch, T_k)`; areas with a padded member get exactly zero weight.
            Filled from Keras masking when not given.
        attention_mask: bool `(batch, T_q, N)`, True where a query may attend to an area (in
            `area_spans` order).
        return_attention_scores: also return the weights over areas.
        training: enables dropout.

    Returns:
        `context`, or `(context, weights)` with `weights` `(batch, T_q, N)` when
        `return_attention_scores=True`.

    Example:

    >>> import numpy as np
    >>> layer = AreaAttention(max_area_width=2, score="dot")
    >>> q = np.ones((1, 2, 4), "float32"); v = np.ones((1, 3, 4), "float32")
    >>> context, weights = layer(q, v, return_attention_scores=True)
    >>> tuple(weights.shape), layer.area_spans(3)
    ((1, 2, 5), [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2)])

    References:
        Li, Kaiser, Bengio and Si, 2019, "Area Attention", ICML, arXiv:1810.10126, section 3.1
        (basic area attention: mean keys, summed values).
    """

    def __init__(
        self,
        max_area_width: int = 2,
        score="dot",
        distribution="softmax",
        key_pooling: str = "mean",
        value_pooling: str = "sum",
        dropout: float = 0.0,
        **kwargs,
    ):
        if (
            isinstance(max_area_width, bool)
            or not isinstance(max_area_width, int)
            or max_area_width <= 0
        ):
            raise ValueError(
                "Expected max_area_width to be a positive integer. "
                f"Received: max_area_width={max_area_width!r}"
            )
        if key_pooling not in POOLINGS:
            raise ValueError(
                f"Expected key_pooling in {POOLINGS}. Received: key_pooling={key_pooling!r}"
            )
        if value_pooling not in POOLINGS:
            raise ValueError(
                f"Expected value_pooling in {POOLINGS}. Received: value_pooling={value_pooling!r}"
            )
        super().__init__(score=score, distribution=distribution, dropout=dropout, **kwargs)
        self.max_area_width = max_area_width
        self.key_pooling = key_pooling
        self.value_pooling = value_pooling

    def area_spans(self, length: int) -> list[tuple[int, int]]:
        """The `(start, width)` of every area of a memory of `length` positions, in weight order."""
        widths = range(1, min(self.max_area_width, length) + 1)
        return [(start, width) for width in widths for start in range(length - width + 1)]

    def _pool_areas(self, x, pooling):
        """`(batch, T, d)` -> `(batch, N, d)`, areas in `area_spans` order."""
        length = x.shape[1]
        areas = []
        running = x  # the sum (or max) of the members of every area of the current width
        for width in range(1, min(self.max_area_width, length) + 1):
            if width > 1:
                # Areas of this width start at 0..T-width: extend those of width - 1 by one step.
                count = length - width + 1
                tail = x[:, width - 1 :]
                if pooling == "max":
                    running = ops.maximum(running[:, :count], tail)
                else:
                    running = running[:, :count] + tail
            areas.append(running / width if pooling == "mean" else running)
        return ops.concatenate(areas, axis=1)

    def _area_mask(self, value_mask):
        """bool `(batch, T)` -> `(batch, N)`: True where every member of the area is real."""
        length = value_mask.shape[1]
        masks = []
        running = ops.cast(value_mask, "bool")
        for width in range(1, min(self.max_area_width, length) + 1):
            if width > 1:
                count = length - width + 1
                running = ops.logical_and(running[:, :count], value_mask[:, width - 1 :])
            masks.append(running)
        return ops.concatenate(masks, axis=1)

    def _prepare_memory(self, key, value, value_mask):
        """Keys, values and mask of the areas: `(batch, N, d_k)`, `(batch, N, d_v)`,
        `(batch, N)`."""
        if value.shape[1] is None or key.shape[1] is None:
            raise ValueError(
                "AreaAttention needs the memory length T_k to be static. "
                f"Received: value shape {value.shape}, key shape {key.shape}"
            )
        area_mask = None
        if value_mask is not None:
            area_mask = self._area_mask(ops.cast(value_mask, "bool"))
        area_keys = self._pool_areas(key, self.key_pooling)
        area_values = self._pool_areas(value, self.value_pooling)
        return area_keys, area_values, area_mask

    def get_config(self):
        config = super().get_config()
        config.update(serialize_arguments(self, "max_area_width", "key_pooling", "value_pooling"))
        return config
