"""The serving benchmark's helpers on real values, and (slow) its full run on a fixture model."""

import importlib.util
import os
import pathlib
import sys
import threading
import time

import numpy as np
import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "serving.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("serving_benchmark", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_percentile_matches_numpy(bench):
    values = list(np.random.default_rng(0).exponential(size=37))
    for q in (0, 1, 25, 50, 90, 99, 100):
        assert bench.percentile(values, q) == pytest.approx(np.percentile(values, q), rel=1e-12)
    assert bench.percentile([3.0], 99) == 3.0
    with pytest.raises(ValueError, match="no values"):
        bench.percentile([], 50)
    with pytest.raises(ValueError, match="q=101"):
        bench.percentile([1.0], 101)


def test_run_load_sends_every_text_once_per_slot_and_times_the_round(bench):
    texts = [f"t{i}" for i in range(50)]
    sent, lock = [], threading.Lock()

    def call(worker, batch):
        time.sleep(0.002)
        with lock:
            sent.append((worker, tuple(batch)))
        return list(batch)

    load = bench.run_load(call, texts, concurrency=3, requests=4, texts_per_request=2)
    assert len(load.latencies) == 12 and load.sentences == 24
    assert all(t >= 0.002 for t in load.latencies)
    # Worker i's j-th request starts at text (i * 4 + j) * 2: 24 distinct texts in pairs.
    assert sorted(sent) == sorted(
        (i, (f"t{2 * (4 * i + j)}", f"t{2 * (4 * i + j) + 1}")) for i in range(3) for j in range(4)
    )
    # Three workers in parallel: the round takes about 4 calls, not 12.
    assert 4 * 0.002 <= load.wall < 12 * 0.002 + 0.5
    assert load.throughput == pytest.approx(24 / load.wall)

    def failing(worker, batch):
        raise RuntimeError("server went away")

    with pytest.raises(RuntimeError, match="server went away"):
        bench.run_load(failing, texts, concurrency=2, requests=1)


def _load(bench, latencies_ms, wall, client_cpu=0.1, server_cpu=0.2):
    return bench.Load([t / 1e3 for t in latencies_ms], wall, client_cpu, server_cpu)


def test_summary_ratios_and_table_on_known_rounds(bench):
    loads = {
        (bench.IN_PROCESS, 1): [
            _load(bench, [4, 4, 6, 4], 0.02, 0.12, 0.0),
            _load(bench, [5, 5, 5], 0.02, 0.12, 0.0),
        ],
        (bench.GRPC, 1): [
            _load(bench, [5, 5, 7, 5], 0.025, 0.01, 0.14),
            _load(bench, [6, 6, 6], 0.02, 0.01, 0.17),
        ],
        (bench.GRPC, 8): [_load(bench, [40] * 8, 0.05), _load(bench, [40] * 8, 0.1)],
        (bench.BATCHING, 8): [_load(bench, [20] * 8, 0.02), _load(bench, [20] * 8, 0.04)],
    }
    summary = bench.summarize(loads)
    row = summary[(bench.IN_PROCESS, 1)]
    assert row["sent/s"] == pytest.approx(np.median([4 / 0.02, 3 / 0.02]))
    assert row["p50 ms"] == pytest.approx(np.percentile([4, 4, 6, 4, 5, 5, 5], 50))
    assert row["p99 ms"] == pytest.approx(np.percentile([4, 4, 6, 4, 5, 5, 5], 99))
    assert row["client cpu ms"] == pytest.approx(1e3 * 0.24 / 7)
    assert row["server cpu ms"] == 0.0
    assert summary[(bench.GRPC, 1)]["server cpu ms"] == pytest.approx(1e3 * 0.31 / 7)

    ratio_values = bench.ratios(loads)
    # Per-round p50 ratios 5/4 and 6/5; their median is the mean of the two.
    assert ratio_values["gRPC / in-process p50 latency, c=1"] == pytest.approx((1.25 + 1.2) / 2)
    # CPU per sentence, client + server against in-process: (0.15/4)/(0.12/4) = 1.25 and
    # (0.18/3)/(0.12/3) = 1.5.
    assert ratio_values["gRPC / in-process CPU per sentence, c=1"] == pytest.approx(1.375)
    # Per-round throughput ratios (8/0.02)/(8/0.05) = 2.5 and (8/0.04)/(8/0.1) = 2.5.
    assert ratio_values["batching / no batching throughput, c=8"] == pytest.approx(2.5)

    memory = {bench.GRPC: {"VmHWM": 2048 * 1024, "VmRSS": 1024 * 1024}}
    table = bench.format_table(summary, ratio_values, memory)
    assert "1.23x  target <= 1.3x: met" in table
    assert "2.50x  target >= 2.0x: met" in table
    assert "2048.0 MiB (1024.0 MiB)" in table
    assert f"{np.median([200.0, 150.0]):>8.1f}" in table
    low = {**ratio_values, "batching / no batching throughput, c=8": 1.5}
    assert "1.50x  target >= 2.0x: NOT met" in bench.format_table(summary, low, {})


def test_one_caller_variant_sends_c_texts_per_request(bench):
    batches = []
    variant = bench.Variant(lambda worker, batch: batches.append(list(batch)), one_caller=True)
    load = variant.load([str(i) for i in range(20)], concurrency=4, requests=3)
    assert batches == [[str(i) for i in range(4 * j, 4 * j + 4)] for j in range(3)]
    assert load.sentences == 12 and len(load.latencies) == 3


def test_process_readings_of_this_process(bench):
    memory = bench.read_memory_kib(os.getpid())
    assert memory["VmHWM"] >= memory["VmRSS"] > 10_000  # KiB: a Python process with NumPy
    before, process_before = bench.cpu_seconds(os.getpid()), time.process_time()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    spent = bench.cpu_seconds(os.getpid()) - before
    assert spent == pytest.approx(time.process_time() - process_before, abs=0.05)


@pytest.mark.slow
def test_benchmark_serving_end_to_end_on_the_fixture_translator(bench, tmp_path):
    """Two `keras-attn serve` children (about 30 s on a loaded 2-core machine): kept slow."""
    from tests.serving.conftest import save_translator

    base = tmp_path / "translator"
    save_translator(str(base / "1"))
    texts = ["ein kleiner Test", "zwei Wörter", "a b c d"]
    loads, memory = bench.benchmark_serving(
        base, bench.DEFAULT_BATCHING_PARAMETERS, texts, concurrency=(1, 2), requests=3, rounds=2
    )
    assert set(loads) == {(name, c) for name in bench.VARIANTS for c in (1, 2)}
    for (name, level), rounds in loads.items():
        per_request = level if name == bench.IDEAL else 1
        requests = 3 if name == bench.IDEAL else 3 * level
        assert [load.sentences for load in rounds] == [requests * per_request] * 2
        # Only the gRPC variants have a server (its CPU time comes in 10 ms clock ticks).
        served = name in (bench.GRPC, bench.BATCHING)
        assert all((load.server_cpu >= 0) if served else load.server_cpu == 0 for load in rounds)
    for name in (bench.GRPC, bench.BATCHING):
        assert memory[name]["VmHWM"] >= memory[name]["VmRSS"] > 100 * 1024  # TF: > 100 MiB
    table = bench.format_table(bench.summarize(loads), bench.ratios(loads), memory)
    assert "gRPC / in-process p50 latency, c=1" in table
    assert "batching / no batching throughput, c=2" in table
