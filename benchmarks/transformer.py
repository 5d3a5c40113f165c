"""Transformer translator speed, side by side in one process: training against keras-hub, decoding.

    python benchmarks/transformer.py [--quick]

(a) Training tokens/s of `keras_attn.models.transformer_translator` against the same-size model
    built from keras-hub's `TokenAndPositionEmbedding`, `TransformerEncoder` and
    `TransformerDecoder` (same batch, lengths, d_model, heads, feed-forward width, layers,
    vocabularies, dropout, tied output projection, Adam): one training step (forward, sparse
    cross-entropy, backward, Adam update), as a plain graph (what `keras-attn train` runs) and
    under `jit_compile=True`. Tokens are source + target
    tokens per step. Prints tokens/s and the median over rounds of the per-round ratio
    `keras-hub time / our time` (> 1: we are faster). Without keras-hub installed
    (`pip install .[bench]`) the keras-hub row is left out and the ratio is "n/a".
(b) Greedy decoding of `DECODE_LENGTH` tokens with the KV cache (`TransformerTranslatorSteps`)
    against an uncached step function that re-runs the decoder over the prefix at every step
    (the encoder runs once in both), through the same `greedy_search` loop inside one
    `tf.function`: as a plain graph (what the exported SavedModel runs; the uncached prefix grows
    by one token per step) and under `jit_compile=True` (XLA needs static shapes: the uncached
    decoder runs over the whole `DECODE_LENGTH` buffer every step). All greedy runs must produce
    the same tokens; the ratio is `uncached time / cached time` within each mode.
(c) Beam search (beam 4) against greedy search, both cached, same model and sources, in both
    modes: the ratio `beam time / greedy time`.

The END id is one the model cannot produce, so every loop runs the full `DECODE_LENGTH` steps.
Every variant is warmed up (tracing and XLA compilation excluded), then timed in interleaved
rounds (A, B, A, B, ...) so that load changes on a shared machine hit all variants alike; medians
over rounds are reported. The timing helpers are those of `benchmarks/attention.py`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from attention import time_interleaved  # noqa: E402
from keras import ops  # noqa: E402

from keras_attn.decoding import beam_search, greedy_search  # noqa: E402
from keras_attn.models import TransformerTranslatorSteps, transformer_translator  # noqa: E402

# keras-hub's embeddings hand a Keras mask to sublayers that drop it (by design); not our concern.
warnings.filterwarnings("ignore", message=".*does not support masking.*")

START = 2
DECODE_LENGTH = 128


@dataclass(frozen=True)
class Size:
    """One model and batch size, shared by both sides of a comparison."""

    batch: int = 32
    source_length: int = 32
    target_length: int = 32
    d_model: int = 128
    num_heads: int = 4
    ff_dim: int = 512
    num_layers: int = 2
    vocab_size: int = 2000
    dropout: float = 0.1

    def label(self) -> str:
        return (
            f"B={self.batch} T_x={self.source_length} T_y={self.target_length} "
            f"d={self.d_model} h={self.num_heads} ff={self.ff_dim} N={self.num_layers} "
            f"V={self.vocab_size}"
        )


TRAIN_SIZES = (Size(), Size(batch=8, source_length=128, target_length=128))
DECODE_SIZE = Size(batch=8, source_length=32)


def keras_hub_available() -> bool:
    return importlib.util.find_spec("keras_hub") is not None


def ours(size: Size) -> keras.Model:
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
    """The same translator from keras-hub layers: post-LN blocks, tied output, dropout everywhere.

    Differences that do not change the work per step: keras-hub's position embedding is learned
    (ours is sinusoidal, no weights) and its embeddings are not scaled by sqrt(d).
    """
    from keras_hub.layers import (
        TokenAndPositionEmbedding,
        TransformerDecoder,
        TransformerEncoder,
    )

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


def make_model_train_step(model: keras.Model, jit_compile: bool = True) -> Callable:
    """A compiled `(inputs, labels) -> loss` step: forward, cross-entropy, gradients, Adam."""
    variables = model.trainable_variables
    optimizer = keras.optimizers.Adam(learning_rate=1e-4)
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def step(inputs, labels):
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)
            loss = ops.mean(
                keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            )
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    return step


def _batch(size: Size, seed: int = 0):
    """Random ids without padding: `({"source_ids", "target_ids"}, labels)`."""
    rng = np.random.default_rng(seed)
    source = rng.integers(4, size.vocab_size, size=(size.batch, size.source_length))
    target = rng.integers(4, size.vocab_size, size=(size.batch, size.target_length + 1))
    inputs = {
        "source_ids": tf.constant(source, tf.int32),
        "target_ids": tf.constant(target[:, :-1], tf.int32),
    }
    return inputs, tf.constant(target[:, 1:], tf.int32)


def benchmark_training(
    size: Size,
    rounds: int,
    warmup: int,
    with_keras_hub: bool | None = None,
    jit_compile: bool = True,
) -> dict[str, float | str]:
    """Tokens/s of a training step, ours and keras-hub's, and the median ratio.

    `with_keras_hub=None` includes keras-hub when it is installed; without it the keras-hub
    entries are left out and the ratio is "n/a (keras-hub not installed)".
    """
    with_keras_hub = keras_hub_available() if with_keras_hub is None else with_keras_hub
    inputs, labels = _batch(size)
    models = {"ours": ours(size)}
    if with_keras_hub:
        models["keras-hub"] = keras_hub_translator(size)
    steps = {}
    result: dict[str, float | str] = {}
    for name, model in models.items():
        model(inputs)  # build outside XLA
        result[f"{name} params"] = float(model.count_params())
        step = make_model_train_step(model, jit_compile=jit_compile)
        steps[name] = lambda step=step: step(inputs, labels)
    times = time_interleaved(steps, rounds=rounds, warmup=warmup)
    tokens = size.batch * (size.source_length + size.target_length)
    for name, t in times.items():
        result[f"{name} tokens/s"] = tokens / statistics.median(t)
    if with_keras_hub:
        ratios = [k / o for k, o in zip(times["keras-hub"], times["ours"], strict=True)]
        result["keras-hub / ours"] = statistics.median(ratios)
    else:
        result["keras-hub / ours"] = "n/a (keras-hub not installed)"
    return result


class UncachedSteps:
    """The step contract without a KV cache: every step re-runs the decoder over the prefix.

    The state keeps the tokens fed so far in a `(batch, max_length)` buffer; step `t` embeds the
    prefix, runs the model's decoder on it against the encoder memory (computed once by `encode`,
    as in the cached view) and returns position `t`'s logits. Same layers and the same alignment
    entry as `TransformerTranslatorSteps`, so `greedy_search` returns the same tokens.

    `fixed_shape=False` feeds tokens `0..t` (a prefix growing by one per step: the least work, but
    a dynamic shape, which XLA cannot compile); `fixed_shape=True` feeds the whole buffer every
    step (positions after `t` are garbage that the causal mask keeps out of position `t`), the
    static-shape form an XLA-compiled uncached loop needs.
    """

    def __init__(self, cached: TransformerTranslatorSteps, fixed_shape: bool = False):
        self.cached = cached
        self.max_length = cached.max_length
        self.fixed_shape = fixed_shape

    def encode(self, source_ids) -> dict:
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        memory_mask = ops.not_equal(source_ids, self.cached.pad_id)
        embedded = self.cached.source_embedding(source_ids, training=False)
        memory = self.cached.encoder(embedded, inputs_mask=memory_mask, training=False)
        batch = ops.shape(source_ids)[0]
        return {
            "memory": memory,
            "memory_mask": memory_mask,
            "prefix": ops.zeros((batch, self.max_length), "int32"),
            "index": ops.convert_to_tensor(0, "int32"),
            "attention": ops.zeros(ops.shape(memory_mask), "float32"),
        }

    def step(self, token_ids, state: dict):
        index = state["index"]
        token_ids = ops.expand_dims(ops.convert_to_tensor(token_ids, "int32"), 1)  # (batch, 1)
        prefix = ops.slice_update(state["prefix"], [0, index], token_ids)
        # (batch, max_length) or (batch, t + 1); position t is `index` in both
        fed = prefix if self.fixed_shape else prefix[:, : index + 1]
        embedded = self.cached.target_embedding.call(fed, training=False)  # no Keras mask
        hidden, scores = self.cached.decoder(
            embedded,
            state["memory"],
            memory_mask=state["memory_mask"],
            training=False,
            return_attention_scores=True,
        )
        hidden_t = ops.take(hidden, ops.expand_dims(index, 0), axis=1)  # (batch, 1, d)
        logits = self.cached.target_embedding(hidden_t, reverse=True)[:, 0]  # (batch, V)
        # (batch, layers, heads, T, T_x) -> last layer, position t, mean over heads (batch, T_x)
        cross = ops.take(scores["cross_attention"][:, -1], index, axis=2)  # (batch, heads, T_x)
        attention = ops.mean(ops.cast(cross, "float32"), axis=1)
        new_state = dict(state, prefix=prefix, index=index + 1, attention=attention)
        return ops.cast(logits, "float32"), new_state


def decoders(
    model: keras.Model, max_length: int, beam_size: int = 4, jit_compile: bool = False
) -> dict[str, Callable]:
    """`source_ids -> DecodingResult` graphs: cached greedy, uncached greedy, cached beam.

    Without XLA the uncached loop feeds the growing prefix; with XLA the fixed-shape buffer.
    """
    cached = TransformerTranslatorSteps(model, max_length=max_length)
    uncached = UncachedSteps(cached, fixed_shape=jit_compile)
    end = model.output.shape[-1]  # an id the model never produces: every loop runs max_length

    def greedy(steps):
        def run(source_ids):
            batch = tf.shape(source_ids)[0]
            return greedy_search(
                steps.step, steps.encode(source_ids), batch, START, end, max_length
            )

        return tf.function(run, jit_compile=jit_compile)

    def beam(source_ids):
        batch = tf.shape(source_ids)[0]
        state = cached.encode(source_ids)
        return beam_search(cached.step, state, batch, START, end, max_length, beam_size=beam_size)

    return {
        "cached greedy": greedy(cached),
        "uncached greedy": greedy(uncached),
        "beam": tf.function(beam, jit_compile=jit_compile),
    }


def benchmark_decoding(
    size: Size,
    rounds: int,
    warmup: int,
    max_length: int = DECODE_LENGTH,
    beam_size: int = 4,
    jit_modes: Sequence[bool] = (False, True),
) -> dict[str, float | bool]:
    """Milliseconds of cached greedy, uncached greedy and beam search, without and with XLA;
    the ratios within each mode; whether cached and uncached greedy chose the same tokens."""
    model = ours(size)
    source = tf.constant(
        np.random.default_rng(1).integers(4, size.vocab_size, (size.batch, size.source_length)),
        tf.int32,
    )
    fns, ids, lengths = {}, {}, []
    for jit in jit_modes:
        suffix = ", XLA" if jit else ""
        for name, fn in decoders(model, max_length, beam_size, jit_compile=jit).items():
            result = fn(source)  # traces (and compiles)
            ids[name + suffix] = result.ids.numpy()
            lengths.append(result.lengths.numpy())
            fns[name + suffix] = lambda fn=fn: fn(source).ids
    times = time_interleaved(fns, rounds, warmup)
    result: dict[str, float | bool] = {
        f"{name} ms": 1e3 * statistics.median(t) for name, t in times.items()
    }
    result["tokens generated"] = float(np.mean(lengths))  # END is never produced
    greedy = [ids[name] for name in ids if "greedy" in name]
    result["cached tokens == uncached tokens"] = all(
        np.array_equal(other, greedy[0]) for other in greedy
    )
    for jit in jit_modes:
        suffix = ", XLA" if jit else ""

        def ratio(a, b, suffix=suffix):
            pairs = zip(times[a + suffix], times[b + suffix], strict=True)
            return statistics.median(x / y for x, y in pairs)

        result[f"uncached / cached{suffix}"] = ratio("uncached greedy", "cached greedy")
        result[f"beam {beam_size} / greedy{suffix}"] = ratio("beam", "cached greedy")
    return result


def format_training_table(
    size: Size, result: dict[str, float | str], jit_compile: bool = True
) -> str:
    lines = [f"(a) train step, jit_compile={jit_compile}, Adam, {size.label()}"]
    for side in ("ours", "keras-hub"):
        if f"{side} tokens/s" in result:
            lines.append(
                f"    {side:<12} {result[f'{side} tokens/s']:>10.0f} tokens/s"
                f"   {result[f'{side} params']:>10,.0f} params"
            )
    ratio = result["keras-hub / ours"]
    shown = f"{ratio:.2f}x" if isinstance(ratio, float) else ratio
    lines.append(f"    keras-hub time / our time (median of rounds): {shown}")
    return "\n".join(lines)


def format_decoding_table(size: Size, result: dict[str, float | bool], beam_size: int = 4) -> str:
    lines = [
        f"(b, c) decoding {result['tokens generated']:.0f} tokens, B={size.batch} "
        f"T_x={size.source_length} d={size.d_model} N={size.num_layers} V={size.vocab_size}; "
        "uncached = decoder re-run over the prefix (XLA: over the fixed max_length buffer)"
    ]
    lines += [f"    {k:<26} {v:>10.1f}" for k, v in result.items() if k.endswith(" ms")]
    for suffix in ("", ", XLA"):
        if f"uncached / cached{suffix}" not in result:
            continue
        mode = "XLA" if suffix else "graph, no XLA"
        lines.append(
            f"    {mode:<14} (b) uncached / cached greedy: "
            f"{result[f'uncached / cached{suffix}']:>6.2f}x   (c) beam {beam_size} / greedy: "
            f"{result[f'beam {beam_size} / greedy{suffix}']:>5.2f}x"
        )
    lines.append(
        f"    cached tokens == uncached tokens: {result['cached tokens == uncached tokens']}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a few minutes)")
    args = parser.parse_args(argv)
    rounds, warmup = (5, 2) if args.quick else (15, 3)
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs")
    if keras_hub_available():
        import keras_hub

        print(f"keras-hub {keras_hub.__version__}")
    else:
        print("keras-hub not installed (pip install '.[bench]'): its row is left out")
    for size in TRAIN_SIZES:
        # Graph mode is what `keras-attn train` runs (no XLA); XLA is what a user can opt into.
        for jit in (False, True):
            result = benchmark_training(size, rounds=rounds, warmup=warmup, jit_compile=jit)
            print(format_training_table(size, result, jit_compile=jit), flush=True)
    result = benchmark_decoding(DECODE_SIZE, rounds=max(3, rounds // 3), warmup=1)
    print(format_decoding_table(DECODE_SIZE, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
