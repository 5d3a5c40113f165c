"""GPU speed under mixed precision and XLA: the Transformer train step and multi-head attention.

    KERAS_BACKEND=jax python benchmarks/gpu.py [--quick | --cpu-check] [--out FILE.md]

Runs Keras 3 on the JAX backend, where every jitted step is one XLA program, so the TensorFlow
wheel is not needed on the GPU machine (only `keras_attn`'s Keras-level layers and models are
imported). In one process, for each of `mixed_bfloat16` and `mixed_float16` (float16 with
Keras' dynamic loss scaling, `LossScaleOptimizer`, on both sides):

(a) The Transformer encoder–decoder train step (forward, sparse cross-entropy, backward, Adam;
    `jax.jit`): `keras_attn.models.transformer_translator` against the same translator built
    from keras-hub's `TokenAndPositionEmbedding`, `TransformerEncoder` and `TransformerDecoder`
    (post-LN, dropout 0.1, output tied to the target embedding), the sizes of `benchmarks/
    transformer.py` scaled to a GPU: d = 512, 8 heads, d_ff = 2048, 6 + 6 layers, V = 32,000,
    B = 64, T_x = T_y = 128. Model FLOP utilisation (MFU) = `transformer_train_flops` / step
    time / peak, against the card's dense bf16/fp16 datasheet peak and against the rate of an
    8192³ bf16 matrix product measured on such a machine.
(b) Multi-head self-attention, one training step (forward, mean-square loss, backward, SGD):
    `keras_attn.layers.MultiHeadAttention` (fused QKV projection, and `ours_unfused` with the
    keys passed separately) against `keras.layers.MultiHeadAttention` with the same initial
    weights, at T = 512 and T = 128. Keras' layer may route to a fused cuDNN attention kernel
    (`ops.dot_product_attention`); `keras_xla` is Keras' layer with flash attention disabled,
    and the table says for every variant whether its compiled program holds a cuDNN
    fused-attention call.

Every step is compiled ahead of timing (the compile time is reported), warmed up, then timed in
interleaved rounds (A, B, C, A, B, C, ...), each sample running `steps` back-to-back steps and
waiting for the last; medians over rounds are reported, and a ratio is the median of the
per-round ratios `reference time / our time` (> 1: ours is faster). A wall-clock budget
(`--budget-s`) shortens the rounds and skips the blocks that would not fit, so the run ends in
time; the table is rewritten to `--out` after every block.

FLOPs per train step (multiply–adds count 2; backward = 2 x forward; layer norms, softmax,
biases and the embedding gathers are left out), batch B, source T_x, target T_y, N layers:

    3 B [ N (2 T_x (4 d^2 + 2 d d_ff) + 4 T_x^2 d)                           encoder
        + N (2 T_y (6 d^2 + 2 d d_ff) + 2 T_x (2 d^2) + 4 T_y^2 d + 4 T_y T_x d) decoder
        + 2 T_y d V ]                                                        tied output

i.e. 6 x (weights in matrix products) x (tokens through them) plus 12 T_q T_k d per attention
layer; the causal self-attention is counted in full (the whole T_y x T_y product is computed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ["KERAS_BACKEND"] == "jax" and importlib.util.find_spec("jax") is None:
    sys.exit(
        "benchmarks/gpu.py runs Keras on its JAX backend, and jax is not installed here: "
        "pip install jax (with its CUDA plugin on a GPU), or run benchmarks/gpu_device.sh"
    )
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # keras_attn from this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

# keras-hub's embeddings hand a Keras mask to sublayers that drop it (by design); not our concern.
warnings.filterwarnings("ignore", message=".*does not support masking.*")

POLICIES = ("mixed_bfloat16", "mixed_float16")
DATASHEET_PEAK = "datasheet dense bf16/fp16"
MEASURED_PEAK = "measured 8192^3 bf16 matmul"
# (device-kind substring, {peak name: FLOP/s}); the first match wins. Datasheet: NVIDIA H100 /
# H200 SXM dense (no sparsity) BF16/FP16 tensor-core rate; measured: an 8192 x 8192 x 8192 bf16
# matrix product on random data on such a machine.
PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H200", {DATASHEET_PEAK: 989e12, MEASURED_PEAK: 790e12}),
    ("H100 PCIe", {DATASHEET_PEAK: 756e12}),
    ("H100", {DATASHEET_PEAK: 989e12, MEASURED_PEAK: 798e12}),
)
CUDNN_ATTENTION_MARKER = "__cudnn$fmha"


@dataclass(frozen=True)
class Size:
    """One translator and batch size, shared by both sides of a comparison."""

    batch: int = 64
    source_length: int = 128
    target_length: int = 128
    d_model: int = 512
    num_heads: int = 8
    ff_dim: int = 2048
    num_layers: int = 6
    vocab_size: int = 32000
    dropout: float = 0.1

    def label(self) -> str:
        return (
            f"B={self.batch} T_x={self.source_length} T_y={self.target_length} "
            f"d={self.d_model} h={self.num_heads} ff={self.ff_dim} N={self.num_layers}+"
            f"{self.num_layers} V={self.vocab_size}"
        )


@dataclass(frozen=True)
class AttentionShape:
    """Self-attention of `(batch, length, dim)` inputs with `heads` heads of `dim // heads`."""

    batch: int
    length: int
    dim: int
    heads: int

    def label(self) -> str:
        return f"B={self.batch} T={self.length} D={self.dim} H={self.heads}"


@dataclass(frozen=True)
class Plan:
    """What one run measures: sizes, rounds, steps per timed sample, wall-clock budget."""

    translator: Size
    attention: tuple[AttentionShape, ...]
    rounds: int
    warmup: int
    translator_steps: int
    attention_steps: int
    budget_s: float


GPU_PLAN = Plan(
    translator=Size(),
    attention=(AttentionShape(32, 512, 512, 8), AttentionShape(128, 128, 512, 8)),
    rounds=20,
    warmup=2,
    translator_steps=10,
    attention_steps=50,
    budget_s=330.0,
)
QUICK_PLAN = Plan(
    translator=Size(),
    attention=GPU_PLAN.attention,
    rounds=7,
    warmup=1,
    translator_steps=5,
    attention_steps=20,
    budget_s=200.0,
)
CPU_CHECK_PLAN = Plan(
    translator=Size(
        batch=2,
        source_length=8,
        target_length=6,
        d_model=16,
        num_heads=2,
        ff_dim=32,
        num_layers=1,
        vocab_size=50,
    ),
    attention=(AttentionShape(2, 16, 16, 2), AttentionShape(2, 8, 16, 2)),
    rounds=2,
    warmup=1,
    translator_steps=2,
    attention_steps=2,
    budget_s=600.0,
)


def transformer_matmul_params(size: Size) -> int:
    """Weights that enter matrix products: attention and feed-forward kernels of both stacks and
    the (tied) output projection; embedding lookups, biases and layer norms are not counted."""
    d, f, n = size.d_model, size.ff_dim, size.num_layers
    encoder = n * (4 * d * d + 2 * d * f)
    decoder = n * (8 * d * d + 2 * d * f)
    return encoder + decoder + d * size.vocab_size


def transformer_train_flops(size: Size) -> float:
    """FLOPs of one translator train step (formula in the module docstring)."""
    d, f, n, v = size.d_model, size.ff_dim, size.num_layers, size.vocab_size
    s, t = size.source_length, size.target_length
    encoder = n * (2 * s * (4 * d * d + 2 * d * f) + 4 * s * s * d)
    decoder = n * (
        2 * t * (6 * d * d + 2 * d * f) + 2 * s * 2 * d * d + 4 * t * t * d + 4 * t * s * d
    )
    output = 2 * t * d * v
    return 3.0 * size.batch * (encoder + decoder + output)


def attention_train_flops(shape: AttentionShape) -> float:
    """FLOPs of one self-attention train step: Q, K, V and output projections (`8 T D^2` per
    sequence) plus the scores and the weighted sum (`4 T^2 D`), times 3 for the backward pass."""
    t, d = shape.length, shape.dim
    return 3.0 * shape.batch * (8 * t * d * d + 4 * t * t * d)


def peaks_for(device_kind: str) -> dict[str, float]:
    """The peak rates known for a device kind (`jax.devices()[0].device_kind`), or `{}`."""
    for marker, peaks in PEAKS:
        if marker.lower() in device_kind.lower():
            return dict(peaks)
    return {}


def time_interleaved(
    fns: dict[str, Callable[[], object]],
    rounds: int,
    warmup: int,
    deadline: float | None = None,
    min_rounds: int = 3,
    block: Callable[[object], object] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of every function, called round-robin after `warmup` untimed calls each.

    Stops after `min_rounds` rounds once `time.monotonic()` passes `deadline`. `block` waits for
    a call's result (JAX dispatches asynchronously); by default `jax.block_until_ready`.
    """
    if block is None:
        import jax

        block = jax.block_until_ready
    for fn in fns.values():
        for _ in range(warmup):
            block(fn())
    times: dict[str, list[float]] = {name: [] for name in fns}
    for index in range(rounds):
        if deadline is not None and index >= min_rounds and time.monotonic() > deadline:
            break
        for name, fn in fns.items():
            start = time.perf_counter()
            block(fn())
            times[name].append(time.perf_counter() - start)
    return times


