"""The shared layer-test harness: one call runs every contract check a keras_attn layer must pass.

`run_layer_test` builds a `LayerSpec` (the layer class, its constructor arguments, the input
tensors and how the padding mask reaches the layer) and runs these checks, each also callable alone
with a `LayerSpec`:

- `check_config_round_trip`: constructor arguments are attributes and config keys; `from_config`
  and `serialize_keras_object` / `deserialize_keras_object` round trips; registered class.
- `check_call`: eager call and functional (symbolic) call agree on structure, shapes, dtypes and
  values; the weights flag only adds weights; optional expected output shapes.
- `check_keras_save_load`: a functional model wrapping the layer survives `.keras` save/load.
- `check_saved_model`: the same model exported as a SavedModel and reloaded with
  `tf.saved_model.load` serves the same outputs.
- `check_mixed_precision`: under `mixed_float16` and `mixed_bfloat16` outputs are in the compute
  dtype, finite (padding mask applied, fully padded row included) and close to float32 outputs;
  trainable weights stay float32.
- `check_masking`: exactly zero weight on padded positions; outputs independent of the values at
  padded positions; a fully padded row gives finite outputs.
- `check_training`: every trainable weight gets a finite gradient and a few Adam steps lower an MSE
  loss.

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

Failures raise `AssertionError` whose message starts with `[<check>] <LayerClass>:`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import keras
import numpy as np
import tensorflow as tf

__all__ = [
    "MIXED_PRECISION_POLICIES",
    "MIXED_PRECISION_TOLERANCES",
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

MIXED_PRECISION_POLICIES = ("mixed_float16", "mixed_bfloat16")

# Absolute and relative tolerance (the same number) between a mixed-precision output cast to
# float32 and the float32 output of the same weights. float16 keeps 11 significant bits (~5e-4
# relative per rounding), bfloat16 only 8 (~4e-3); a few roundings through projections, a float32
# softmax and a weighted sum stay well inside these on the harness's tiny unit-scale shapes.
MIXED_PRECISION_TOLERANCES = {"mixed_float16": 1e-2, "mixed_bfloat16": 5e-2}

# Standard deviation of the noise written into padded positions by the invariance check. Large on
# purpose: a layer that lets padded values reach its output cannot hide behind small numbers.
PADDING_NOISE_SCALE = 1e3

# Tolerance of the padding-invariance comparison (absolute and relative).
PADDING_INVARIANCE_TOLERANCE = 1e-6


@keras.saving.register_keras_serializable(package="keras_attn_testing")
class AttachMask(keras.layers.Layer):
    """Pass `[x, mask]` through as `x` carrying `mask` as its Keras mask.

    Used by the harness for layers that take their padding mask through Keras masking, so that the
    mask reaches the layer the same way eagerly, in functional models, after `.keras` loading and
    inside exported SavedModels.

    Call arguments:
        inputs: `[x, mask]`, `x` of shape `(batch, T, ...)`, `mask` bool `(batch, T)`.

    Returns:
        `x` unchanged, with `mask` attached as its Keras mask.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("autocast", False)  # a pure pass-through: never cast `x`
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs: list) -> Any:
        x, _ = inputs
        return keras.ops.copy(x)

    def compute_mask(self, inputs: list, previous_mask: Any = None) -> Any:
        _, mask = inputs
        return keras.ops.cast(mask, "bool")

    def compute_output_spec(self, inputs: list) -> keras.KerasTensor:
        x, _ = inputs
        return keras.KerasTensor(x.shape, dtype=x.dtype)


