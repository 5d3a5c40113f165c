"""Test helpers shared by every keras_attn layer test (see `harness` for the contract)."""

from keras_attn.testing.harness import (
    MIXED_PRECISION_POLICIES,
    MIXED_PRECISION_TOLERANCES,
    PADDING_NOISE_SCALE,
    AttachMask,
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