def median_ratio(reference: Sequence[float], ours: Sequence[float]) -> float:
    """The median over rounds of `reference time / our time`."""
    return statistics.median(r / o for r, o in zip(reference, ours, strict=True))


class TrainStep:
    """A compiled `(state, *batch) -> (loss, state)` train step and the state it threads.

    `call(trainable_values, non_trainable_values, *batch)` returns `(predictions,
    non_trainable_values)` (a `stateless_call`); `loss_fn(predictions, *batch)` a scalar. Under
    a `LossScaleOptimizer` the loss is scaled before differentiation and the gradients unscaled
    and checked for overflow by its `stateless_apply`, as Keras' own JAX trainer does.
    """

    def __init__(
        self,
        layer: keras.layers.Layer,
        call: Callable,
        loss_fn: Callable,
        optimizer: keras.optimizers.Optimizer,
        batch: tuple,
    ):
        import jax

        trainable = layer.trainable_variables
        optimizer.build(trainable)
        scales_loss = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

        def compute(trainable_values, non_trainable_values, optimizer_values, *data):
            predictions, non_trainable_values = call(trainable_values, non_trainable_values, *data)
            loss = loss_fn(predictions, *data)
            scaled = loss
            if scales_loss:
                mapping = list(zip(optimizer.variables, optimizer_values, strict=True))
                with keras.StatelessScope(state_mapping=mapping):
                    scaled = optimizer.scale_loss(loss)
            return scaled, (loss, non_trainable_values)

        gradients = jax.value_and_grad(compute, has_aux=True)

        def step(state, *data):
            trainable_values, non_trainable_values, optimizer_values = state
            (_, (loss, non_trainable_values)), grads = gradients(
                trainable_values, non_trainable_values, optimizer_values, *data
            )
            trainable_values, optimizer_values = optimizer.stateless_apply(
                optimizer_values, grads, trainable_values
            )
            return loss, (trainable_values, non_trainable_values, optimizer_values)

        # Copies: the step donates its state, and variants may share a layer's variables.
        self.state = jax.tree.map(
            jax.numpy.copy,
            (
                [v.value for v in trainable],
                [v.value for v in layer.non_trainable_variables],
                [v.value for v in optimizer.variables],
            ),
        )
        self.batch = jax.device_put(batch)
        self.params = layer.count_params()
        start = time.perf_counter()
        lowered = jax.jit(step, donate_argnums=0).lower(self.state, *batch)
        self.trace_s = time.perf_counter() - start
        start = time.perf_counter()
        self.compiled = lowered.compile()
        self.compile_s = time.perf_counter() - start
        self.hlo = self.compiled.as_text() or ""
        self.losses: list[float] = []

    @property
    def uses_cudnn_attention(self) -> bool:
        return CUDNN_ATTENTION_MARKER in self.hlo

    def run(self, steps: int):
        """`steps` train steps back to back; returns the last loss (not waited for)."""
        loss = None
        for _ in range(steps):
            loss, self.state = self.compiled(self.state, *self.batch)
        return loss

    def record_loss(self) -> float:
        """Run one step, wait for it and remember its loss."""
        loss = float(self.run(1))
        self.losses.append(loss)
        return loss


