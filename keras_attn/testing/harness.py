"""The shared layer-test harness: one call runs every contract check a keras_attn layer must pass.

`run_layer_test` builds a `LayerSpec` (the layer class, its constructor arguments, the input
tensors and how the padding mask reaches the layer) and runs these checks, each also callable alone
with a `LayerSpec` and each in a module of its own in `keras_attn.testing`:

- `check_config_round_trip` (`config_check`): constructor arguments are attributes and config
  keys; `from_config` and `serialize_keras_object` / `deserialize_keras_object` round trips;
  registered class.
- `check_call` (`call_check`): eager call and functional (symbolic) call agree on structure,
  shapes, dtypes and values; the weights flag only adds weights; optional expected output shapes.
- `check_keras_save_load` (`save_checks`): a functional model wrapping the layer survives `.keras`
  save/load.
- `check_saved_model` (`save_checks`): the same model exported as a SavedModel and reloaded with
  `tf.saved_model.load` serves the same outputs (under TensorFlow only: models trained on
  another backend are exported under TensorFlow).
- `check_mixed_precision` (`mixed_precision_check`): under `mixed_float16` and `mixed_bfloat16`
  outputs are in the compute dtype, finite (padding mask applied, fully padded row included) and
  close to float32 outputs; trainable weights stay float32.
- `check_masking` (`masking_check`): exactly zero weight on padded positions; outputs independent
  of the values at padded positions; a fully padded row gives finite outputs.
- `check_training` (`training_check`): every trainable weight gets a finite gradient and a few
  Adam steps lower an MSE loss.

Calling contract (how the harness calls the layer):

    layer(**inputs, **call_kwargs[, <mask_kwarg>=mask][, <weights_kwarg>=True])

Every entry of `inputs` is passed by keyword, under its key, so keys must be names of `call()`
arguments (`{"query": q, "value": v}` for `call(self, query, value, value_mask=None, ...)`).
Keras binds keywords to the signature, so the first argument may be given by name like the rest;
dict order is kept and used as the functional model's input order. Floating-point arrays are cast
to float32. `call_kwargs` holds the non-tensor arguments (flags such as `training`); they are
baked into the functional models.

The padding mask is a bool array `[batch, T]`, True at real positions, describing the first two
axes of `inputs[padded_input]`. It reaches the layer in one of two ways:

- `mask_kwarg="value_mask"`: passed explicitly as that call keyword (in functional models it is an
  extra `keras.Input` of dtype bool named like the keyword);
- `mask_kwarg=None`: Keras masking. The mask is attached to the padded input as its Keras mask
  (by a small registered helper layer, `AttachMask`, so the same path works eagerly, in functional
  models, after `.keras` loading and in SavedModels), and Keras itself populates the layer's `mask`
  argument (single tensor input) or `<padded_input>_mask` argument (several tensor inputs). In
  functional models the mask is an extra bool `keras.Input` named `<padded_input>_padding_mask`.

Weights: when `weights_kwarg` is set (default `"return_attention_scores"`), calling with that
keyword True must return `(output, weights)`, where `output` has the structure of the plain call.
By default `weights` is one tensor whose last axis runs over the padded input's T positions. Every
check except the plain-call half of `check_call` calls the layer with the weights flag on, so
weights are saved, exported, cast and trained through as well. Set `weights_kwarg=None` for layers
that return no weights (recurrent layers, encoders).

Structured weights (the `weights_mask` hook): a layer whose weights do not run over the T
positions (weights over areas, over representations of each token) or that returns several
weights tensors (a hierarchy's word and sentence weights) passes `weights_mask`, a function of
the padding mask (bool `[batch, T]`) returning where the weights may be nonzero: one bool array,
or a tuple/list of them with the structure of `weights`. Each mask `(batch, *tail)` is aligned
with its weights tensor `(batch, *middle, *tail)` at the batch axis and the trailing axes (the
middle axes, such as T_q, are broadcast; tail axes of size 1 broadcast too). The default is the
identity: `weights[..., k]` is masked by `mask[:, k]`. Examples:

    weights_mask=lambda mask: area_mask_of(mask)              # (batch, N) over N areas
    weights_mask=lambda mask: (word_mask_of(mask), mask)      # a pair of weights tensors
    weights_mask=lambda mask: mask[:, :, None]                # (batch, T, R): a padded token's
                                                              # row over R representations

`check_call` then requires the weights' structure and shapes to fit those masks and
`check_masking` requires exact zeros wherever they are False.

Stochastic layers (`training_samples`): a layer that samples in training (hard attention) has an
inference output that is a piecewise-constant function of its weights and a training output that
is random, so "a few steps lower the loss" is judged on the expected training loss instead; see
`check_training`.

Failures raise `AssertionError` whose message starts with `[<check>] <LayerClass>:` (`assertions`);
`comparison` holds the helpers that compare outputs and configuration values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import keras
import numpy as np

from keras_attn.testing.call_check import check_call
from keras_attn.testing.config_check import check_config_round_trip
from keras_attn.testing.masking_check import (
    PADDING_INVARIANCE_TOLERANCE,
    PADDING_NOISE_SCALE,
    check_masking,
)
from keras_attn.testing.mixed_precision_check import (
    MIXED_PRECISION_POLICIES,
    MIXED_PRECISION_TOLERANCES,
    check_mixed_precision,
)
from keras_attn.testing.save_checks import check_keras_save_load, check_saved_model
from keras_attn.testing.spec import AttachMask, LayerSpec
from keras_attn.testing.training_check import check_training

__all__ = [
    "MIXED_PRECISION_POLICIES",
    "MIXED_PRECISION_TOLERANCES",
    "PADDING_INVARIANCE_TOLERANCE",
    "PADDING_NOISE_SCALE",
    "AttachMask",
    "LayerSpec",
    "check_call",
    "check_config_round_trip",
    "check_keras_save_load",
    "check_masking",
    "check_mixed_precision",
    "check_saved_model",
    "check_training",
    "run_layer_test",
]


def run_layer_test(
    layer_cls: type,
    init_kwargs: dict[str, Any],
    inputs: dict[str, np.ndarray],
    *,
    call_kwargs: dict[str, Any] | None = None,
    mask: np.ndarray | None = None,
    padded_input: str | None = None,
    mask_kwarg: str | None = None,
    weights_kwarg: str | None = "return_attention_scores",
    weights_mask: Callable[[np.ndarray], Any] | None = None,
    expected_output_shape: Any = None,
    run_training_check: bool = True,
    training_samples: int | None = None,
    run_mixed_precision_check: bool = True,
    run_saved_model_check: bool = True,
    run_masking_check: bool = True,
    mixed_precision_tolerances: Mapping[str, float] | None = None,
    atol: float = 1e-6,
    rtol: float = 1e-6,
) -> None:
    """Run every harness check on one layer; the first failure raises `AssertionError`.

    See the module docstring for the calling contract. Arguments are those of `LayerSpec` plus:

    Args:
        expected_output_shape: shape tuple (or structure of them, None = any size) of the plain
            call's output, i.e. without the weights flag.
        run_training_check: run `check_training`.
        training_samples: `samples` of `check_training`, for layers that sample in training.
        run_mixed_precision_check: run `check_mixed_precision`.
        run_saved_model_check: run `check_saved_model` (the slowest check: it traces and
            writes a SavedModel).
        run_masking_check: run `check_masking` (only when `mask` is given).
        mixed_precision_tolerances: per-policy overrides of `MIXED_PRECISION_TOLERANCES`.
        atol, rtol: tolerance of the exact-path comparisons (eager vs functional, save/load,
            SavedModel).

    Example:

    >>> run_layer_test(
    ...     Attention,
    ...     {"score": "dot"},
    ...     {"query": np.random.rand(2, 3, 4), "value": np.random.rand(2, 5, 4)},
    ...     mask=np.array([[True] * 5, [True, True, True, False, False]]),
    ...     padded_input="value",
    ...     mask_kwarg="value_mask",
    ...     expected_output_shape=(2, 3, 4),
    ... )  # doctest: +SKIP
    """
    spec = LayerSpec(
        layer_cls=layer_cls,
        init_kwargs=init_kwargs,
        inputs=inputs,
        call_kwargs=call_kwargs or {},
        mask=mask,
        padded_input=padded_input,
        mask_kwarg=mask_kwarg,
        weights_kwarg=weights_kwarg,
        weights_mask=weights_mask,
    )
    check_config_round_trip(spec)
    check_call(spec, expected_output_shape=expected_output_shape, atol=atol, rtol=rtol)
    check_keras_save_load(spec, atol=atol, rtol=rtol)
    if run_saved_model_check and keras.backend.backend() == "tensorflow":
        check_saved_model(spec, atol=atol, rtol=rtol)
    if run_masking_check and spec.mask is not None:
        check_masking(spec)
    if run_mixed_precision_check:
        check_mixed_precision(spec, tolerances=mixed_precision_tolerances)
    if run_training_check:
        check_training(spec, samples=training_samples)
