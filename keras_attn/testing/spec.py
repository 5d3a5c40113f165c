"""`LayerSpec`: everything the harness's checks need to build and call one layer.

The calling contract it implements is described in `keras_attn.testing.harness`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import keras
import numpy as np

from keras_attn.testing.comparison import flat, is_plain

__all__ = ["AttachMask", "LayerSpec"]


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
        model_outputs = flat(outputs) if flatten_outputs else outputs
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
    if is_plain(value) or not hasattr(value, "get_config") or not hasattr(value, "from_config"):
        return value
    return type(value).from_config(value.get_config())