def sparse_cross_entropy(logits, inputs, labels):
    return ops.mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))


def mean_square(outputs, inputs):
    return ops.mean(ops.square(ops.cast(outputs, "float32")))


def make_optimizer(policy: str, optimizer: keras.optimizers.Optimizer):
    """`optimizer`, wrapped in dynamic loss scaling under `mixed_float16`."""
    if policy == "mixed_float16":
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def ours_translator(size: Size) -> keras.Model:
    from keras_attn.models import transformer_translator

    return transformer_translator(
        size.vocab_size,
        size.vocab_size,
        num_layers=size.num_layers,
        d_model=size.d_model,
        num_heads=size.num_heads,
        ff_dim=size.ff_dim,
        dropout=size.dropout,
    )


def keras_hub_translator(size: Size) -> keras.Model:
    """The translator of `benchmarks/transformer.py` from keras-hub layers: post-LN blocks, tied
    output, dropout on embeddings, residual branches and attention weights; positions learned."""
    from keras_hub.layers import TokenAndPositionEmbedding, TransformerDecoder, TransformerEncoder

    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")
    max_length = max(size.source_length, size.target_length)

    def embed(ids, name):
        embedding = TokenAndPositionEmbedding(
            size.vocab_size, max_length, size.d_model, mask_zero=True, name=name
        )
        return embedding, keras.layers.Dropout(size.dropout)(embedding(ids))

    _, memory = embed(source_ids, "source_embedding")
    for index in range(size.num_layers):
        memory = TransformerEncoder(
            size.ff_dim, size.num_heads, dropout=size.dropout, name=f"encoder_{index}"
        )(memory)
    target_embedding, hidden = embed(target_ids, "target_embedding")
    for index in range(size.num_layers):
        hidden = TransformerDecoder(
            size.ff_dim, size.num_heads, dropout=size.dropout, name=f"decoder_{index}"
        )(hidden, memory)
    logits = target_embedding.token_embedding(hidden, reverse=True)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits)