@dataclasses.dataclass
class LayerSpec:
    """Everything the checks need to build and call one layer.

    Args:
        layer_cls: the layer class under test.
        init_kwargs: constructor arguments; every one must come back as an attribute and a config
            key.
        inputs: tensors passed to `call()` by keyword, in order (see the module docstring).
            Floating-point arrays are cast to float32.
        call_kwargs: non-tensor call arguments, passed on every call.
        mask: bool `[batch, T]`, True at real positions, for `inputs[padded_input]`.
        padded_input: the key of `inputs` that `mask` describes; required with `mask`.
        mask_kwarg: the call keyword carrying `mask`, or None for Keras masking.
        weights_kwarg: the call keyword that makes the layer return `(output, weights)`, or None.
        weights_mask: for structured weights, a function mapping `mask` to the mask(s) of the
            weights (see the module docstring), or None for one weights tensor over the T
            positions.
    """

    layer_cls: type
    init_kwargs: dict[str, Any]
    inputs: dict[str, np.ndarray]
    call_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    mask: np.ndarray | None = None
    padded_input: str | None = None
    mask_kwarg: str | None = None
    weights_kwarg: str | None = "return_attention_scores"
    weights_mask: Callable[[np.ndarray], Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.layer_cls, type) or not issubclass(
            self.layer_cls, keras.layers.Layer
        ):
            raise ValueError(
                f"Expected layer_cls to be a keras.layers.Layer subclass. "
                f"Received: layer_cls={self.layer_cls!r}"
            )
        if not self.inputs:
            raise ValueError(
                f"Expected at least one input tensor. Received: inputs={self.inputs!r}"
            )
        self.init_kwargs = dict(self.init_kwargs or {})
        self.call_kwargs = dict(self.call_kwargs or {})
        self.inputs = {name: _as_input_array(x) for name, x in self.inputs.items()}
        clash = set(self.inputs) & set(self.call_kwargs)
        if clash:
            raise ValueError(
                "Expected inputs and call_kwargs to have distinct keys. "
                f"Received both: {sorted(clash)}"
            )
        if self.weights_mask is not None and (self.mask is None or self.weights_kwarg is None):
            raise ValueError(
                "weights_mask maps the padding mask onto the weights; it needs mask and "
                f"weights_kwarg. Received: mask={'None' if self.mask is None else 'given'}, "
                f"weights_kwarg={self.weights_kwarg!r}"
            )
        if self.mask is None:
            if self.padded_input is not None or self.mask_kwarg is not None:
                raise ValueError(
                    "padded_input and mask_kwarg describe a mask; pass mask as well. Received: "
                    f"padded_input={self.padded_input!r}, mask_kwarg={self.mask_kwarg!r}"
                )
            return
        self.mask = np.asarray(self.mask)
        if self.mask.dtype != bool or self.mask.ndim != 2:
            raise ValueError(
                f"Expected mask to be a bool array of shape [batch, T]. Received: "
                f"dtype={self.mask.dtype}, shape={self.mask.shape}"
            )
        if self.padded_input not in self.inputs:
            raise ValueError(
                f"Expected padded_input in {sorted(self.inputs)}. "
                f"Received: padded_input={self.padded_input!r}"
            )
        padded_shape = self.inputs[self.padded_input].shape
        if tuple(padded_shape[:2]) != self.mask.shape:
            raise ValueError(
                f"Expected mask shape {tuple(padded_shape[:2])} (the first two axes of "
                f"inputs[{self.padded_input!r}]). Received: mask.shape={self.mask.shape}"
            )
        if self.mask_input_name in self.inputs or self.mask_input_name in self.call_kwargs:
            raise ValueError(
                f"The mask keyword {self.mask_input_name!r} is also given in inputs/call_kwargs."
            )

    @property
    def name(self) -> str:
        """The layer class name, used in failure messages."""
        return self.layer_cls.__name__

    @property
    def mask_input_name(self) -> str | None:
        """Name of the functional model's bool mask input (None when there is no mask)."""
        if self.mask is None:
            return None
        return self.mask_kwarg or f"{self.padded_input}_padding_mask"

    @property
    def padded_length(self) -> int | None:
        """T, the number of positions the mask describes."""
        return None if self.mask is None else self.mask.shape[1]

    def make(self, **overrides: Any) -> keras.layers.Layer:
        """A fresh layer from `init_kwargs`, with `overrides` replacing or adding arguments.

        Keras objects among the arguments (a score layer, an initializer) are rebuilt from their
        config for every layer, so layers made from one spec never share sublayers or weights.
        """
        kwargs = {key: _fresh_copy(value) for key, value in self.init_kwargs.items()}
        return self.layer_cls(**{**kwargs, **overrides})

    def model_inputs(
        self,
        inputs: Mapping[str, np.ndarray] | None = None,
        mask: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """The data dict a functional model built by `build_model` takes (mask included)."""
        data = dict(self.inputs if inputs is None else inputs)
        if self.mask is not None:
            data[self.mask_input_name] = self.mask if mask is None else mask
        return data

    def call(
        self,
        layer: keras.layers.Layer,
        data: Mapping[str, Any] | None = None,
        *,
        return_weights: bool = False,
    ) -> Any:
        """Call `layer` the way the harness contract says, on `data` (default `model_inputs()`).

        `data` maps input names (and the mask input name, if any) to arrays or tensors, eager or
        symbolic. With `return_weights` the weights keyword is set to True.
        """
        data = self.model_inputs() if data is None else data
        # NumPy arrays become tensors of their own dtype first: Keras would convert raw arrays to
        # the layer's input dtype, turning integer ids into floats.
        data = {
            name: keras.ops.convert_to_tensor(x) if isinstance(x, np.ndarray) else x
            for name, x in data.items()
        }
        kwargs = {name: data[name] for name in self.inputs}
        if self.mask is not None:
            mask = data[self.mask_input_name]
            if self.mask_kwarg is not None:
                kwargs[self.mask_kwarg] = mask
            else:
                padded = kwargs[self.padded_input]
                kwargs[self.padded_input] = AttachMask()([padded, mask])
        kwargs.update(self.call_kwargs)
        if return_weights:
            kwargs[self.weights_kwarg] = True
        return layer(**kwargs)

    def build_model(
        self, layer: keras.layers.Layer, *, return_weights: bool, flatten_outputs: bool = False
    ) -> tuple[keras.Model, Any]:
        """A functional model wrapping `layer`, and the symbolic outputs of the layer's call.

        The model takes the `model_inputs()` dict: one `keras.Input` per entry, named by its key,
        with a dynamic batch dimension and the other dimensions of the arrays. It returns the
        layer's output structure, or with `flatten_outputs` a flat list of its tensors.
        """
        symbolic = {
            name: keras.Input(shape=x.shape[1:], dtype=str(x.dtype), name=name)
            for name, x in self.model_inputs().items()
        }
        outputs = self.call(layer, symbolic, return_weights=return_weights)
        model_outputs = _flat(outputs) if flatten_outputs else outputs
        model = keras.Model(
            inputs=symbolic, outputs=model_outputs, name=f"{self.name}_harness_model"
        )
        return model, outputs

    @property
    def returns_weights(self) -> bool:
        """Whether the checks call the layer with the weights flag on."""
        return self.weights_kwarg is not None

    def weights_masks(self, mask: np.ndarray | None = None) -> Any:
        """Where the weights may be nonzero for the padding `mask` (default `self.mask`).

        One bool array, or a structure of them matching the weights (`weights_mask` hook).
        """
        mask = self.mask if mask is None else mask
        if self.weights_mask is None:
            return mask
        return keras.tree.map_structure(
            lambda m: np.asarray(m, dtype=bool), self.weights_mask(mask)
        )


def _as_input_array(x: Any) -> np.ndarray:
    array = np.asarray(x)
    if np.issubdtype(array.dtype, np.floating):
        return array.astype("float32")
    return array


def _fresh_copy(value: Any) -> Any:
    """`value` rebuilt from its config when it is a configurable Keras object, else `value`."""
    if _is_plain(value) or not hasattr(value, "get_config") or not hasattr(value, "from_config"):
        return value
    return type(value).from_config(value.get_config())


def _fail(check: str, spec: LayerSpec, message: str) -> NoReturn:
    raise AssertionError(f"[{check}] {spec.name}: {message}")


def _flat(structure: Any) -> list:
    return list(keras.tree.flatten(structure))


def _to_numpy(x: Any) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(x))


