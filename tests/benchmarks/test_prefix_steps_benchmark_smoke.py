"""The prefix-steps benchmark's functions on real values, and its comparison on a tiny model."""

import importlib.util
import itertools
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "prefix_steps.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("prefix_steps_benchmark", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_round_robin_warms_up_then_alternates_and_times_each_call(bench):
    order = []
    calls = {name: (lambda name=name: order.append(name)) for name in ("a", "b")}
    ticks = itertools.count()
    times = bench.time_round_robin(calls, rounds=3, clock=lambda: float(next(ticks) ** 2))
    assert order == ["a", "b"] + ["a", "b"] * 3
    # Call k of the timed rounds spans clock readings 2k and 2k + 1: (2k + 1)^2 - (2k)^2 = 4k + 1.
    assert times == {"a": [1.0, 9.0, 17.0], "b": [5.0, 13.0, 21.0]}


def test_summary_is_medians_and_the_median_per_round_ratio(bench):
    times = {bench.CACHED: [0.010, 0.020, 0.040], bench.PREFIX: [0.050, 0.060, 0.400]}
    summary = bench.summarize(times)
    assert summary["cached ms"] == pytest.approx(20.0)
    assert summary["prefix ms"] == pytest.approx(60.0)
    assert summary["prefix / cached"] == pytest.approx(5.0)  # median of 5, 3 and 10


def test_both_views_of_one_model_translate_alike(bench):
    from keras_attn.models import rnn_attention_translator
    from keras_attn.text.tokenizer import WordPieceTokenizer
    from keras_attn.text.vocab import RESERVED_TOKENS

    source = WordPieceTokenizer(RESERVED_TOKENS + "el la gato casa negro perro come".split())
    target = WordPieceTokenizer(RESERVED_TOKENS + "the cat house black dog eats".split())
    model = rnn_attention_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=16, dropout=0.0
    )
    pairs = {
        decoder: bench.translators(model, source, target, 6, **options)
        for decoder, options in bench.DECODERS.items()
    }
    texts = ["el gato negro", "la casa", "el perro come", ""]
    results = bench.compare(pairs, texts, batch_size=3, rounds=1)
    assert set(results) == {"greedy", "beam 4"}
    for row in results.values():
        assert row["equal translations"] == 1.0
        assert row["cached ms"] > 0 and row["prefix ms"] > 0 and row["prefix / cached"] > 0
    table = bench.format_table(results, "4 sentences")
    assert "beam 4" in table and "100%" in table