def translator_batch(size: Size, seed: int = 0) -> tuple[dict, np.ndarray]:
    """Random ids without padding: `({"source_ids", "target_ids"}, labels)`, int32."""
    rng = np.random.default_rng(seed)
    source = rng.integers(4, size.vocab_size, (size.batch, size.source_length), dtype=np.int32)
    target = rng.integers(4, size.vocab_size, (size.batch, size.target_length + 1), dtype=np.int32)
    return {"source_ids": source, "target_ids": target[:, :-1]}, target[:, 1:]


def translator_steps(size: Size, policy: str, with_keras_hub: bool = True) -> dict[str, TrainStep]:
    """Compiled Adam train steps of our translator and keras-hub's, built under `policy`."""
    builders = {"ours": ours_translator}
    if with_keras_hub:
        builders["keras-hub"] = keras_hub_translator
    inputs, labels = translator_batch(size)
    steps = {}
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        for name, build in builders.items():
            model = build(size)

            def call(trainable, non_trainable, inputs, labels, model=model):
                return model.stateless_call(trainable, non_trainable, inputs, training=True)

            optimizer = make_optimizer(policy, keras.optimizers.Adam(learning_rate=1e-4))
            steps[name] = TrainStep(model, call, sparse_cross_entropy, optimizer, (inputs, labels))
    finally:
        keras.config.set_dtype_policy(previous)
    return steps


