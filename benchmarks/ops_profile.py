"""Graph ops per decoding step, by op type, for each exported decoding family.

    python benchmarks/ops_profile.py [--families transformer gpt ...] [--top 25] [--time]

Each family's greedy decoding loop (`keras_attn.decoding.greedy_search` over the family's step
view) is traced as the exported SavedModel traces it: one `tf.function` whose source (or prompt)
ids have a dynamic `(None, None)` shape. The graph is then optimized by Grappler with TensorFlow's
default rewrites, which also lowers the `While` op into the frame the executor runs
(`Enter`/`Merge`/`Switch`/`NextIteration`/`Exit`), so the count is what runs, not what was
written: shape arithmetic that Grappler folds is not counted, and what it cannot fold is.

Ops per step are the nodes of the loop frame less those that run once per loop: the `Enter`s
(tensors and the captured variable handles going into the loop), the `Exit`s and the
`Placeholder`s that stand for the captured handles. The loop's own bookkeeping (`Merge`,
`Switch`, `Identity` and `NextIteration` per loop variable, the loop condition) and the search's
work (log-softmax, argmax, the output buffers) are counted with the model's step: they run every
step too. Op counts are deterministic for a given TensorFlow and Keras version; they are not
timings.

`--time` also times greedy decoding of `DECODE_LENGTH` tokens, cached against uncached, for the
Transformer (`benchmarks/transformer.py`'s `benchmark_decoding`, graph mode only).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2, meta_graph_pb2  # noqa: E402
from tensorflow.python.grappler import tf_optimizer  # noqa: E402

from keras_attn.decoding import greedy_search  # noqa: E402
from keras_attn.models.families import get_family  # noqa: E402

START, END = 2, 3
# Nodes of the loop frame that run once per loop, not once per step.
ONCE_PER_LOOP = frozenset({"Enter", "Exit", "Placeholder"})
IDS_SPEC = tf.TensorSpec([None, None], tf.int32, name="ids")

# family name -> keyword arguments of its builder (after the vocabulary sizes): the sizes of
# `benchmarks/transformer.py`'s decoding model for the Transformers, one layer of 128 units for
# the recurrent translators.
FAMILIES: dict[str, dict] = {
    "transformer": dict(num_layers=2, d_model=128, num_heads=4, ff_dim=512),
    "gpt": dict(num_layers=2, d_model=128, num_heads=4, ff_dim=512, max_length=256),
    "rnn-attention": dict(embedding_dim=64, units=128),
    "rnn-luong": dict(embedding_dim=64, units=128),
    "rnn-plain": dict(embedding_dim=64, units=128),
}
VOCABULARY_SIZE = 2000
DECODE_LENGTH = 128


def build_decoder(
    family_name: str,
    decode_length: int = DECODE_LENGTH,
    vocabulary_size: int = VOCABULARY_SIZE,
    **options,
) -> Callable:
    """A `tf.function` `ids (batch, T) -> token ids (batch, decode_length)`: greedy decoding of the
    family's model (random weights) through its step view, traced for any batch and length.

    `options` override the builder arguments of `FAMILIES[family_name]`."""
    family = get_family(family_name)
    options = {**FAMILIES[family_name], **options}
    if family.language_model:
        model = family.build(vocabulary_size, **options)
    else:
        model = family.build(vocabulary_size, vocabulary_size, **options)
    steps = family.decoding_steps(model, decode_length)
    start = steps.prefill if family.language_model else steps.encode

    @tf.function(input_signature=[IDS_SPEC])
    def decode(ids):
        state = start(ids)
        return greedy_search(steps.step, state, tf.shape(ids)[0], START, END, decode_length).ids

    return decode


def optimized_graph(function: Callable) -> tf.compat.v1.GraphDef:
    """The graph of `function`'s concrete function after Grappler's default optimizations."""
    concrete = function.get_concrete_function()
    meta_graph = tf.compat.v1.train.export_meta_graph(
        graph_def=concrete.graph.as_graph_def(), graph=concrete.graph
    )
    fetches = meta_graph_pb2.CollectionDef()
    fetches.node_list.value.extend(tensor.name for tensor in concrete.outputs)
    meta_graph.collection_def["train_op"].CopyFrom(fetches)
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.min_graph_nodes = -1  # optimize small graphs too
    return tf_optimizer.OptimizeGraph(config, meta_graph)


def ops_per_step(function: Callable) -> collections.Counter:
    """Op type -> count of the nodes that run at every step of `function`'s (single) decoding
    loop, in the Grappler-optimized graph."""
    graph = optimized_graph(function)
    frame = [node for node in graph.node if node.name.split("/")[0] == "while"]
    if not frame:
        raise ValueError("Expected a graph with one while loop named 'while'; found none.")
    return collections.Counter(node.op for node in frame if node.op not in ONCE_PER_LOOP)


def profile(families: Sequence[str] = tuple(FAMILIES)) -> dict[str, collections.Counter]:
    """Family name -> ops per decoding step by type."""
    return {name: ops_per_step(build_decoder(name)) for name in families}


def format_profile(counts: dict[str, collections.Counter], top: int = 25) -> str:
    """One table: the `top` op types by their largest count, one column per family, and a total
    row."""
    names = list(counts)
    totals = collections.Counter()
    for counter in counts.values():
        for op, n in counter.items():
            totals[op] = max(totals[op], n)
    rows = [op for op, _ in totals.most_common(top)]
    width = max(12, *(len(name) for name in names))
    lines = [f"{'op':<22}" + "".join(f"{name:>{width + 1}}" for name in names)]
    for op in rows:
        lines.append(f"{op:<22}" + "".join(f"{counts[n][op]:>{width + 1}}" for n in names))
    others = [sum(c.values()) - sum(c[op] for op in rows) for c in counts.values()]
    lines.append(f"{'(other types)':<22}" + "".join(f"{n:>{width + 1}}" for n in others))
    lines.append(
        f"{'total per step':<22}"
        + "".join(f"{sum(c.values()):>{width + 1}}" for c in counts.values())
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--top", type=int, default=25, help="op types shown (the rest summed)")
    parser.add_argument(
        "--time", action="store_true", help="also time cached vs uncached Transformer decoding"
    )
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds with --time")
    args = parser.parse_args(argv)
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}; graph ops per greedy step")
    print(format_profile(profile(args.families), top=args.top), flush=True)
    if args.time:
        import transformer

        result = transformer.benchmark_decoding(
            transformer.DECODE_SIZE, rounds=args.rounds, warmup=1, jit_modes=(False,)
        )
        print(transformer.format_decoding_table(transformer.DECODE_SIZE, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