def _dtype_name(x: Any) -> str:
    return keras.backend.standardize_dtype(x.dtype)


def _is_float(x: Any) -> bool:
    return keras.backend.is_float_dtype(_dtype_name(x))


def _describe(structure: Any) -> Any:
    """Nesting of `structure` with tuples and lists alike and leaves replaced by None."""
    if isinstance(structure, (list, tuple)):
        return [_describe(x) for x in structure]
    if isinstance(structure, Mapping):
        return {key: _describe(value) for key, value in structure.items()}
    return None


def _shapes_compatible(a: Any, b: Any) -> bool:
    a, b = tuple(a), tuple(b)
    return len(a) == len(b) and all(
        x is None or y is None or x == y for x, y in zip(a, b, strict=True)
    )


def _assert_outputs_close(
    check: str,
    spec: LayerSpec,
    what: str,
    expected: Any,
    actual: Any,
    atol: float,
    rtol: float,
) -> None:
    expected_flat, actual_flat = _flat(expected), _flat(actual)
    if len(expected_flat) != len(actual_flat):
        _fail(
            check,
            spec,
            f"{what}: {len(actual_flat)} output tensors, expected {len(expected_flat)}",
        )
    for index, (want, got) in enumerate(zip(expected_flat, actual_flat, strict=True)):
        want, got = _to_numpy(want), _to_numpy(got)
        if want.shape != got.shape:
            _fail(
                check, spec, f"{what}: output {index} has shape {got.shape}, expected {want.shape}"
            )
        try:
            np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)
        except AssertionError as error:
            _fail(
                check, spec, f"{what}: output {index} differs (atol={atol}, rtol={rtol}).\n{error}"
            )


