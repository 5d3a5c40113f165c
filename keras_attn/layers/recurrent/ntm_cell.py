"""One step of a Neural Turing Machine: LSTM controller, read and write heads over a memory."""

from __future__ import annotations

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers._arguments import serialize_arguments

# Added under the square roots of the cosine similarity's norms: keeps K and its gradient finite
# for an all-zero key or memory row (an erase vector can saturate to exactly 1).
COSINE_EPSILON = 1e-16
# Added to the shifted weights before the logarithm of the sharpening step (w~ can be exactly 0).
SHARPEN_EPSILON = 1e-12


@keras_attn_export("keras_attn.layers.NTMCell")
class NTMCell(keras.layers.Layer):
    """Cell of the Neural Turing Machine (Graves et al., 2014): LSTM controller + addressed memory.

    Per step, with memory `M` `(batch, N, M_w)`, `R` read and `W` write heads:

        h, c    = LSTM([x^(t); r^(t-1)_1..R], h^(t-1), c^(t-1))             (batch, units)
        p_j     = clip(h W_j + b_j, -clip_value, clip_value)                  one vector per head
        k       = p[key]                                                      (batch, M_w)
        β       = softplus(p[β])  >= 0,     g = sigmoid(p[g])                 (batch, 1)
        s       = softmax(p[s]) over shifts -r..r                             (batch, 2r+1)
        γ       = 1 + softplus(p[γ]) >= 1                                     (batch, 1)
        K[k, M(i)] = k·M(i) / (|k| |M(i)|)                                    eq. 6
        w^c(i)  = softmax_i(β K[k, M(i)])                                     eq. 5   (batch, N)
        w^g     = g w^c + (1 - g) w^(t-1)                                     eq. 7
        w~(i)   = Σ_{j=-r..r} s(j) w^g((i - j) mod N)                         eq. 8 (circular)
        w(i)    = w~(i)^γ / Σ_n w~(n)^γ                                       eq. 9
        write:  M~ = M^(t-1) ⊙ Π_h (1 - w_h e_hᵀ),   e_h = sigmoid(p_h[e])    eq. 3
                M^(t) = M~ + Σ_h w_h a_hᵀ,           a_h = tanh(p_h[a])       eq. 4
        read:   r_j = Σ_i w_j(i) M^(t)(i)                                     eq. 2   (batch, M_w)
        y^(t)   = [h; r_1..R] W_y + b_y          (or [h; r_1..R] without output_units)

    All heads address `M^(t-1)`; the writes happen first and the reads see `M^(t)`, so a vector
    can be read back at the step it is written. The paper leaves the key and add-vector
    activations open: the key is linear (the cosine is scale-invariant) and the add vector is
    `tanh`. The cosine norms are `sqrt(|v|² + 1e-16)` and sharpening is evaluated as
    `softmax(γ log(w~ + 1e-12))`, which equals eq. 9 but cannot underflow to 0/0 when `w~` is
    flat and `γ` large; all addressing runs in float32 whatever the compute dtype.

    Initial state (`get_initial_state`): `h = c = 0`, memory filled with the constant
    `memory_initial_value` (not learned; Collier and Beel, 2018, found a small constant the
    fastest to train), read vectors 0, and every head's previous weighting one-hot on location 0.

    The state is the flat list `[h, c, memory (batch, N*M_w), reads (batch, R*M_w),
    weights (batch, (R+W)*N)]` (read heads first), so Keras' `RNN` masks and stores it like
    any other cell's. Use it inside `keras.layers.RNN` or through `NeuralTuringMachine`.

    Args:
        controller_units: size of the LSTM controller's state.
        memory_size: number of memory locations `N`.
        memory_width: size `M_w` of each location.
        num_read_heads: `R >= 1`.
        num_write_heads: `W >= 1`.
        shift_range: `r`: the shift weighting runs over `-r..r` (`2r+1` shifts).
        output_units: size of the output projection, or None for `y = [h; r_1..R]`.
        clip_value: the head parameters are clipped to `[-clip_value, clip_value]`; None for no
            clipping.
        memory_initial_value: the constant every memory cell starts from.

    Call arguments:
        inputs: `x^(t)` `(batch, d)`.
        states: the five state tensors listed above.
        training: unused (no dropout).

    Returns:
        `(y^(t), new_states)`; `y^(t)` is `(batch, output_units)` or
        `(batch, controller_units + R*M_w)`.

    Example:

    >>> import numpy as np
    >>> cell = NTMCell(8, memory_size=6, memory_width=4, output_units=3)
    >>> rnn = keras.layers.RNN(cell, return_sequences=True)
    >>> tuple(rnn(np.zeros((2, 5, 7), "float32")).shape)
    (2, 5, 3)

    References:
        Graves, Wayne and Danihelka, 2014, "Neural Turing Machines", arXiv:1410.5401;
        Collier and Beel, 2018, "Implementing Neural Turing Machines", arXiv:1807.08518.
    """

    def __init__(
        self,
        controller_units: int,
        memory_size: int = 128,
        memory_width: int = 20,
        num_read_heads: int = 1,
        num_write_heads: int = 1,
        shift_range: int = 1,
        output_units: int | None = None,
        clip_value: float | None = 20.0,
        memory_initial_value: float = 1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("controller_units", controller_units),
            ("memory_size", memory_size),
            ("memory_width", memory_width),
            ("num_read_heads", num_read_heads),
            ("num_write_heads", num_write_heads),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(
                    f"Expected {name} to be a positive integer. Received: {name}={value!r}"
                )
        if not isinstance(shift_range, int) or isinstance(shift_range, bool) or shift_range < 0:
            raise ValueError(
                "Expected shift_range to be a non-negative integer. "
                f"Received: shift_range={shift_range!r}"
            )
        if output_units is not None and (
            not isinstance(output_units, int) or isinstance(output_units, bool) or output_units <= 0
        ):
            raise ValueError(
                "Expected output_units to be None or a positive integer. "
                f"Received: output_units={output_units!r}"
            )
        if clip_value is not None and (
            not isinstance(clip_value, (int, float)) or not clip_value > 0
        ):
            raise ValueError(
                "Expected clip_value to be None or a positive number. "
                f"Received: clip_value={clip_value!r}"
            )
        if not isinstance(memory_initial_value, (int, float)) or isinstance(
            memory_initial_value, bool
        ):
            raise ValueError(
                "Expected memory_initial_value to be a number. "
                f"Received: memory_initial_value={memory_initial_value!r}"
            )
        self.controller_units = controller_units
        self.memory_size = memory_size
        self.memory_width = memory_width
        self.num_read_heads = num_read_heads
        self.num_write_heads = num_write_heads
        self.shift_range = shift_range
        self.output_units = output_units
        self.clip_value = None if clip_value is None else float(clip_value)
        self.memory_initial_value = float(memory_initial_value)
        num_heads = num_read_heads + num_write_heads
        self.state_size = [
            controller_units,
            controller_units,
            memory_size * memory_width,
            num_read_heads * memory_width,
            num_heads * memory_size,
        ]
        self.output_size = (
            controller_units + num_read_heads * memory_width
            if output_units is None
            else output_units
        )

    @property
    def addressing_size(self) -> int:
        """Parameters of one head's addressing: key `M_w`, β, g, `2r+1` shifts, γ."""
        return self.memory_width + 3 + 2 * self.shift_range + 1

    @property
    def head_parameters_size(self) -> int:
        """All heads' parameters: addressing for every head, plus erase and add per write head."""
        num_heads = self.num_read_heads + self.num_write_heads
        return num_heads * self.addressing_size + self.num_write_heads * 2 * self.memory_width

    def build(self, input_shape):
        read_size = self.num_read_heads * self.memory_width
        self.controller = keras.layers.LSTMCell(
            self.controller_units, dtype=self.dtype_policy, name="controller"
        )
        self.controller.build((None, input_shape[-1] + read_size))
        self.head_parameters = keras.layers.Dense(
            self.head_parameters_size, dtype=self.dtype_policy, name="head_parameters"
        )
        self.head_parameters.build((None, self.controller_units))
        if self.output_units is not None:
            self.output_projection = keras.layers.Dense(
                self.output_units, dtype=self.dtype_policy, name="output_projection"
            )
            self.output_projection.build((None, self.controller_units + read_size))
        self.built = True

    @staticmethod
    def content_weights(key, beta, memory):
        """Eqs. 5–6: `softmax_i(β K[k, M(i)])` for `key` `(batch, M_w)`, `beta` `(batch, 1)`,
        `memory` `(batch, N, M_w)`; returns `(batch, N)`."""
        # (batch, N, M_w) x (batch, M_w) -> (batch, N)
        dot = ops.einsum("bnm,bm->bn", memory, key)
        key_norm = ops.sqrt(ops.sum(ops.square(key), axis=-1, keepdims=True) + COSINE_EPSILON)
        memory_norm = ops.sqrt(ops.sum(ops.square(memory), axis=-1) + COSINE_EPSILON)
        return ops.softmax(beta * dot / (key_norm * memory_norm), axis=-1)

    @staticmethod
    def interpolate(content, gate, previous):
        """Eq. 7: `w^g = g w^c + (1 - g) w^(t-1)`, `gate` `(batch, 1)`."""
        return gate * content + (1.0 - gate) * previous

    @staticmethod
    def shift(weights, shifts):
        """Eq. 8, circular: `w~(i) = Σ_j s(j) w((i - j) mod N)` for `shifts` `(batch, 2r+1)`
        ordered `-r..r`."""
        shift_range = (shifts.shape[-1] - 1) // 2
        rolled = [ops.roll(weights, j, axis=-1) for j in range(-shift_range, shift_range + 1)]
        # (batch, 2r+1, N) weighted by (batch, 2r+1, 1), summed over the shifts -> (batch, N)
        return ops.sum(ops.stack(rolled, axis=1) * shifts[:, :, None], axis=1)

    @staticmethod
    def sharpen(weights, gamma):
        """Eq. 9: `w~^γ / Σ w~^γ`, computed as `softmax(γ log(w~ + 1e-12))`."""
        return ops.softmax(gamma * ops.log(weights + SHARPEN_EPSILON), axis=-1)

    @staticmethod
    def read(weights, memory):
        """Eq. 2: `r = Σ_i w(i) M(i)`: `(batch, N)`, `(batch, N, M_w)` -> `(batch, M_w)`."""
        return ops.einsum("bn,bnm->bm", weights, memory)

    @staticmethod
    def write(memory, weights, erase, add):
        """Eqs. 3–4 for all write heads at once: `weights` `(batch, W, N)`, `erase` and `add`
        `(batch, W, M_w)`; erasures multiply, additions sum."""
        # (batch, W, N, 1) * (batch, W, 1, M_w) -> (batch, W, N, M_w), product over heads
        keep = ops.prod(1.0 - weights[:, :, :, None] * erase[:, :, None, :], axis=1)
        return memory * keep + ops.einsum("bhn,bhm->bnm", weights, add)

    def address(self, parameters, previous, memory):
        """Eqs. 5–9 for one head from its raw (clipped) parameters `(batch, addressing_size)`."""
        width, shifts = self.memory_width, 2 * self.shift_range + 1
        key = parameters[:, :width]
        beta = ops.softplus(parameters[:, width : width + 1])
        gate = ops.sigmoid(parameters[:, width + 1 : width + 2])
        shift = ops.softmax(parameters[:, width + 2 : width + 2 + shifts], axis=-1)
        gamma = 1.0 + ops.softplus(parameters[:, width + 2 + shifts :])
        weights = self.content_weights(key, beta, memory)
        weights = self.interpolate(weights, gate, previous)
        weights = self.shift(weights, shift)
        return self.sharpen(weights, gamma)

    def call(self, inputs, states, training=None):
        h, c, memory, reads, weights = states
        batch = ops.shape(inputs)[0]
        n, width = self.memory_size, self.memory_width
        num_read, num_write = self.num_read_heads, self.num_write_heads
        controller_out, (h, c) = self.controller(
            ops.concatenate([inputs, reads], axis=-1), [h, c], training=training
        )
        parameters = ops.cast(self.head_parameters(controller_out), "float32")
        if self.clip_value is not None:
            parameters = ops.clip(parameters, -self.clip_value, self.clip_value)
        # Addressing, writing and reading in float32 (normalisers and pow-like sharpening).
        memory = ops.reshape(ops.cast(memory, "float32"), (batch, n, width))
        previous = ops.reshape(ops.cast(weights, "float32"), (batch, num_read + num_write, n))
        size = self.addressing_size
        new_weights = []
        for head in range(num_read + num_write):
            head_parameters = parameters[:, head * size : (head + 1) * size]
            new_weights.append(self.address(head_parameters, previous[:, head], memory))
        # Erase and add vectors follow the addressing parameters: (batch, W, M_w) each.
        erase_add = ops.reshape(
            parameters[:, (num_read + num_write) * size :], (batch, num_write, 2, width)
        )
        memory = self.write(
            memory,
            ops.stack(new_weights[num_read:], axis=1),
            ops.sigmoid(erase_add[:, :, 0]),
            ops.tanh(erase_add[:, :, 1]),
        )
        reads = ops.concatenate([self.read(w, memory) for w in new_weights[:num_read]], axis=-1)
        reads = ops.cast(reads, self.compute_dtype)
        output = ops.concatenate([controller_out, reads], axis=-1)
        if self.output_units is not None:
            output = self.output_projection(output)
        new_states = [
            h,
            c,
            ops.cast(ops.reshape(memory, (batch, n * width)), self.compute_dtype),
            reads,
            ops.cast(ops.concatenate(new_weights, axis=-1), self.compute_dtype),
        ]
        return output, new_states

    def get_initial_state(self, batch_size=None):
        dtype = self.compute_dtype
        num_heads = self.num_read_heads + self.num_write_heads
        first_location = ops.one_hot(ops.zeros((num_heads,), "int32"), self.memory_size)
        return [
            ops.zeros((batch_size, self.controller_units), dtype=dtype),
            ops.zeros((batch_size, self.controller_units), dtype=dtype),
            ops.full(
                (batch_size, self.memory_size * self.memory_width),
                self.memory_initial_value,
                dtype=dtype,
            ),
            ops.zeros((batch_size, self.num_read_heads * self.memory_width), dtype=dtype),
            ops.cast(ops.tile(ops.reshape(first_location, (1, -1)), (batch_size, 1)), dtype=dtype),
        ]

    def get_config(self):
        config = super().get_config()
        config.update(
            serialize_arguments(
                self,
                "controller_units",
                "memory_size",
                "memory_width",
                "num_read_heads",
                "num_write_heads",
                "shift_range",
                "output_units",
                "clip_value",
                "memory_initial_value",
            )
        )
        return config
