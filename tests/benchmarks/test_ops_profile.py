"""benchmarks/ops_profile.py: graph ops per decoding step, and a bound on the cached Transformer's.

Op counts are deterministic for a given TensorFlow and Keras (TensorFlow 2.21, Keras 3.15 here);
a version that optimizes graphs differently may need the bound measured again.
"""

import importlib.util
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "ops_profile.py"

TINY = dict(d_model=16, num_heads=2, ff_dim=32)
# Measured: 520 ops per step before the per-step work was cut (2 layers), 468 after.
TRANSFORMER_STEP_BOUND = 475


@pytest.fixture(scope="module")
def profiler():
    spec = importlib.util.spec_from_file_location("ops_profile", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def transformer_ops(profiler):
    decoder = profiler.build_decoder("transformer", decode_length=8, vocabulary_size=40, **TINY)
    return profiler.ops_per_step(decoder)


def test_cached_transformer_step_stays_under_its_measured_op_count(transformer_ops):
    total = sum(transformer_ops.values())
    assert total <= TRANSFORMER_STEP_BOUND, transformer_ops.most_common(20)


def test_cached_transformer_step_writes_its_cache_by_scatter_without_tensordots(
    profiler, transformer_ops
):
    # One scatter per cache tensor (keys and values of 2 layers); no Dense tensordot's
    # shape arithmetic (Prod) is left in the step; the loop's own bookkeeping is counted.
    assert transformer_ops["TensorScatterUpdate"] == 4
    assert transformer_ops["Prod"] == 0
    assert transformer_ops["NextIteration"] > 0
    assert not set(transformer_ops) & profiler.ONCE_PER_LOOP


def test_one_layer_fewer_costs_a_layers_ops(profiler, transformer_ops):
    one_layer = profiler.ops_per_step(
        profiler.build_decoder(
            "transformer", decode_length=8, vocabulary_size=40, num_layers=1, **TINY
        )
    )
    per_layer = sum(transformer_ops.values()) - sum(one_layer.values())
    assert 100 <= per_layer <= 160  # 136 measured: attention x2, feed-forward, 3 LayerNorms


def test_table_lists_every_family_and_the_totals(profiler, transformer_ops):
    table = profiler.format_profile({"transformer": transformer_ops, "copy": transformer_ops}, 5)
    lines = table.splitlines()
    assert lines[0].split() == ["op", "transformer", "copy"]
    assert len(lines) == 1 + 5 + 2
    total = sum(transformer_ops.values())
    assert lines[-1].split()[-2:] == [str(total), str(total)]
    shown = sum(int(line.split()[-1]) for line in lines[1:-1])  # op rows and "(other types)"
    assert shown == total


def test_a_graph_without_a_loop_is_refused(profiler):
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def no_loop(ids):
        return ids + 1

    with pytest.raises(ValueError, match="while loop"):
        profiler.ops_per_step(no_loop)


def test_main_prints_one_column_per_family(profiler, capsys):
    assert profiler.main(["--families", "rnn-plain", "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["op", "rnn-plain"]
    assert lines[-1].startswith("total per step")
    assert int(lines[-1].split()[-1]) > 0
