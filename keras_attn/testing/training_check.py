"""The training check: every trainable weight gets a finite gradient; a few steps lower a loss.

Keras 3 has no backend-neutral gradient function: `_gradients` takes them with the backend's
own (`tf.GradientTape`, `jax.grad` over `Model.stateless_call`), the rest is `keras.ops`.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np

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
    check. `keras.utils.set_random_seed(seed)` is called first. Runs under TensorFlow and JAX.

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
    data = dict(spec.model_inputs())
    first = flat(model(data))[0]
    if not is_float(first):
        fail(check, spec, f"the first output is {dtype_name(first)}; cannot fit an MSE loss")
    target = np.random.default_rng(seed).normal(size=tuple(first.shape)).astype("float32")
    if samples is not None:
        # K copies of the batch: each copy draws its own noise in one call.
        data = {name: np.concatenate([x] * samples, axis=0) for name, x in data.items()}
        target = np.concatenate([target] * samples, axis=0)
    data = {name: keras.ops.convert_to_tensor(x) for name, x in data.items()}
    target = keras.ops.convert_to_tensor(target)

    def mse(outputs):
        prediction = keras.ops.cast(flat(outputs)[0], "float32")
        return keras.ops.mean(keras.ops.square(prediction - target))

    def loss_fn(training: bool):
        return mse(model(data, training=training))

    variables = list(model.trainable_variables)
    float_inputs = {name: x for name, x in data.items() if is_float(x)}
    variable_grads, input_grads = _gradients(model, mse, data, float_inputs)

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
        grads, _ = _gradients(model, mse, data, {})
        optimizer.apply_gradients(zip(grads, variables, strict=True))
    final = evaluate()
    if not np.isfinite(final) or final >= initial:
        fail(
            check,
            spec,
            f"{steps} Adam steps (learning_rate={learning_rate}) did not lower {what}: "
            f"{initial:.6g} -> {final:.6g}",
        )


def _gradients(model: keras.Model, loss: Callable, data: dict, inputs: dict) -> tuple[list, dict]:
    """Gradients of `loss(model(data, training=True))` with respect to the model's trainable
    variables (a list, None where none flows) and to the tensors `inputs` (a subset of `data`,
    a dict by name)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape(persistent=True) as tape:
            tape.watch(list(inputs.values()))
            value = loss(model(data, training=True))
        variable_grads = tape.gradient(value, model.trainable_variables)
        input_grads = tape.gradient(value, inputs)
        del tape
        return variable_grads, input_grads
    if backend == "jax":
        import jax

        def value(trainable, watched):
            outputs, non_trainable = model.stateless_call(
                trainable,
                [v.value for v in model.non_trainable_variables],
                {**data, **watched},
                training=True,
            )
            return loss(outputs), non_trainable

        trainable = [v.value for v in model.trainable_variables]
        (variable_grads, input_grads), non_trainable = jax.grad(
            value, argnums=(0, 1), has_aux=True
        )(trainable, inputs)
        # The call's new seed-generator states, so the next call draws new noise, as in TF.
        for variable, new_value in zip(model.non_trainable_variables, non_trainable, strict=True):
            variable.assign(new_value)
        # jax.grad gives zeros for a weight the loss never reads; TensorFlow gives None. The
        # weights no equation of the traced loss reads get None here too.
        jaxpr = jax.make_jaxpr(lambda *args: value(*args)[0])(trainable, inputs).jaxpr
        read = {id(var) for equation in jaxpr.eqns for var in equation.invars}
        read |= {id(var) for var in jaxpr.outvars}
        variable_grads = [
            grad if id(var) in read else None
            for grad, var in zip(variable_grads, jaxpr.invars[: len(trainable)], strict=True)
        ]
        return variable_grads, input_grads
    raise NotImplementedError(f"check_training runs under TensorFlow and JAX, not {backend}")
