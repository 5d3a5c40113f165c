"""The training check: every trainable weight gets a finite gradient; a few steps lower a loss."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_attn.testing.assertions import fail
from keras_attn.testing.comparison import dtype_name, flat, is_float, to_numpy
from keras_attn.testing.spec import LayerSpec

__all__ = ["check_training"]


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
    first = flat(model(data))[0]
    if not is_float(first):
        fail(check, spec, f"the first output is {dtype_name(first)}; cannot fit an MSE loss")
    target = np.random.default_rng(seed).normal(size=tuple(first.shape)).astype("float32")
    if samples is not None:
        # K copies of the batch: each copy draws its own noise in one call.
        data = {name: tf.concat([x] * samples, axis=0) for name, x in data.items()}
        target = np.concatenate([target] * samples, axis=0)
    target = tf.constant(target)

    def loss_fn(training: bool) -> tf.Tensor:
        prediction = keras.ops.cast(flat(model(data, training=training))[0], "float32")
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
        if grad is not None and not np.all(np.isfinite(to_numpy(grad))):
            fail(check, spec, f"the gradient with respect to input {name!r} has NaN/Inf values")
    missing = [v.path for v, g in zip(variables, variable_grads, strict=True) if g is None]
    if missing:
        fail(check, spec, f"trainable weights without a gradient: {missing}")
    not_finite = [
        v.path
        for v, g in zip(variables, variable_grads, strict=True)
        if not np.all(np.isfinite(to_numpy(g)))
    ]
    if not_finite:
        fail(check, spec, f"trainable weights with NaN/Inf gradients: {not_finite}")
    if not variables:
        return

    if samples is None:

        def evaluate() -> float:
            return float(loss_fn(training=False))

        what = "the MSE loss"
    else:
        random_state = [(v, to_numpy(v)) for v in model.non_trainable_variables]

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
        fail(
            check,
            spec,
            f"{steps} Adam steps (learning_rate={learning_rate}) did not lower {what}: "
            f"{initial:.6g} -> {final:.6g}",
        )
