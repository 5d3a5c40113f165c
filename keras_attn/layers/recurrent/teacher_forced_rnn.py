"""Output-recurrent network trained with teacher forcing and scheduled sampling."""

from __future__ import annotations

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.mask_passthrough import FirstInputMaskPassthrough
from keras_attn.layers.recurrent._output_feedback import OutputFeedbackDecoder
from keras_attn.layers.recurrent.jordan_rnn_cell import JordanRNNCell


@keras_attn_export("keras_attn.layers.TeacherForcedRNN")
class TeacherForcedRNN(FirstInputMaskPassthrough, OutputFeedbackDecoder):
    """Output-recurrent RNN: fed the target `y^(t-1)` in training, its own output after.

    For inputs `x` `(batch, T, d)`, with `f^(0) = 0`:

        h^(t) = activation(x^(t) W_x + f^(t-1) W_f + b)          (batch, units)
        o^(t) = output_activation(h^(t) W_out + b_out)            (batch, q)
        f^(t) = y^(t)       teacher forcing (training, targets given), with probability 1 - p
              = pred(o^(t)) the model's own prediction, with probability p; always at inference

    `pred(o) = o` for `feedback="continuous"` (targets are vectors `(batch, T, q)`); for
    `feedback="categorical"` the targets are ids `(batch, T)` in `[0, q)`, fed back one-hot, and
    `pred(o) = one_hot(argmax(o))` (greedy), so `W_f` acts as an embedding of the previous token.
    There is no hidden-to-hidden connection: with `p = 0` every step depends on the past only
    through the given `y^(t-1)`, so the losses of all steps decouple and can be computed in
    parallel (Goodfellow et al., 2016, section 10.2.1). The step is `JordanRNNCell`
    (`layer.cell`): at inference the layer is exactly a `JordanRNN` with the same weights.

    Scheduled sampling (Bengio et al., 2015): in training each (sequence, step) flips a coin and
    feeds the model's own prediction with probability `p`; `p` is fixed (`schedule="constant"`,
    `p = sampling_probability`, default 0 = pure teacher forcing) or decays with the training step
    `i` (`"linear"`: `min(cap, decay * i)`; `"exponential"`: `min(cap, 1 - decay^i)`;
    `"inverse_sigmoid"`: `min(cap, 1 - decay / (decay + exp(i / decay)))`, where the paper's
    probability of feeding the truth is `epsilon_i = 1 - p_i` and `cap = sampling_probability`,
    default 1). `sampling_probability_at(i)` gives `p_i`. No gradient flows through the coin nor
    through the argmax of categorical feedback; continuous feedback `o^(t)` is differentiated.

    Args:
        units: size of the hidden layer.
        output_units: size `q` of the outputs (the number of classes for categorical feedback).
        activation: hidden activation.
        output_activation: output activation (None: linear outputs or logits).
        feedback: `"continuous"` or `"categorical"` (see above).
        schedule: `"constant"`, `"linear"`, `"exponential"` or `"inverse_sigmoid"`.
        sampling_probability: `p` for `"constant"` (default 0), the cap of the decaying
            schedules (default 1).
        decay: the schedule's rate: `c > 0` (linear), `0 < k < 1` (exponential), `k >= 1`
            (inverse sigmoid); None for `"constant"`.
        seed: seed of the coin flips.

    Call arguments:
        inputs: `x` `(batch, T, d)`.
        targets: `y` `(batch, T, q)` (continuous) or ids `(batch, T)` (categorical); step `t`
            predicts `y^(t)`. Used only in training; without them the layer runs free.
        inputs_mask: bool `(batch, T)`; padded steps keep the state (and the fed-back value) and
            output zeros. Filled from Keras masking (as `mask` when `inputs` is the only tensor
            argument, as `inputs_mask` otherwise).
        mask: the same mask under the name Keras uses for a single tensor argument.
        step: training step `i` for a decaying schedule (e.g. `self.optimizer.iterations`).
        sampling_probability: `p` for this call, overriding the schedule.
        training: teacher forcing/scheduled sampling when True and `targets` are given.

    Returns:
        Outputs `o^(1..T)` `(batch, T, q)`, carrying the inputs' Keras mask.

    Example:

    >>> import numpy as np
    >>> rnn = TeacherForcedRNN(8, output_units=2)
    >>> x = np.zeros((3, 5, 4), "float32"); y = np.ones((3, 5, 2), "float32")
    >>> tuple(rnn(x, y, training=True).shape), tuple(rnn(x).shape)
    ((3, 5, 2), (3, 5, 2))

    References:
        Williams and Zipser, 1989, "A learning algorithm for continually running fully recurrent
        neural networks"; Bengio, Vinyals, Jaitly and Shazeer, 2015, "Scheduled Sampling for
        Sequence Prediction with Recurrent Neural Networks", arXiv:1506.03099; Goodfellow,
        Bengio and Courville, 2016, "Deep Learning", section 10.2.1.
    """

    cell_class = JordanRNNCell

    def __init__(
        self,
        units: int,
        output_units: int,
        activation="tanh",
        output_activation=None,
        feedback: str = "continuous",
        schedule: str = "constant",
        sampling_probability: float | None = None,
        decay: float | None = None,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(
            units=units,
            output_units=output_units,
            feedback=feedback,
            activation=activation,
            output_activation=output_activation,
            schedule=schedule,
            sampling_probability=sampling_probability,
            decay=decay,
            seed=seed,
            **kwargs,
        )
        self.supports_masking = True

    def build(self, inputs_shape):
        self.build_cell(inputs_shape[0], inputs_shape[-1])
        self.built = True

    def _step(self, inputs_t, feedback, states, training):
        output, _ = self.cell(inputs_t, [feedback])
        return output, []

    def call(
        self,
        inputs,
        targets=None,
        inputs_mask=None,
        mask=None,
        step=None,
        sampling_probability=None,
        training=None,
    ):
        inputs = ops.cast(inputs, self.compute_dtype)
        shape = ops.shape(inputs)
        return self._decode(
            batch_size=shape[0],
            length=shape[1],
            states=[],
            targets=targets,
            mask=inputs_mask if inputs_mask is not None else mask,
            step_inputs=inputs,
            step=step,
            sampling_probability=sampling_probability,
            training=training,
        )

    def compute_output_shape(self, inputs_shape, targets_shape=None):
        return (inputs_shape[0], inputs_shape[1], self.output_units)