def attention_steps(shape: AttentionShape, policy: str) -> dict[str, TrainStep]:
    """Compiled SGD train steps of Keras' and our multi-head self-attention, same initial
    weights, built under `policy`; inputs already in the compute dtype (no cast in the layer).

    `keras` is the layer as users get it (a fused cuDNN attention kernel where Keras finds one
    usable), `keras_xla` the same with flash attention disabled (XLA's softmax attention, as ours).
    """
    from keras_attn.layers.attention.multi_head_attention import MultiHeadAttention

    key_dim = shape.dim // shape.heads
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    x = np.random.default_rng(0).normal(size=(shape.batch, shape.length, shape.dim))
    x = ops.convert_to_tensor(x, compute_dtype)
    theirs = keras.layers.MultiHeadAttention(shape.heads, key_dim, dtype=policy)
    keras.config.disable_flash_attention()
    try:
        theirs_xla = keras.layers.MultiHeadAttention(shape.heads, key_dim, dtype=policy)
    finally:
        keras.config.enable_flash_attention()  # back to the default: use it where it applies
    ours = MultiHeadAttention(shape.heads, key_dim, dtype=policy)
    for layer in (theirs, theirs_xla, ours):
        layer(x, x)
    theirs_xla.set_weights(theirs.get_weights())
    copy_into_ours(theirs, ours)

    def keras_call(trainable, non_trainable, x):
        return theirs.stateless_call(trainable, non_trainable, x, x)

    def keras_xla_call(trainable, non_trainable, x):
        return theirs_xla.stateless_call(trainable, non_trainable, x, x)

    def ours_call(trainable, non_trainable, x):  # query is value: one fused QKV matmul
        return ours.stateless_call(trainable, non_trainable, x, x)

    def ours_unfused_call(trainable, non_trainable, x):  # a separate key: three projections
        return ours.stateless_call(trainable, non_trainable, x, x, key=x * 1)

    variants = {
        "keras": (theirs, keras_call),
        "keras_xla": (theirs_xla, keras_xla_call),
        "ours": (ours, ours_call),
        "ours_unfused": (ours, ours_unfused_call),
    }
    return {
        name: TrainStep(
            layer,
            call,
            mean_square,
            make_optimizer(policy, keras.optimizers.SGD(learning_rate=1e-3)),
            (x,),
        )
        for name, (layer, call) in variants.items()
    }


def copy_into_ours(theirs: keras.layers.MultiHeadAttention, ours: keras.layers.Layer) -> None:
    """Keras' projection weights into ours (same kernel shapes)."""
    for name, dense in (
        ("query", theirs._query_dense),
        ("key", theirs._key_dense),
        ("value", theirs._value_dense),
        ("output", theirs._output_dense),
    ):
        getattr(ours, f"{name}_kernel").assign(dense.kernel)
        getattr(ours, f"{name}_bias").assign(dense.bias)


def measure(
    steps: dict[str, TrainStep],
    reference: str,
    steps_per_sample: int,
    rounds: int,
    warmup: int,
    timing_s: float,
    end: float,
    flops: float,
    tokens: int,
    peaks: dict[str, float],
) -> list[dict]:
    """Time the steps interleaved; one row per variant (step ms, tokens/s, ratio, MFU).

    Rounds stop (after three) once `timing_s` seconds of timing or the run's `end` have passed.
    """
    for step in steps.values():
        step.record_loss()
    fns = {name: (lambda step=step: step.run(steps_per_sample)) for name, step in steps.items()}
    deadline = min(end, time.monotonic() + timing_s)
    times = time_interleaved(fns, rounds=rounds, warmup=warmup, deadline=deadline)
    rows = []
    for name, step in steps.items():
        step.record_loss()
        seconds = statistics.median(times[name]) / steps_per_sample
        row = {
            "variant": name,
            "trace_s": step.trace_s,
            "compile_s": step.compile_s,
            "step_ms": 1e3 * seconds,
            "tokens_per_s": tokens / seconds,
            "rounds": len(times[name]),
            "ratio": None if name == reference else median_ratio(times[reference], times[name]),
            "cudnn_attention": step.uses_cudnn_attention,
            "loss_first": step.losses[0],
            "loss_last": step.losses[-1],
            "params": step.params,
            "tflops": flops / seconds / 1e12,
        }
        row.update({f"mfu {peak}": flops / seconds / rate for peak, rate in peaks.items()})
        rows.append(row)
    return rows


