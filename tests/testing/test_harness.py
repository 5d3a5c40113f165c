"""Tests of the shared layer-test harness: it passes a correct layer and catches broken ones.

Every broken layer below breaks exactly one contract and is run through the single check that
must catch it, so the slow checks (SavedModel export) run only for the correct layers.
"""

import keras
import numpy as np
import pytest

from keras_attn.layers import AreaAttention, MultiRepresentationAttention
from keras_attn.testing import (
    LayerSpec,
    check_call,
    check_config_round_trip,
    check_keras_save_load,
    check_masking,
    check_mixed_precision,
    check_saved_model,
    check_training,
    run_layer_test,
)
from tests.lazy_tf import tf

pytestmark = pytest.mark.every_backend

BATCH, T_Q, T_V, FEATURES, UNITS = 3, 2, 5, 4, 6


def _attention_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "query": rng.normal(size=(BATCH, T_Q, FEATURES)).astype("float32"),
        "value": rng.normal(size=(BATCH, T_V, FEATURES)).astype("float32"),
    }


def _value_mask() -> np.ndarray:
    lengths = np.array([5, 3, 1])
    return np.arange(T_V)[None, :] < lengths[:, None]


@keras.saving.register_keras_serializable(package="keras_attn_test")
class MaskedDotAttention(keras.layers.Layer):
    """Scaled dot-product attention over projected query and value, honouring a value mask.

    scores = (query W_q) (value W_v)^T / sqrt(units)   (batch, T_q, T_v)
    weights = softmax(scores) over real value positions, exactly 0 on padding
    context = weights (value W_v)                      (batch, T_q, units)
    """

    def __init__(self, units: int, use_scale: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.use_scale = use_scale

    def build(self, query_shape, value_shape):
        self.query_dense = keras.layers.Dense(
            self.units, use_bias=False, name="query_dense", dtype=self.dtype_policy
        )
        self.query_dense.build(query_shape)
        self.value_dense = keras.layers.Dense(
            self.units, use_bias=False, name="value_dense", dtype=self.dtype_policy
        )
        self.value_dense.build(value_shape)

    def project(self, query, value):
        return self.query_dense(query), self.value_dense(value)

    def scores(self, query, value):
        scores = keras.ops.einsum("bqu,bku->bqk", query, value)
        if self.use_scale:
            scores = scores / float(np.sqrt(self.units))
        return scores

    def normalise(self, scores, value_mask):
        """Float32 softmax over real positions, exact zeros on padding, back in compute dtype."""
        scores = keras.ops.cast(scores, "float32")
        if value_mask is None:
            return keras.ops.cast(keras.ops.softmax(scores, axis=-1), self.compute_dtype)
        keep = keras.ops.expand_dims(keras.ops.cast(value_mask, "bool"), axis=1)
        scores = keras.ops.where(keep, scores, -1e9)
        weights = keras.ops.where(keep, keras.ops.softmax(scores, axis=-1), 0.0)
        return keras.ops.cast(weights, self.compute_dtype)

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        query, value = self.project(query, value)
        weights = self.normalise(self.scores(query, value), value_mask)
        context = keras.ops.einsum("bqk,bku->bqu", weights, value)
        if return_attention_scores:
            return context, weights
        return context

    def get_config(self):
        return {**super().get_config(), "units": self.units, "use_scale": self.use_scale}


@keras.saving.register_keras_serializable(package="keras_attn_test")
class MaskedSequencePool(keras.layers.Layer):
    """Single-input layer under Keras masking returning the nested `(sequence, [pooled])`.

    sequence = tanh(x W)                         (batch, T, units), per position
    pooled = mean of sequence over real positions (batch, units)
    """

    def __init__(self, units: int, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        self.dense = keras.layers.Dense(
            self.units,
            kernel_initializer=self.kernel_initializer,
            name="dense",
            dtype=self.dtype_policy,
        )
        self.dense.build(input_shape)

    def call(self, inputs, mask=None):
        sequence = keras.ops.tanh(self.dense(inputs))
        keep = keras.ops.ones(keras.ops.shape(inputs)[:2], "bool") if mask is None else mask
        weights = keras.ops.expand_dims(keras.ops.cast(keep, sequence.dtype), axis=-1)
        total = keras.ops.sum(keras.ops.where(weights > 0, sequence, 0.0), axis=1)
        count = keras.ops.maximum(keras.ops.sum(weights, axis=1), 1.0)
        return sequence, [total / count]

    def compute_mask(self, inputs, previous_mask=None):
        return None

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_attn_test")
class MaskedEmbeddingMean(keras.layers.Layer):
    """Mean of the token embeddings over real positions: ids `(batch, T)` -> `(batch, units)`."""

    def __init__(self, vocabulary_size: int, units: int, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.units = units
        self.supports_masking = True

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            shape=(self.vocabulary_size, self.units), initializer="uniform", name="embeddings"
        )

    def call(self, inputs, mask=None):
        vectors = keras.ops.take(self.embeddings, inputs, axis=0)
        weights = keras.ops.expand_dims(keras.ops.cast(mask, vectors.dtype), axis=-1)
        total = keras.ops.sum(keras.ops.where(weights > 0, vectors, 0.0), axis=1)
        return total / keras.ops.maximum(keras.ops.sum(weights, axis=1), 1.0)

    def compute_mask(self, inputs, previous_mask=None):
        return None

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary_size": self.vocabulary_size,
            "units": self.units,
        }


def _attention_spec(layer_cls: type = MaskedDotAttention, **overrides) -> LayerSpec:
    arguments = {
        "layer_cls": layer_cls,
        "init_kwargs": {"units": UNITS, "use_scale": True},
        "inputs": _attention_inputs(),
        "mask": _value_mask(),
        "padded_input": "value",
        "mask_kwarg": "value_mask",
        **overrides,
    }
    return LayerSpec(**arguments)


# ---------------------------------------------------------------- correct layers pass everything


def test_masked_attention_passes_every_check_with_an_explicit_mask_kwarg():
    run_layer_test(
        MaskedDotAttention,
        {"units": UNITS, "use_scale": True},
        _attention_inputs(),
        mask=_value_mask(),
        padded_input="value",
        mask_kwarg="value_mask",
        expected_output_shape=(BATCH, T_Q, UNITS),
    )


def test_masked_attention_passes_every_check_under_keras_masking():
    """The mask reaches `value_mask` through Keras masking (`value._keras_mask`), even after
    `.keras` loading and SavedModel export."""
    run_layer_test(
        MaskedDotAttention,
        {"units": UNITS, "use_scale": False},
        _attention_inputs(),
        mask=_value_mask(),
        padded_input="value",
        expected_output_shape=(BATCH, T_Q, UNITS),
    )


def test_single_input_layer_with_nested_outputs_passes_without_weights():
    rng = np.random.default_rng(1)
    run_layer_test(
        MaskedSequencePool,
        {"units": UNITS, "kernel_initializer": keras.initializers.GlorotUniform(seed=3)},
        {"inputs": rng.normal(size=(BATCH, T_V, FEATURES)).astype("float32")},
        mask=_value_mask(),
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=((BATCH, T_V, UNITS), [(BATCH, UNITS)]),
    )


def test_integer_input_layer_passes_with_random_ids_in_padding():
    rng = np.random.default_rng(2)
    run_layer_test(
        MaskedEmbeddingMean,
        {"vocabulary_size": 11, "units": UNITS},
        {"inputs": rng.integers(1, 11, size=(BATCH, T_V)).astype("int32")},
        mask=_value_mask(),
        padded_input="inputs",
        weights_kwarg=None,
        expected_output_shape=(BATCH, UNITS),
    )


# ---------------------------------------------------------- broken layers, one contract each


class MissingConfigKey(MaskedDotAttention):
    def get_config(self):
        config = super().get_config()
        del config["use_scale"]
        return config


class Unregistered(MaskedDotAttention):
    pass


class LeaksPadding(MaskedDotAttention):
    """Adds the mean of every value position, padded ones included, to the context."""

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        context, weights = super().call(query, value, value_mask, return_attention_scores=True)
        context = context + keras.ops.mean(self.value_dense(value), axis=1, keepdims=True)
        return (context, weights) if return_attention_scores else context


class SoftPaddingPenalty(MaskedDotAttention):
    """Subtracts a finite penalty on padding: small but nonzero weights there."""

    def normalise(self, scores, value_mask):
        penalty = 20.0 * (1.0 - keras.ops.cast(value_mask, "float32"))
        scores = keras.ops.cast(scores, "float32") - keras.ops.expand_dims(penalty, axis=1)
        return keras.ops.cast(keras.ops.softmax(scores, axis=-1), self.compute_dtype)


class Float16MaskOverflow(MaskedDotAttention):
    """Adds `(1 - mask) * -1e9` in the compute dtype: -inf in float16, and 0 * -inf = NaN."""

    def normalise(self, scores, value_mask):
        mask = keras.ops.cast(keras.ops.expand_dims(value_mask, axis=1), self.compute_dtype)
        big = keras.ops.cast(-1e9, self.compute_dtype)
        weights = keras.ops.softmax(scores + (1.0 - mask) * big, axis=-1)
        return keras.ops.cast(weights, self.compute_dtype)


class Float32Sublayer(MaskedDotAttention):
    """Builds its value projection without `dtype=self.dtype_policy`, so it computes in float32."""

    def build(self, query_shape, value_shape):
        super().build(query_shape, value_shape)
        self.value_dense = keras.layers.Dense(self.units, use_bias=False, name="value_dense")
        self.value_dense.build(value_shape)


class IgnoresProjections(MaskedDotAttention):
    """Attends over the raw inputs: its projection kernels never reach the output."""

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        weights = self.normalise(self.scores(query, value), value_mask)
        context = keras.ops.einsum("bqk,bkd->bqd", weights, value)
        return (context, weights) if return_attention_scores else context


class ZeroTimesWeights(IgnoresProjections):
    """Uses its kernels only as `0 * kernel`: gradients exist but are zero, so nothing learns."""

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        context, weights = super().call(query, value, value_mask, return_attention_scores=True)
        unused = keras.ops.sum(self.query_dense.kernel) + keras.ops.sum(self.value_dense.kernel)
        context = context + 0.0 * unused
        return (context, weights) if return_attention_scores else context


class NegativeInfinityMask(MaskedDotAttention):
    """Masks with -inf: exact zeros on padding, but a fully padded row softmaxes to NaN."""

    def normalise(self, scores, value_mask):
        keep = keras.ops.expand_dims(keras.ops.cast(value_mask, "bool"), axis=1)
        scores = keras.ops.where(keep, keras.ops.cast(scores, "float32"), float("-inf"))
        return keras.ops.cast(keras.ops.softmax(scores, axis=-1), self.compute_dtype)


@keras.saving.register_keras_serializable(package="keras_attn_test")
class UnsavedOffset(MaskedDotAttention):
    """Adds a random offset kept as a NumPy array, not a weight: lost by `.keras` saving."""

    def build(self, query_shape, value_shape):
        super().build(query_shape, value_shape)
        self.offset = np.random.default_rng().normal(size=(self.units,)).astype("float32")

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        context, weights = super().call(query, value, value_mask, return_attention_scores=True)
        context = context + keras.ops.cast(self.offset, context.dtype)
        return (context, weights) if return_attention_scores else context


@keras.saving.register_keras_serializable(package="keras_attn_test")
class EagerOnlyBehaviour(MaskedDotAttention):
    """Computes something else when traced into a graph, as an exported SavedModel is."""

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        context, weights = super().call(query, value, value_mask, return_attention_scores=True)
        if not tf.executing_eagerly():
            context = context + 1.0
        return (context, weights) if return_attention_scores else context


class DropsWeightsFlag(MaskedDotAttention):
    """Returns a bare tensor even when weights are asked for."""

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        return super().call(query, value, value_mask, return_attention_scores=False)


def test_missing_config_key_fails_config_check():
    with pytest.raises(AssertionError, match=r"\[config\] MissingConfigKey: .*'use_scale'"):
        check_config_round_trip(_attention_spec(MissingConfigKey))


def test_unregistered_class_fails_config_check():
    with pytest.raises(AssertionError, match=r"\[config\] Unregistered: .*not registered"):
        check_config_round_trip(_attention_spec(Unregistered))


def test_wrong_return_structure_fails_call_check():
    with pytest.raises(AssertionError, match=r"\[call\] DropsWeightsFlag: .*\(output, weights\)"):
        check_call(_attention_spec(DropsWeightsFlag))


def test_wrong_expected_shape_fails_call_check():
    with pytest.raises(AssertionError, match=r"\[call\] MaskedDotAttention: eager output shapes"):
        check_call(_attention_spec(), expected_output_shape=(BATCH, T_Q, UNITS + 1))


def test_padding_leak_fails_masking_check():
    with pytest.raises(
        AssertionError, match=r"\[masking\] LeaksPadding: output 0 depends on the values at padded"
    ):
        check_masking(_attention_spec(LeaksPadding))


def test_nonzero_weights_on_padding_fail_masking_check():
    with pytest.raises(
        AssertionError, match=r"\[masking\] SoftPaddingPenalty: weights at padded positions"
    ):
        check_masking(_attention_spec(SoftPaddingPenalty))


def test_nan_on_a_fully_padded_row_fails_masking_check():
    with pytest.raises(
        AssertionError, match=r"\[masking\] NegativeInfinityMask: with a fully padded row.*NaN"
    ):
        check_masking(_attention_spec(NegativeInfinityMask))


def test_state_outside_weights_fails_keras_save_load_check():
    with pytest.raises(
        AssertionError, match=r"\[keras_save_load\] UnsavedOffset: loaded .keras model"
    ):
        check_keras_save_load(_attention_spec(UnsavedOffset))


def test_graph_only_behaviour_fails_saved_model_check():
    pytest.importorskip("tensorflow")  # the SavedModel check exports with TensorFlow
    if keras.backend.backend() == "torch":
        pytest.skip("Keras exports no SavedModel of a PyTorch-backend layer")
    with pytest.raises(
        AssertionError, match=r"\[saved_model\] EagerOnlyBehaviour: SavedModel `serve` endpoint"
    ):
        check_saved_model(_attention_spec(EagerOnlyBehaviour))


def test_float16_mask_overflow_fails_mixed_precision_check():
    spec = _attention_spec(Float16MaskOverflow)
    check_masking(spec)  # Fine in float32: the overflow only exists in float16.
    with pytest.raises(
        AssertionError, match=r"\[mixed_precision\] Float16MaskOverflow: under mixed_float16.*NaN"
    ):
        check_mixed_precision(spec, policies=("mixed_float16",))


def test_float32_sublayer_fails_mixed_precision_check():
    # TensorFlow and JAX promote float16 with float32 operands; PyTorch refuses them.
    if keras.backend.backend() == "torch":
        problem = "the call raised RuntimeError: .*expected scalar type Half but found Float"
    else:
        problem = "output 0 is float32"
    with pytest.raises(
        AssertionError,
        match=rf"\[mixed_precision\] Float32Sublayer: under mixed_float16 {problem}",
    ):
        check_mixed_precision(_attention_spec(Float32Sublayer), policies=("mixed_float16",))


def test_unused_weights_fail_training_check_with_their_names():
    with pytest.raises(
        AssertionError, match=r"\[training\] IgnoresProjections: .*without a gradient.*query_dense"
    ):
        check_training(_attention_spec(IgnoresProjections))


def test_weights_that_cannot_learn_fail_training_check():
    with pytest.raises(
        AssertionError, match=r"\[training\] ZeroTimesWeights: .*did not lower the MSE loss"
    ):
        check_training(_attention_spec(ZeroTimesWeights))


def test_checks_leave_the_global_dtype_policy_alone():
    check_mixed_precision(_attention_spec())
    assert keras.config.dtype_policy().name == "float32"


def test_inconsistent_mask_arguments_are_rejected_up_front():
    with pytest.raises(ValueError, match="Expected mask shape"):
        _attention_spec(mask=np.ones((BATCH, T_V + 1), dtype=bool))
    with pytest.raises(ValueError, match="Expected padded_input"):
        _attention_spec(padded_input="keys")
    with pytest.raises(ValueError, match="pads no position"):
        check_masking(_attention_spec(mask=np.ones((BATCH, T_V), dtype=bool)))


# ------------------------------------------------ structured weights: the `weights_mask` hook


def _area_mask(mask: np.ndarray) -> np.ndarray:
    """Areas of width 1 and 2 in `AreaAttention.area_spans` order, valid when all members are."""
    return np.concatenate([mask, mask[:, :-1] & mask[:, 1:]], axis=1)  # (batch, T + T - 1)


def _area_spec(layer_cls: type = AreaAttention, **overrides) -> LayerSpec:
    arguments = {
        "layer_cls": layer_cls,
        "init_kwargs": {"max_area_width": 2, "score": "dot"},
        "inputs": _attention_inputs(),
        "mask": _value_mask(),
        "padded_input": "value",
        "mask_kwarg": "value_mask",
        "weights_mask": _area_mask,
        **overrides,
    }
    return LayerSpec(**arguments)


class FirstMemberAreaMask(AreaAttention):
    """Masks an area by its first member only: areas reaching into the padding keep weight."""

    def _area_mask(self, value_mask):
        length = value_mask.shape[1]
        return keras.ops.concatenate([value_mask, value_mask[:, : length - 1]], axis=1)


def test_area_weights_pass_with_the_area_mask_hook():
    spec = _area_spec()
    check_call(spec)
    check_masking(spec)


def test_area_weights_fail_the_default_positions_check():
    with pytest.raises(
        AssertionError, match=r"\[call\] AreaAttention: weights shape \(3, 2, 9\): last axis"
    ):
        check_call(_area_spec(weights_mask=None))


def test_weight_on_areas_with_padding_fails_masking_check():
    with pytest.raises(
        AssertionError,
        match=r"\[masking\] FirstMemberAreaMask: weights at padded positions must be exactly 0",
    ):
        check_masking(_area_spec(FirstMemberAreaMask))


@keras.saving.register_keras_serializable(package="keras_attn_test")
class TwoLevelAttention(MaskedDotAttention):
    """Returns `(context, (weights, summary))`, `summary` `(batch, T_v)` the weights averaged over
    the queries: a second weights tensor, as a hierarchy's sentence level."""

    def summary(self, weights, scores, value_mask):
        return keras.ops.mean(weights, axis=1)

    def call(self, query, value, value_mask=None, return_attention_scores=False):
        projected_query, projected_value = self.project(query, value)
        scores = self.scores(projected_query, projected_value)
        weights = self.normalise(scores, value_mask)
        context = keras.ops.einsum("bqk,bku->bqu", weights, projected_value)
        if return_attention_scores:
            return context, (weights, self.summary(weights, scores, value_mask))
        return context


class UnmaskedSummary(TwoLevelAttention):
    """Its second-level weights are a softmax over every position, padding included."""

    def summary(self, weights, scores, value_mask):
        mean_scores = keras.ops.cast(keras.ops.mean(scores, axis=1), "float32")
        return keras.ops.cast(keras.ops.softmax(mean_scores, axis=-1), self.compute_dtype)


def _two_level_spec(layer_cls: type = TwoLevelAttention, **overrides) -> LayerSpec:
    return _attention_spec(layer_cls, weights_mask=lambda mask: (mask, mask), **overrides)


def test_a_pair_of_weights_passes_every_check():
    run_layer_test(
        TwoLevelAttention,
        {"units": UNITS, "use_scale": True},
        _attention_inputs(),
        mask=_value_mask(),
        padded_input="value",
        mask_kwarg="value_mask",
        weights_mask=lambda mask: (mask, mask),
        expected_output_shape=(BATCH, T_Q, UNITS),
        run_saved_model_check=False,
    )


def test_a_pair_of_weights_with_one_mask_fails_call_check():
    with pytest.raises(
        AssertionError,
        match=r"\[call\] TwoLevelAttention: weights structure \[None, None\] does not match",
    ):
        check_call(_attention_spec(TwoLevelAttention, weights_mask=lambda mask: mask))
    with pytest.raises(AssertionError, match=r"\[call\] TwoLevelAttention: weights must be one"):
        check_call(_attention_spec(TwoLevelAttention))


def test_padding_weight_in_the_second_tensor_fails_masking_check():
    with pytest.raises(
        AssertionError,
        match=r"\[masking\] UnmaskedSummary: weights at padded positions .* \(weights 1\)",
    ):
        check_masking(_two_level_spec(UnmaskedSummary))


RNG_REPRESENTATIONS = np.random.default_rng(4).normal(size=(BATCH, T_V, 3, FEATURES))


class UnmaskedRepresentationRows(MultiRepresentationAttention):
    """Zeroes padded tokens' outputs but still spreads their weights over the representations."""

    def call(self, inputs, mask=None, representation_mask=None, return_attention_scores=False):
        outputs, weights = super().call(inputs, return_attention_scores=True)
        if mask is not None:
            keep = keras.ops.expand_dims(keras.ops.cast(mask, outputs.dtype), -1)
            outputs = outputs * keep
        return (outputs, weights) if return_attention_scores else outputs


def _representation_spec(layer_cls: type = MultiRepresentationAttention, **overrides):
    arguments = {
        "layer_cls": layer_cls,
        "init_kwargs": {"units": UNITS},
        "inputs": {"inputs": RNG_REPRESENTATIONS},
        "mask": _value_mask(),
        "padded_input": "inputs",
        "weights_mask": lambda mask: mask[:, :, None],  # (batch, T, R): whole rows
        **overrides,
    }
    return LayerSpec(**arguments)


def test_weights_over_representations_pass_with_a_row_mask():
    spec = _representation_spec()
    check_call(spec)
    check_masking(spec)


def test_weights_on_padded_tokens_rows_fail_masking_check_only_with_the_hook():
    # Without the weights the leak is invisible: the outputs at padded tokens are zero.
    check_masking(
        _representation_spec(UnmaskedRepresentationRows, weights_kwarg=None, weights_mask=None)
    )
    with pytest.raises(
        AssertionError,
        match=r"\[masking\] UnmaskedRepresentationRows: weights at padded positions",
    ):
        check_masking(_representation_spec(UnmaskedRepresentationRows))


def test_a_mask_that_does_not_fit_the_weights_fails_call_check():
    with pytest.raises(
        AssertionError,
        match=r"\[call\] MultiRepresentationAttention: weights 0 of shape \(3, 5, 3\) does not fit",
    ):
        check_call(_representation_spec(weights_mask=lambda mask: mask))


def test_weights_mask_needs_a_mask_and_weights():
    with pytest.raises(ValueError, match="weights_mask maps the padding mask"):
        _attention_spec(weights_kwarg=None, weights_mask=lambda mask: mask)


# ------------------------------------------- stochastic layers: the expected-loss training check


class SampledDotAttention(MaskedDotAttention):
    """Hard attention: a Gumbel-max sample of one position in training, the arg max at inference,
    trained by the straight-through Gumbel-softmax gradient (`direction = 1`)."""

    direction = 1.0

    def __init__(self, units: int, use_scale: bool = True, **kwargs):
        super().__init__(units, use_scale, **kwargs)
        self.seed_generator = keras.random.SeedGenerator(7)

    def call(self, query, value, value_mask=None, return_attention_scores=False, training=None):
        query, value = self.project(query, value)
        scores = keras.ops.cast(self.scores(query, value), "float32")
        if training:
            uniform = keras.random.uniform(
                keras.ops.shape(scores), minval=1e-6, maxval=1.0, seed=self.seed_generator
            )
            scores = scores - keras.ops.log(-keras.ops.log(uniform))
        keep = keras.ops.expand_dims(keras.ops.cast(value_mask, "bool"), axis=1)
        scores = keras.ops.where(keep, scores, -1e9)
        weights = keras.ops.one_hot(keras.ops.argmax(scores, axis=-1), T_V, dtype="float32")
        if training:
            relaxed = keras.ops.softmax(scores, axis=-1)
            weights = weights + self.direction * (relaxed - keras.ops.stop_gradient(relaxed))
        context = keras.ops.einsum("bqk,bku->bqu", weights, value)
        return (context, weights) if return_attention_scores else context


class ReversedStraightThrough(SampledDotAttention):
    """The straight-through gradient with the wrong sign: training raises the expected loss."""

    direction = -1.0


def test_sampling_layer_passes_the_expected_loss_training_check():
    check_training(_attention_spec(SampledDotAttention), samples=64)


# Under JAX (other noise) the reversed estimator lowered the 64-sample loss: TensorFlow only.
@pytest.mark.tensorflow_only
def test_wrong_gradient_estimator_fails_the_expected_loss_training_check():
    with pytest.raises(
        AssertionError,
        match=r"\[training\] ReversedStraightThrough: .*did not lower the expected training-mode",
    ):
        check_training(_attention_spec(ReversedStraightThrough), samples=64)


def test_training_samples_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="samples=0"):
        check_training(_attention_spec(SampledDotAttention), samples=0)
