"""`GPTSteps` with `training`: dropout on with `training=True`, the decoding values with
`training=False`."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.models import GPTSteps, gpt
from tests.lazy_tf import tf

PROMPTS = np.array([[4, 5, 6], [7, 0, 0]], "int32")


def two_steps(steps, **call):
    """The logits of `prefill` and of the first fed token, each computed twice."""
    state = steps.prefill(PROMPTS, **call)
    _, state = steps.step(tf.constant([2, 2]), state, **call)  # returns the prompt logits
    prompt = [
        ops.convert_to_numpy(steps.prefill(PROMPTS, **call)["prompt_logits"]) for _ in range(2)
    ]
    fed = [
        ops.convert_to_numpy(steps.step(tf.constant([8, 9]), state, **call)[0]) for _ in range(2)
    ]
    return prompt, fed


def test_training_true_applies_the_models_dropout():
    keras.utils.set_random_seed(0)
    model = gpt(20, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=12, dropout=0.5)
    for pair in two_steps(GPTSteps(model, max_length=12, training=True)):
        assert np.abs(pair[0] - pair[1]).max() > 1e-3
    for pair in two_steps(GPTSteps(model, max_length=12, training=True), training=False):
        np.testing.assert_array_equal(pair[0], pair[1])
    for pair in two_steps(GPTSteps(model, max_length=12)):
        np.testing.assert_array_equal(pair[0], pair[1])


@pytest.mark.tensorflow_only
def test_training_true_without_dropout_is_the_training_pass():
    keras.utils.set_random_seed(0)
    model = gpt(20, num_layers=1, d_model=8, num_heads=2, ff_dim=16, max_length=12, dropout=0.0)
    tokens = np.array([[4, 5, 6, 8]], "int32")
    full = ops.convert_to_numpy(model(tokens, training=True))
    steps = GPTSteps(model, max_length=12, training=True)
    state = steps.prefill(tokens[:, :3])
    np.testing.assert_allclose(
        ops.convert_to_numpy(state["prompt_logits"]), full[:, 2], rtol=1e-5, atol=1e-5
    )
    _, state = steps.step(tf.constant([2]), state)
    logits, _ = steps.step(tf.constant([8]), state)
    np.testing.assert_allclose(ops.convert_to_numpy(logits), full[:, 3], rtol=1e-5, atol=1e-5)