def format_table(blocks: list[dict], peaks: dict[str, float]) -> str:
    """Markdown: one line per (block, variant)."""
    peak_names = list(peaks)
    header = [
        "case",
        "policy",
        "variant",
        "params",
        "trace + XLA compile s",
        "step ms",
        "tokens/s",
        "ref time / this",
        "TFLOP/s",
        *[f"MFU vs {name} ({peaks[name] / 1e12:.0f})" for name in peak_names],
        "cuDNN attn",
        "loss first → last",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for block in blocks:
        if "skipped" in block:
            lines.append(f"| {block['case']} | {block['policy']} | skipped: {block['skipped']} |")
            continue
        for row in block["rows"]:
            ratio = "ref" if row["ratio"] is None else f"{row['ratio']:.2f}x"
            cells = [
                block["case"],
                block["policy"],
                row["variant"],
                f"{row['params']:,}",
                f"{row['trace_s']:.1f} + {row['compile_s']:.1f}",
                f"{row['step_ms']:.3f}",
                f"{row['tokens_per_s']:,.0f}",
                ratio,
                f"{row['tflops']:.1f}",
                *[f"{100 * row[f'mfu {name}']:.1f} %" for name in peak_names],
                "yes" if row["cudnn_attention"] else "no",
                f"{row['loss_first']:.3f} → {row['loss_last']:.3f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def environment() -> dict[str, str]:
    import jax

    versions = {"jax": jax.__version__, "keras": keras.__version__}
    try:
        import keras_hub

        versions["keras-hub"] = keras_hub.__version__
    except ImportError:
        versions["keras-hub"] = "not installed"
    device = jax.devices()[0]
    return {
        "device": device.device_kind,
        "platform": device.platform,
        "devices": str(jax.device_count()),
        **versions,
    }


def report(env: dict, plan: Plan, blocks: list[dict], peaks: dict[str, float]) -> str:
    lines = [
        "# keras_attn GPU benchmark (`benchmarks/gpu.py`)",
        "",
        ", ".join(f"{k}: {v}" for k, v in env.items()),
        f"rounds <= {plan.rounds} (median), {plan.translator_steps} translator / "
        f"{plan.attention_steps} attention steps per timed sample; "
        "`ref time / this` > 1: faster than the reference (keras-hub, Keras)",
        "",
        format_table(blocks, peaks),
        "",
    ]
    if not peaks:
        lines.append("MFU: no peak known for this device (pass --peak-tflops).")
    return "\n".join(lines)


def write(out: str | None, text: str, blocks: list[dict], env: dict) -> None:
    if not out:
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    path.with_suffix(".json").write_text(json.dumps({"env": env, "blocks": blocks}, indent=1))


def run_plan(plan: Plan, policies: Sequence[str], peaks: dict[str, float], out: str | None) -> str:
    """Every block of `plan` in priority order within its budget; returns the markdown report.

    Order: under each policy the translator, then attention at the first shape; then attention
    at the other shapes. A block's timed rounds get a quarter of its equal share of the time
    left (the rest is for building and compiling); a block that would start with under 20 s
    left is skipped, and one that fails is reported as such.
    """
    start = time.monotonic()
    end = start + plan.budget_s
    env = environment()
    translator_case = f"translator train step, {plan.translator.label()}"
    work: list[tuple[str, str, AttentionShape | None]] = []
    for policy in policies:
        work += [(translator_case, policy, None)]
        work += [(f"MHA train step, {plan.attention[0].label()}", policy, plan.attention[0])]
    for shape in plan.attention[1:]:
        work += [(f"MHA train step, {shape.label()}", policy, shape) for policy in policies]
    blocks: list[dict] = []
    for index, (case, policy, shape) in enumerate(work):
        left = end - time.monotonic()
        if left < 20:
            blocks.append({"case": case, "policy": policy, "skipped": "time budget"})
            continue
        timing_s = max(5.0, 0.25 * left / (len(work) - index))
        try:
            if shape is None:
                result = translator_block(plan, policy, peaks, timing_s, end)
            else:
                result = attention_block(plan, shape, policy, peaks, timing_s, end)
            blocks.append({"case": case, "policy": policy, **result})
        except Exception as error:  # one failing block must not lose the others' numbers
            message = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            blocks.append({"case": case, "policy": policy, "skipped": message})
        print(f"[{time.monotonic() - start:6.1f} s] {policy:>14}  {case}", flush=True)
        write(out, report(env, plan, blocks, peaks), blocks, env)
    return report(env, plan, blocks, peaks)


def translator_block(
    plan: Plan, policy: str, peaks: dict[str, float], timing_s: float, end: float
) -> dict:
    """Our translator against keras-hub's (when installed) under `policy`."""
    size = plan.translator
    with_keras_hub = importlib.util.find_spec("keras_hub") is not None
    steps = translator_steps(size, policy, with_keras_hub=with_keras_hub)
    flops = transformer_train_flops(size)
    rows = measure(
        steps,
        reference="keras-hub" if with_keras_hub else "ours",
        steps_per_sample=plan.translator_steps,
        rounds=plan.rounds,
        warmup=plan.warmup,
        timing_s=timing_s,
        end=end,
        flops=flops,
        tokens=size.batch * (size.source_length + size.target_length),
        peaks=peaks,
    )
    return {"rows": rows, "flops_per_step": flops, "size": asdict(size)}


def attention_block(
    plan: Plan,
    shape: AttentionShape,
    policy: str,
    peaks: dict[str, float],
    timing_s: float,
    end: float,
) -> dict:
    """Our multi-head attention (fused and unfused) against Keras' under `policy`."""
    steps = attention_steps(shape, policy)
    flops = attention_train_flops(shape)
    rows = measure(
        steps,
        reference="keras",
        steps_per_sample=plan.attention_steps,
        rounds=plan.rounds,
        warmup=plan.warmup,
        timing_s=timing_s,
        end=end,
        flops=flops,
        tokens=shape.batch * shape.length,
        peaks=peaks,
    )
    return {"rows": rows, "flops_per_step": flops, "shape": asdict(shape)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="GPU sizes, fewer rounds (< 4 min)")
    mode.add_argument(
        "--cpu-check", action="store_true", help="tiny sizes, 2 rounds: a smoke run on any device"
    )
    parser.add_argument("--out", help="also write the markdown table here (and FILE.json)")
    parser.add_argument("--budget-s", type=float, help="wall-clock budget of the whole run")
    parser.add_argument("--policy", choices=POLICIES, action="append", help="default: both")
    parser.add_argument("--peak-tflops", type=float, help="peak for MFU on an unlisted device")
    args = parser.parse_args(argv)
    if keras.backend.backend() != "jax":
        parser.error(f"needs KERAS_BACKEND=jax. Received: {keras.backend.backend()!r}")
    plan = CPU_CHECK_PLAN if args.cpu_check else QUICK_PLAN if args.quick else GPU_PLAN
    if args.budget_s is not None:
        if args.budget_s <= 0:
            parser.error(f"--budget-s must be positive. Received: {args.budget_s}")
        plan = Plan(**{**plan.__dict__, "budget_s": args.budget_s})
    import jax

    kind = jax.devices()[0].device_kind
    peaks = peaks_for(kind)
    if args.peak_tflops:
        peaks = {"--peak-tflops": args.peak_tflops * 1e12}
    keras.utils.set_random_seed(0)
    text = run_plan(plan, args.policy or POLICIES, peaks, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
