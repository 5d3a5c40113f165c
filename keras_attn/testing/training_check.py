"""The training check: every trainable weight gets a finite gradient; a few steps lower a loss.

Keras 3 has no backend-neutral gradient function: `_gradient_function` takes them with the
backend's own (`tf.GradientTape`, `jax.grad` over `Model.stateless_call`,
`torch.autograd.grad`), the rest is `keras.ops`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    check. `keras.utils.set_random_seed(seed)` is called first. Runs under TensorFlow, JAX and
    PyTorch.

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
    float_inputs = [name for name, x in data.items() if is_float(x)]
    gradients = _gradient_function(model, mse, data, float_inputs)
    variable_grads, input_grads = gradients()

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
        inference_loss = _inference_loss_function(model, mse, data)

        def evaluate() -> float:
            return float(inference_loss())

        what = "the MSE loss"
    else:
        random_state = [(v, to_numpy(v)) for v in model.non_trainable_variables]

        def evaluate() -> float:
            for variable, value in random_state:
                variable.assign(value)
            keras.utils.set_random_seed(seed)
            return float(to_numpy(loss_fn(training=True)))

        what = f"the expected training-mode MSE loss ({samples} samples, same noise)"

    optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
    initial = evaluate()
    for _ in range(steps):
        grads, _ = gradients()
        optimizer.apply_gradients(zip(grads, variables, strict=True))
    final = evaluate()
    if not np.isfinite(final) or final >= initial:
        fail(
            check,
            spec,
            f"{steps} Adam steps (learning_rate={learning_rate}) did not lower {what}: "
            f"{initial:.6g} -> {final:.6g}",
        )


def _gradient_function(
    model: keras.Model, loss: Callable, data: dict, input_names: list
) -> Callable[[], tuple[list, dict]]:
    """A function that returns the gradients of `loss(model(data, training=True))` with respect
    to the model's trainable variables (a list, None where none flows) and to the inputs named
    `input_names` (a dict by name), at the variables' current values; each call is a new
    training-mode pass (new noise).

    Under JAX the gradient is compiled once (`jax.jit` over `Model.stateless_call`, the variables
    and the data as arguments) and every call reuses it: eagerly, each of the pass's small ops
    would be compiled on its own.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def tensorflow_gradients() -> tuple[list, dict]:
            inputs = {name: data[name] for name in input_names}
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(list(inputs.values()))
                value = loss(model(data, training=True))
            variable_grads = tape.gradient(value, model.trainable_variables)
            input_grads = tape.gradient(value, inputs)
            del tape
            return variable_grads, input_grads

        return tensorflow_gradients
    if backend == "jax":
        import jax

        def value(trainable, non_trainable, watched, rest):
            outputs, non_trainable = model.stateless_call(
                trainable, non_trainable, {**rest, **watched}, training=True
            )
            return loss(outputs), non_trainable

        gradient = jax.jit(jax.grad(value, argnums=(0, 2), has_aux=True))
        watched = {name: data[name] for name in input_names}
        rest = {name: x for name, x in data.items() if name not in watched}
        # jax.grad gives zeros for a weight the loss never reads; TensorFlow gives None. The
        # weights no equation of the traced loss reads get None here too.
        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]
        jaxpr = jax.make_jaxpr(lambda *args: value(*args)[0])(
            trainable, non_trainable, watched, rest
        ).jaxpr
        read = {id(var) for equation in jaxpr.eqns for var in equation.invars}
        read |= {id(var) for var in jaxpr.outvars}
        flows = [id(var) in read for var in jaxpr.invars[: len(trainable)]]

        def jax_gradients() -> tuple[list, dict]:
            (variable_grads, input_grads), non_trainable = gradient(
                [v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
                watched,
                rest,
            )
            # The call's new seed-generator states, so the next call draws new noise, as in TF.
            for variable, new_value in zip(
                model.non_trainable_variables, non_trainable, strict=True
            ):
                variable.assign(new_value)
            variable_grads = [
                grad if flow else None for grad, flow in zip(variable_grads, flows, strict=True)
            ]
            return variable_grads, input_grads

        return jax_gradients
    if backend == "torch":
        import torch

        def torch_gradients() -> tuple[list, dict]:
            # Fresh leaf tensors each call: the graph of one pass holds no state of the last.
            watched = {name: data[name].detach().requires_grad_(True) for name in input_names}
            value = loss(model({**data, **watched}, training=True))
            variables = [v.value for v in model.trainable_variables]
            sources = [*variables, *watched.values()]
            if value.requires_grad:
                # allow_unused: None for a weight the loss never reads, as TensorFlow gives.
                grads = torch.autograd.grad(value, sources, allow_unused=True)
            else:  # the loss reads no weight and no float input
                grads = [None] * len(sources)
            return list(grads[: len(variables)]), dict(
                zip(watched, grads[len(variables) :], strict=True)
            )

        return torch_gradients
    raise NotImplementedError(
        f"check_training runs under TensorFlow, JAX and PyTorch, not {backend}"
    )


def _inference_loss_function(model: keras.Model, loss: Callable, data: dict) -> Callable[[], Any]:
    """A function that returns `loss(model(data, training=False))` at the variables' current
    values; under JAX compiled once (`jax.jit` over `Model.stateless_call`), under PyTorch
    without autograd."""
    if keras.backend.backend() == "torch":
        import torch

        def torch_value():
            with torch.no_grad():  # no graph kept for a loss that is only read
                return loss(model(data, training=False))

        return torch_value
    if keras.backend.backend() != "jax":
        return lambda: loss(model(data, training=False))
    import jax

    @jax.jit
    def value(trainable, non_trainable, data):
        outputs, _ = model.stateless_call(trainable, non_trainable, data, training=False)
        return loss(outputs)

    return lambda: value(
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        data,
    )
