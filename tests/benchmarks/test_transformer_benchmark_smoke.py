"""The Transformer benchmark's functions run end to end at minimal sizes (no timing assertions).

keras-hub (the `bench` extra) is optional: without it only the keras-hub row is left out.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "transformer.py"


pytestmark = pytest.mark.filterwarnings("ignore:.*does not support masking")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("transformer_benchmark", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def tiny(bench):
    return bench.Size(
        batch=2,
        source_length=5,
        target_length=6,
        d_model=8,
        num_heads=2,
        ff_dim=16,
        num_layers=1,
        vocab_size=30,
    )


def stand_in(size):
    """A small model with the translator's inputs and outputs, cheap to trace."""
    import keras

    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    embedding = keras.layers.Embedding(size.vocab_size, size.d_model)
    context = keras.layers.GlobalAveragePooling1D()(embedding(source))
    hidden = embedding(target) + keras.layers.Reshape((1, size.d_model))(context)
    logits = keras.layers.Dense(size.vocab_size)(hidden)
    return keras.Model({"source_ids": source, "target_ids": target}, logits)


def test_training_without_keras_hub_builds_no_keras_hub_row(bench, tiny, monkeypatch):
    def no_keras_hub(size):
        raise AssertionError("the keras-hub model must not be built without keras-hub")

    monkeypatch.setattr(bench, "keras_hub_available", lambda: False)
    monkeypatch.setattr(bench, "keras_hub_translator", no_keras_hub)
    monkeypatch.setattr(bench, "ours", stand_in)
    result = bench.benchmark_training(tiny, rounds=1, warmup=1, jit_compile=False)
    assert result["ours tokens/s"] > 0
    assert result["ours params"] == stand_in(tiny).count_params()
    assert "keras-hub tokens/s" not in result and "keras-hub params" not in result
    assert result["keras-hub / ours"] == "n/a (keras-hub not installed)"
    table = bench.format_training_table(tiny, result, jit_compile=False)
    assert "n/a (keras-hub not installed)" in table and "tokens/s" in table


def test_training_of_the_real_models(bench, tiny):
    """keras-hub's row when it is installed (the bench extra), ours in any case."""
    result = bench.benchmark_training(tiny, rounds=1, warmup=1, jit_compile=False)
    assert result["ours tokens/s"] > 0
    assert result["ours params"] == bench.ours(tiny).count_params()
    if not bench.keras_hub_available():
        assert result["keras-hub / ours"] == "n/a (keras-hub not installed)"
        return
    assert result["keras-hub tokens/s"] > 0 and result["keras-hub / ours"] > 0
    # Same size: keras-hub adds learned positions (2 tables of max(T_x, T_y) x d), nothing else.
    extra = 2 * max(tiny.source_length, tiny.target_length) * tiny.d_model
    assert result["keras-hub params"] - result["ours params"] == extra
    assert "keras-hub time / our time" in bench.format_training_table(tiny, result)


def test_train_step_lowers_the_loss(bench, tiny):
    model = stand_in(tiny)
    inputs, labels = bench._batch(tiny)
    step = bench.make_model_train_step(model, jit_compile=False)
    first = float(step(inputs, labels))
    for _ in range(5):
        last = float(step(inputs, labels))
    assert last < first


@pytest.mark.parametrize("fixed_shape", [False, True], ids=["prefix", "fixed_buffer"])
def test_uncached_steps_follow_the_full_pass(bench, tiny, fixed_shape):
    model = bench.ours(tiny)
    cached = bench.TransformerTranslatorSteps(model, max_length=6)
    steps = bench.UncachedSteps(cached, fixed_shape=fixed_shape)
    inputs, _ = bench._batch(tiny)
    full = model(inputs).numpy()
    state = steps.encode(inputs["source_ids"])
    step = tf.function(steps.step)
    for t in range(6):
        logits, state = step(inputs["target_ids"][:, t], state)
        np.testing.assert_allclose(logits.numpy(), full[:, t], atol=1e-5, rtol=1e-5)
        assert np.all(state["prefix"].numpy()[:, t] == inputs["target_ids"].numpy()[:, t])
    assert int(state["index"]) == 6
    np.testing.assert_allclose(state["attention"].numpy().sum(-1), 1.0, atol=1e-5)


@pytest.fixture(scope="module")
def decodings():
    """benchmark_decoding's results by jit_modes: tracing three decoders takes seconds."""
    return {}


def check_decoding(bench, tiny, jit_modes, decodings):
    # test_xla_modes runs first and decodes without and with XLA; that one result (one tracing
    # of the non-XLA decoders) serves the non-XLA test too. Alone (`-m "not slow"`) it decodes.
    result = decodings.get((False, True)) or decodings.get(tuple(jit_modes))
    if result is None:
        result = bench.benchmark_decoding(
            tiny, rounds=1, warmup=1, max_length=8, beam_size=2, jit_modes=jit_modes
        )
        decodings[tuple(jit_modes)] = result
    assert result["tokens generated"] == 8.0  # END is never produced: every loop runs 8 steps
    assert result["cached tokens == uncached tokens"] is True
    for suffix in [", XLA" if jit else "" for jit in jit_modes]:
        for name in ("cached greedy", "uncached greedy", "beam"):
            assert result[f"{name}{suffix} ms"] > 0
        assert result[f"uncached / cached{suffix}"] > 0
        assert result[f"beam 2 / greedy{suffix}"] > 0
    table = bench.format_decoding_table(tiny, result, beam_size=2)
    assert "uncached / cached greedy" in table and "beam 2 / greedy" in table
    return result


@pytest.mark.slow
def test_xla_modes(bench, tiny, decodings):
    result = check_decoding(bench, tiny, (False, True), decodings)
    assert "XLA" in bench.format_decoding_table(tiny, result, beam_size=2)
    training = bench.benchmark_training(tiny, rounds=1, warmup=1)
    assert training["ours tokens/s"] > 0
    assert "jit_compile=True" in bench.format_training_table(tiny, training)


def test_decoding_cached_equals_uncached_and_ratios_are_positive(bench, tiny, decodings):
    check_decoding(bench, tiny, (False,), decodings)


def test_decoders_choose_neither_pad_nor_start(bench, tiny):
    fns = bench.decoders(bench.ours(tiny), max_length=7, beam_size=3)
    source = tf.constant(np.random.default_rng(0).integers(4, 30, (2, 5)), tf.int32)
    for name in ("cached greedy", "beam"):
        result = fns[name](source)
        assert result.ids.shape == (2, 7)
        assert not np.isin(result.ids.numpy(), [0, bench.START]).any()
        assert np.all(np.isfinite(result.scores.numpy())) and np.all(result.scores.numpy() < 0)