def _json_normalise(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _is_plain(value: Any) -> bool:
    """JSON-like values: None, bools, numbers, strings and lists/tuples/dicts of them."""
    if value is None or isinstance(value, (bool, int, float, str, np.generic)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def _plain_equal(a: Any, b: Any) -> bool:
    """Equality of JSON-like values with tuples and lists alike and bools kept apart from ints."""
    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_plain_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_plain_equal(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _equivalent(given: Any, stored: Any) -> bool:
    """Whether `stored` (an attribute or config value) faithfully keeps the argument `given`.

    Plain values must be equal (tuples and lists alike). A plain `given` (an identifier such as
    `"dot"` or `"glorot_uniform"`) may be stored resolved, as an object or its serialized dict. A
    Keras object `given` must serialize like `stored`.
    """
    if _is_plain(given):
        if _is_plain(stored) and not (isinstance(given, str) and isinstance(stored, dict)):
            return _plain_equal(given, stored)
        return stored is not None
    try:
        given_serialized = keras.saving.serialize_keras_object(given)
        stored_serialized = keras.saving.serialize_keras_object(stored)
        return _json_normalise(given_serialized) == _json_normalise(stored_serialized)
    except (TypeError, ValueError):
        return given is stored


def check_config_round_trip(spec: LayerSpec) -> None:
    """Config contract: arguments kept, `get_config` JSON-able and complete, round trips equal.

    Every `init_kwargs` key must be an attribute of the same name and a `get_config()` key whose
    values keep the argument (see `_equivalent`); the class must be registered for serialization;
    `from_config(get_config())` and `deserialize_keras_object(serialize_keras_object(layer))`
    (through JSON, without `custom_objects`) must give a layer of the same class and equal config.
    """
    check = "config"
    layer = spec.make()
    config = layer.get_config()
    for key, given in spec.init_kwargs.items():
        if not hasattr(layer, key):
            _fail(check, spec, f"constructor argument {key!r} is not kept as an attribute")
        if not _equivalent(given, getattr(layer, key)):
            _fail(
                check,
                spec,
                f"attribute {key!r} is {getattr(layer, key)!r}, constructed with {given!r}",
            )
        if key not in config:
            _fail(check, spec, f"constructor argument {key!r} is missing from get_config()")
        if not _equivalent(given, config[key]):
            _fail(check, spec, f"config[{key!r}] is {config[key]!r}, constructed with {given!r}")
    try:
        config_json = _json_normalise(config)
    except TypeError as error:
        _fail(check, spec, f"get_config() is not JSON-serializable: {error}")

    registered_name = keras.saving.get_registered_name(spec.layer_cls)
    if keras.saving.get_registered_object(registered_name) is not spec.layer_cls:
        _fail(
            check,
            spec,
            "class is not registered for serialization "
            "(decorate it with keras_attn.api_export.keras_attn_export)",
        )

    revived = spec.layer_cls.from_config(config)
    if type(revived) is not spec.layer_cls:
        _fail(check, spec, f"from_config built a {type(revived).__name__}")
    if _json_normalise(revived.get_config()) != config_json:
        _fail(
            check,
            spec,
            f"from_config(get_config()) changes the config:\n{config_json}\n!=\n"
            f"{_json_normalise(revived.get_config())}",
        )

    serialized = _json_normalise(keras.saving.serialize_keras_object(layer))
    revived = keras.saving.deserialize_keras_object(serialized)
    if type(revived) is not spec.layer_cls:
        _fail(check, spec, f"deserialize_keras_object built a {type(revived).__name__}")
    if _json_normalise(revived.get_config()) != config_json:
        _fail(check, spec, "serialize/deserialize_keras_object changes the config")


def _flatten_shape_structure(shape_structure: Any) -> list:
    if isinstance(shape_structure, tuple) and all(
        d is None or isinstance(d, int) for d in shape_structure
    ):
        return [shape_structure]
    if isinstance(shape_structure, Mapping):
        return [
            s
            for key in sorted(shape_structure)
            for s in _flatten_shape_structure(shape_structure[key])
        ]
    return [s for item in shape_structure for s in _flatten_shape_structure(item)]


def check_call(
    spec: LayerSpec,
    *,
    expected_output_shape: Any = None,
    atol: float = 1e-6,
    rtol: float = 1e-6,
) -> None:
    """Symbolic and eager calls agree; the weights flag only adds weights.

    A fresh layer is built symbolically inside a functional model, then called eagerly; both calls
    must give the same output structure, shapes (the symbolic batch is None), dtypes, and the model
    and the eager call the same values. With `weights_kwarg`, the flagged call must return
    `(output, weights)` with `output` matching the plain call and `weights[..., T]` over the padded
    input. `expected_output_shape` (a shape tuple, or a structure of them, None = any size)
    describes the plain call's output.
    """
    check = "call"
    layer = spec.make()
    model, symbolic = spec.build_model(layer, return_weights=False)
    eager = spec.call(layer)
    if _describe(symbolic) != _describe(eager):
        _fail(
            check,
            spec,
            f"symbolic output structure {_describe(symbolic)} differs from eager "
            f"{_describe(eager)}",
        )
    for index, (sym, eag) in enumerate(zip(_flat(symbolic), _flat(eager), strict=True)):
        if not _shapes_compatible(sym.shape, eag.shape):
            _fail(check, spec, f"output {index}: symbolic shape {sym.shape}, eager {eag.shape}")
        if _dtype_name(sym) != _dtype_name(eag):
            _fail(
                check,
                spec,
                f"output {index}: symbolic dtype {_dtype_name(sym)}, eager {_dtype_name(eag)}",
            )
    if expected_output_shape is not None:
        expected = _flatten_shape_structure(expected_output_shape)
        for what, output in (("eager", eager), ("symbolic", symbolic)):
            shapes = [tuple(x.shape) for x in _flat(output)]
            if len(expected) != len(shapes) or not all(
                _shapes_compatible(e, s) for e, s in zip(expected, shapes, strict=True)
            ):
                _fail(
                    check,
                    spec,
                    f"{what} output shapes {shapes}, expected {expected_output_shape}",
                )
    _assert_outputs_close(
        check, spec, "functional model vs eager call", eager, model(spec.model_inputs()), atol, rtol
    )
    if spec.weights_kwarg is None:
        return

    flagged = spec.call(layer, return_weights=True)
    if not isinstance(flagged, (tuple, list)) or len(flagged) != 2:
        _fail(
            check,
            spec,
            f"calling with {spec.weights_kwarg}=True must return (output, weights); "
            f"got {_describe(flagged)}",
        )
    output, weights = flagged
    if _describe(output) != _describe(eager):
        _fail(
            check,
            spec,
            f"with {spec.weights_kwarg}=True the output structure {_describe(output)} differs "
            f"from the plain call's {_describe(eager)}",
        )
    _assert_outputs_close(
        check, spec, f"output with {spec.weights_kwarg}=True vs without", eager, output, atol, rtol
    )
    if spec.weights_mask is None and not keras.ops.is_tensor(weights):
        _fail(check, spec, f"weights must be one tensor, got {type(weights).__name__}")
    if spec.mask is not None:
        _weights_with_masks(check, spec, weights, spec.mask)
    # A fresh layer with the same weights: Keras's functional graph check sizes every node's
    # outputs by the layer's first call, so one instance cannot serve both return structures.
    flagged_layer = spec.make()
    flagged_model, _ = spec.build_model(flagged_layer, return_weights=True)
    flagged_layer.set_weights(layer.get_weights())
    _assert_outputs_close(
        check,
        spec,
        f"functional model vs eager call with {spec.weights_kwarg}=True",
        flagged,
        flagged_model(spec.model_inputs()),
        atol,
        rtol,
    )


def check_keras_save_load(spec: LayerSpec, *, atol: float = 1e-6, rtol: float = 1e-6) -> None:
    """A functional model wrapping the layer, saved as `.keras` and loaded without
    `custom_objects`, gives the same outputs and holds a layer of the same class."""
    check = "keras_save_load"
    model, _ = spec.build_model(spec.make(), return_weights=spec.returns_weights)
    data = spec.model_inputs()
    expected = model(data)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    if not any(type(layer) is spec.layer_cls for layer in loaded.layers):
        _fail(check, spec, "the loaded model holds no layer of this class")
    _assert_outputs_close(check, spec, "loaded .keras model", expected, loaded(data), atol, rtol)


def check_saved_model(spec: LayerSpec, *, atol: float = 1e-6, rtol: float = 1e-6) -> None:
    """`model.export(format="tf_saved_model")`, reloaded with `tf.saved_model.load`, serves the
    same outputs through both the `serve` endpoint and the `serving_default` signature.

    The model returns the layer's outputs as a flat list: SavedModel signatures only take a
    tensor, a flat sequence or a flat dict of tensors, whatever the layer's nesting.
    """
    check = "saved_model"
    model, _ = spec.build_model(
        spec.make(), return_weights=spec.returns_weights, flatten_outputs=True
    )
    data = spec.model_inputs()
    expected = model(data)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "saved_model")
        model.export(path, format="tf_saved_model", verbose=False)
        reloaded = tf.saved_model.load(path)
        tensors = {name: tf.constant(value) for name, value in data.items()}
        _assert_outputs_close(
            check,
            spec,
            "SavedModel `serve` endpoint",
            expected,
            reloaded.serve(tensors),
            atol,
            rtol,
        )
        signature = reloaded.signatures["serving_default"]
        served = signature(**tensors)
        ordered = [served[key] for key in sorted(served, key=_output_key_order)]
        _assert_outputs_close(
            check, spec, "SavedModel serving_default signature", expected, ordered, atol, rtol
        )


def _output_key_order(key: str) -> tuple:
    prefix, _, index = key.rpartition("_")
    return (prefix, int(index)) if index.isdigit() else (key, -1)


def _with_fully_padded_row(mask: np.ndarray) -> np.ndarray:
    mask = mask.copy()
    mask[0] = False
    return mask


def _assert_finite(check: str, spec: LayerSpec, what: str, outputs: Any) -> None:
    for index, x in enumerate(_flat(outputs)):
        if not _is_float(x):
            continue
        values = _to_numpy(keras.ops.cast(x, "float32"))
        if not np.all(np.isfinite(values)):
            bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
            _fail(check, spec, f"{what}: output {index} has {bad} NaN/Inf values")


def check_mixed_precision(
    spec: LayerSpec,
    *,
    policies: tuple[str, ...] = MIXED_PRECISION_POLICIES,
    tolerances: Mapping[str, float] | None = None,
) -> None:
    """The layer built with `dtype=<policy>` computes in the compute dtype and stays accurate.

    For each policy: float outputs are in the compute dtype (integer/bool outputs exempt),
    trainable weights are float32, outputs are finite with the padding mask applied and with a
    fully padded row, and outputs are close to the float32 layer's with the same weights
    (tolerance `tolerances[policy]`, default `MIXED_PRECISION_TOLERANCES`, used as atol and rtol).

    The policy is given through the layer's `dtype=` argument, not the global policy, so sublayers
    that do not inherit `dtype=self.dtype_policy` are caught (they would compute in float32). The
    harness never sets the global policy; it is restored afterwards all the same (even on
    failure), and a layer that changed it fails the check.
    """
    check = "mixed_precision"
    tolerances = {**MIXED_PRECISION_TOLERANCES, **(tolerances or {})}
    global_policy = keras.config.dtype_policy().name
    try:
        reference_layer = spec.make()
        reference = spec.call(reference_layer, return_weights=spec.returns_weights)
        for policy in policies:
            _check_one_policy(spec, policy, reference_layer, reference, tolerances[policy])
    finally:
        changed_to = keras.config.dtype_policy().name
        keras.config.set_dtype_policy(global_policy)
    if changed_to != global_policy:
        _fail(check, spec, f"the layer changed the global dtype policy to {changed_to}")


def _check_one_policy(
    spec: LayerSpec,
    policy: str,
    reference_layer: keras.layers.Layer,
    reference: Any,
    tolerance: float,
) -> None:
    check = "mixed_precision"
    return_weights = spec.returns_weights
    layer = spec.make(dtype=policy)
    spec.call(layer, return_weights=return_weights)
    layer.set_weights(reference_layer.get_weights())
    outputs = spec.call(layer, return_weights=return_weights)
    compute_dtype = keras.backend.standardize_dtype(layer.compute_dtype)
    for index, x in enumerate(_flat(outputs)):
        if _is_float(x) and _dtype_name(x) != compute_dtype:
            _fail(
                check,
                spec,
                f"under {policy} output {index} is {_dtype_name(x)}, expected {compute_dtype}",
            )
    for weight in layer.trainable_weights:
        if keras.backend.standardize_dtype(weight.dtype) != "float32":
            _fail(
                check,
                spec,
                f"under {policy} trainable weight {weight.path} is "
                f"{keras.backend.standardize_dtype(weight.dtype)}, expected float32",
            )
    _assert_finite(check, spec, f"under {policy}", outputs)
    if spec.mask is not None:
        padded_row = spec.call(
            layer,
            spec.model_inputs(mask=_with_fully_padded_row(spec.mask)),
            return_weights=return_weights,
        )
        _assert_finite(check, spec, f"under {policy} with a fully padded row", padded_row)
    float_pairs = [
        (want, keras.ops.cast(got, "float32"))
        for want, got in zip(_flat(reference), _flat(outputs), strict=True)
        if _is_float(want) and _is_float(got)
    ]
    _assert_outputs_close(
        check,
        spec,
        f"under {policy} vs float32",
        [want for want, _ in float_pairs],
        [got for _, got in float_pairs],
        tolerance,
        tolerance,
    )


def _padded_positions_noise(array: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """A copy of `array` whose padded positions hold large random values (random ids for ints)."""
    rng = np.random.default_rng(seed)
    padded = ~mask.reshape(mask.shape + (1,) * (array.ndim - 2))
    padded = np.broadcast_to(padded, array.shape)
    if np.issubdtype(array.dtype, np.floating):
        noise = rng.normal(scale=PADDING_NOISE_SCALE, size=array.shape).astype(array.dtype)
    elif np.issubdtype(array.dtype, np.integer):
        high = max(int(array.max()), 1) + 1
        noise = rng.integers(0, high, size=array.shape).astype(array.dtype)
    elif array.dtype == bool:
        noise = rng.random(size=array.shape) < 0.5
    else:
        raise ValueError(f"Cannot randomise padded positions of dtype {array.dtype}")
    return np.where(padded, noise, array)


def _unpadded_selector(shape: tuple, mask: np.ndarray) -> np.ndarray:
    """Bool array of `shape`: True where every non-batch axis of length T indexes a real position.

    Axes of length T may be per-position axes of the padded input (a self-attention output, the
    query axis of its weights), whose entries at padded positions are allowed to change.
    """
    batch, length = mask.shape
    keep = np.ones(shape, dtype=bool)
    if not shape or shape[0] != batch:
        return keep
    for axis in range(1, len(shape)):
        if shape[axis] != length:
            continue
        axis_shape = [1] * len(shape)
        axis_shape[0], axis_shape[axis] = batch, length
        keep &= mask.reshape(axis_shape)
    return keep


def _aligned_mask(mask: np.ndarray, shape: tuple) -> np.ndarray | None:
    """`mask` `(batch, *tail)` broadcast to `shape` `(batch, *middle, *tail)`, or None if unfit.

    Axes are inserted after the batch axis; tail axes of size 1 broadcast.
    """
    shape = tuple(shape)
    if mask.ndim < 1 or mask.ndim > len(shape) or mask.shape[0] != shape[0]:
        return None
    tail = mask.shape[1:]
    weights_tail = shape[len(shape) - len(tail) :]
    if any(m not in (1, w) for m, w in zip(tail, weights_tail, strict=True)):
        return None
    expanded = mask.reshape((mask.shape[0],) + (1,) * (len(shape) - mask.ndim) + tail)
    return np.broadcast_to(expanded, shape)


def _weights_with_masks(
    check: str, spec: LayerSpec, weights: Any, mask: np.ndarray
) -> list[tuple[Any, np.ndarray]]:
    """Pairs `(weights tensor, its bool mask broadcast to its shape)`; fails on a mismatch."""
    masks = spec.weights_masks(mask)
    if _describe(weights) != _describe(masks):
        _fail(
            check,
            spec,
            f"weights structure {_describe(weights)} does not match the structure "
            f"{_describe(masks)} given by weights_mask",
        )
    pairs = []
    for index, (tensor, tensor_mask) in enumerate(zip(_flat(weights), _flat(masks), strict=True)):
        aligned = _aligned_mask(tensor_mask, tuple(tensor.shape))
        if aligned is not None:
            pairs.append((tensor, aligned))
        elif spec.weights_mask is None:
            _fail(
                check,
                spec,
                f"weights shape {tuple(tensor.shape)}: last axis must run over the "
                f"{spec.padded_length} positions of {spec.padded_input!r}",
            )
        else:
            _fail(
                check,
                spec,
                f"weights {index} of shape {tuple(tensor.shape)} does not fit its mask of shape "
                f"{tensor_mask.shape} from weights_mask (aligned at the batch axis and the "
                "trailing axes)",
            )
    return pairs


def _assert_zero_on_padding(check: str, spec: LayerSpec, when: str, weights: Any) -> None:
    for index, (tensor, keep) in enumerate(_weights_with_masks(check, spec, weights, spec.mask)):
        values = _to_numpy(keras.ops.cast(tensor, "float32"))
        on_padding = np.where(keep, 0.0, values)
        if np.any(on_padding != 0):
            which = "" if spec.weights_mask is None else f" (weights {index})"
            _fail(
                check,
                spec,
                f"weights at padded positions must be exactly 0{when}{which}; found "
                f"{np.count_nonzero(on_padding)} nonzero "
                f"(max |w| = {np.abs(on_padding).max():.3g})",
            )


def check_masking(spec: LayerSpec) -> None:
    """Padding contract: zero weights on padding, outputs independent of padded values.

    - With `weights_kwarg`: `weights[..., k]` is exactly 0 wherever `mask[:, k]` is False (with
      `weights_mask`: every weights tensor is exactly 0 wherever its mask is False), both on the
      given inputs and on the noisy ones below.
    - Refilling the padded positions of `inputs[padded_input]` with noise of standard deviation
      `PADDING_NOISE_SCALE` (random ids for integer inputs) leaves every output equal within
      `PADDING_INVARIANCE_TOLERANCE`. Output axes of length T are treated as per-position axes of
      the padded input and compared only at real positions (so pick T unlike other sizes in a
      test, or that axis is compared only partially).
    - With batch row 0 fully padded, every float output is finite. (Its weights are not required
      to be zero: with no real position there is nothing to attend to.)
    """
    check = "masking"
    if spec.mask is None:
        raise ValueError("check_masking needs a LayerSpec with a mask")
    if spec.mask.all():
        raise ValueError("The mask pads no position, so the masking check would prove nothing.")
    return_weights = spec.returns_weights
    layer = spec.make()
    outputs = spec.call(layer, return_weights=return_weights)

    noisy_inputs = dict(spec.inputs)
    noisy_inputs[spec.padded_input] = _padded_positions_noise(
        spec.inputs[spec.padded_input], spec.mask, seed=0
    )
    noisy = spec.call(layer, spec.model_inputs(inputs=noisy_inputs), return_weights=return_weights)
    if return_weights:
        _assert_zero_on_padding(check, spec, "", outputs[1])
        _assert_zero_on_padding(check, spec, " (padded values refilled with noise)", noisy[1])

    for index, (clean_x, noisy_x) in enumerate(zip(_flat(outputs), _flat(noisy), strict=True)):
        clean_x, noisy_x = _to_numpy(clean_x), _to_numpy(noisy_x)
        keep = _unpadded_selector(clean_x.shape, spec.mask)
        close = np.isclose(
            noisy_x,
            clean_x,
            atol=PADDING_INVARIANCE_TOLERANCE,
            rtol=PADDING_INVARIANCE_TOLERANCE,
        )
        leaks = keep & ~close
        if np.any(leaks):
            diff = np.abs(noisy_x.astype("float64") - clean_x.astype("float64"))[leaks]
            _fail(
                check,
                spec,
                f"output {index} depends on the values at padded positions of "
                f"{spec.padded_input!r}: {np.count_nonzero(leaks)} entries changed "
                f"(max change {diff.max():.3g}) when they were refilled with noise",
            )

    padded_row = spec.call(
        layer,
        spec.model_inputs(mask=_with_fully_padded_row(spec.mask)),
        return_weights=return_weights,
    )
    _assert_finite(check, spec, "with a fully padded row", padded_row)


def check_training(
    spec: LayerSpec,
    *,
    steps: int = 5,
    learning_rate: float = 1e-2,
    seed: int = 1234,
    samples: int | None = None,
) -> None:
    """Every trainable weight gets a finite gradient and `steps` Adam steps lower an MSE loss.

    The layer is wrapped in a functional model (weights flag on, if any); the loss is the mean
    squared error of the first output (cast to float32) against a fixed normal target of its shape.
    Gradients are taken with `training=True`; the loss is compared before and after training with
    `training=False`, so dropout does not blur the comparison. Gradients with respect to the float
    inputs must be finite as well. A layer without trainable weights only gets the input-gradient
    check. `keras.utils.set_random_seed(seed)` is called first.

    `samples=K` is for layers that sample in training (hard attention): their inference output is
    a piecewise-constant function of the weights (an arg max that a few small steps rarely move)
    and their training output is random, so the `training=False` comparison says nothing. Instead
    the batch (and the target) is tiled K times and the loss compared before and after training is
    the training-mode loss on that batch: a K-sample Monte Carlo estimate of the expected loss
    `E_noise[L]`, the objective the layer's gradient estimator (e.g. straight-through
    Gumbel-softmax) descends. Before each of the two evaluations the random state is restored
    (the model's non-trainable variables, which hold its seed generators' states, and the global
    seed), so both evaluations draw the same noise (common random numbers) and their difference
    is the effect of the training steps, not of resampling. The gradient steps use the tiled batch
    in training mode too.
    """
    check = "training"
    if samples is not None and (
        isinstance(samples, bool) or not isinstance(samples, int) or samples < 1
    ):
        raise ValueError(
            f"Expected samples to be None or a positive integer. Received: samples={samples!r}"
        )
    keras.utils.set_random_seed(seed)
    model, _ = spec.build_model(spec.make(), return_weights=spec.returns_weights)
    data = {name: tf.constant(value) for name, value in spec.model_inputs().items()}
    first = _flat(model(data))[0]
    if not _is_float(first):
        _fail(check, spec, f"the first output is {_dtype_name(first)}; cannot fit an MSE loss")
    target = np.random.default_rng(seed).normal(size=tuple(first.shape)).astype("float32")
    if samples is not None:
        # K copies of the batch: each copy draws its own noise in one call.
        data = {name: tf.concat([x] * samples, axis=0) for name, x in data.items()}
        target = np.concatenate([target] * samples, axis=0)
    target = tf.constant(target)

    def loss_fn(training: bool) -> tf.Tensor:
        prediction = keras.ops.cast(_flat(model(data, training=training))[0], "float32")
        return keras.ops.mean(keras.ops.square(prediction - target))

    variables = list(model.trainable_variables)
    float_inputs = {name: x for name, x in data.items() if x.dtype.is_floating}
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(list(float_inputs.values()))
        loss = loss_fn(training=True)
    variable_grads = tape.gradient(loss, variables)
    input_grads = tape.gradient(loss, float_inputs)
    del tape

    for name, grad in input_grads.items():
        if grad is not None and not np.all(np.isfinite(_to_numpy(grad))):
            _fail(check, spec, f"the gradient with respect to input {name!r} has NaN/Inf values")
    missing = [v.path for v, g in zip(variables, variable_grads, strict=True) if g is None]
    if missing:
        _fail(check, spec, f"trainable weights without a gradient: {missing}")
    not_finite = [
        v.path
        for v, g in zip(variables, variable_grads, strict=True)
        if not np.all(np.isfinite(_to_numpy(g)))
    ]
    if not_finite:
        _fail(check, spec, f"trainable weights with NaN/Inf gradients: {not_finite}")
    if not variables:
        return

    if samples is None:

        def evaluate() -> float:
            return float(loss_fn(training=False))

        what = "the MSE loss"
    else:
        random_state = [(v, _to_numpy(v)) for v in model.non_trainable_variables]

        def evaluate() -> float:
            for variable, value in random_state:
                variable.assign(value)
            keras.utils.set_random_seed(seed)
            return float(loss_fn(training=True))

        what = f"the expected training-mode MSE loss ({samples} samples, same noise)"

    optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
    initial = evaluate()
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = loss_fn(training=True)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
    final = evaluate()
    if not np.isfinite(final) or final >= initial:
        _fail(
            check,
            spec,
            f"{steps} Adam steps (learning_rate={learning_rate}) did not lower {what}: "
            f"{initial:.6g} -> {final:.6g}",
        )


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
    if run_saved_model_check:
        check_saved_model(spec, atol=atol, rtol=rtol)
    if run_masking_check and spec.mask is not None:
        check_masking(spec)
    if run_mixed_precision_check:
        check_mixed_precision(spec, tolerances=mixed_precision_tolerances)
    if run_training_check:
        check_training(spec, samples=training_samples)
