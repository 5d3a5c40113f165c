"""The GPU benchmark's counting, peaks, timing order and tables (no timing assertions).

The timed steps need the JAX backend (`benchmarks/gpu_device.sh` runs them); what is checked here
runs under any backend: the FLOP formula against a matmul-by-matmul recount, the matmul weights
against the built models, the peak table, the interleaving and the budget of the timing loop.
"""

import importlib.util
import json
import pathlib
import sys

import keras
import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.py"

pytestmark = pytest.mark.filterwarnings("ignore:.*does not support masking")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("gpu_benchmark", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def tiny(bench):
    return bench.Size(
        batch=3,
        source_length=5,
        target_length=7,
        d_model=8,
        num_heads=2,
        ff_dim=12,
        num_layers=2,
        vocab_size=11,
    )


def matmul_flops(m, k, n):
    """A (m, k) x (k, n) product: m n k multiply-adds."""
    return 2 * m * k * n


def recount_forward(size):
    """Forward FLOPs of one sequence pair, product by product (heads summed: h e = d)."""
    d, f, s, t, v = (
        size.d_model,
        size.ff_dim,
        size.source_length,
        size.target_length,
        size.vocab_size,
    )
    encoder = (
        4 * matmul_flops(s, d, d)  # Q, K, V, output projections
        + matmul_flops(s, d, s)  # scores Q K^T over all heads
        + matmul_flops(s, s, d)  # weights x V
        + matmul_flops(s, d, f)
        + matmul_flops(s, f, d)
    )
    decoder = (
        4 * matmul_flops(t, d, d)  # causal self-attention projections
        + matmul_flops(t, d, t)
        + matmul_flops(t, t, d)
        + 2 * matmul_flops(t, d, d)  # cross-attention query and output
        + 2 * matmul_flops(s, d, d)  # cross-attention keys and values of the memory
        + matmul_flops(t, d, s)
        + matmul_flops(t, s, d)
        + matmul_flops(t, d, f)
        + matmul_flops(t, f, d)
    )
    return size.num_layers * (encoder + decoder) + matmul_flops(t, d, v)


def test_train_flops_match_a_product_by_product_recount(bench, tiny):
    assert bench.transformer_train_flops(tiny) == 3 * tiny.batch * recount_forward(tiny)
    gpu = bench.GPU_PLAN.translator
    assert bench.transformer_train_flops(gpu) == 3 * gpu.batch * recount_forward(gpu)
    # The GPU size does about 3.2 TFLOP per step, 6 x matmul weights x tokens for most of it.
    assert 3.0e12 < bench.transformer_train_flops(gpu) < 3.4e12
    tokens = gpu.batch * gpu.target_length  # source = target length here
    assert 6 * bench.transformer_matmul_params(gpu) * tokens < bench.transformer_train_flops(gpu)


def test_attention_flops(bench):
    shape = bench.AttentionShape(batch=2, length=6, dim=4, heads=2)
    per_sequence = 4 * matmul_flops(6, 4, 4) + matmul_flops(6, 4, 6) + matmul_flops(6, 6, 4)
    assert bench.attention_train_flops(shape) == 3 * 2 * per_sequence


def matmul_weights(model, excluded):
    """Sizes of the kernels and embedding tables, except the named lookup-only tables."""
    return sum(
        int(w.numpy().size)
        for w in model.weights
        if (w.name.endswith("kernel") or w.name == "embeddings")
        and not any(name in w.path for name in excluded)
    )


def test_matmul_params_are_the_models_kernels(bench, tiny):
    """Our kernels plus the tied target embedding; keras-hub's besides its position tables."""
    ours = bench.ours_translator(tiny)
    assert matmul_weights(ours, ["source_embedding"]) == bench.transformer_matmul_params(tiny)
    pytest.importorskip("keras_hub")
    theirs = bench.keras_hub_translator(tiny)
    excluded = ["source_embedding", "position_embedding"]
    assert matmul_weights(theirs, excluded) == bench.transformer_matmul_params(tiny)


def test_peaks_by_device_kind(bench):
    h200 = bench.peaks_for("NVIDIA H200")
    assert h200 == {bench.DATASHEET_PEAK: 989e12, bench.MEASURED_PEAK: 790e12}
    assert bench.peaks_for("NVIDIA H100 80GB HBM3")[bench.MEASURED_PEAK] == 798e12
    assert bench.peaks_for("NVIDIA H100 PCIe") == {bench.DATASHEET_PEAK: 756e12}
    assert bench.peaks_for("cpu") == {}


def test_time_interleaved_runs_round_robin_after_warmup(bench):
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    times = bench.time_interleaved(fns, rounds=3, warmup=2, block=lambda result: None)
    assert calls == list("aabbcc") + list("abc") * 3
    assert {name: len(t) for name, t in times.items()} == {"a": 3, "b": 3, "c": 3}


def test_time_interleaved_stops_at_the_deadline_after_min_rounds(bench):
    fns = {"a": lambda: None, "b": lambda: None}
    times = bench.time_interleaved(
        fns, rounds=50, warmup=0, deadline=0.0, min_rounds=4, block=lambda result: None
    )
    assert [len(t) for t in times.values()] == [4, 4]


def test_median_ratio(bench):
    assert bench.median_ratio([2.0, 3.0, 8.0], [1.0, 3.0, 2.0]) == 2.0


def row(bench, variant, ratio):
    return {
        "variant": variant,
        "params": 1234,
        "trace_s": 0.5,
        "compile_s": 1.5,
        "step_ms": 10.0,
        "tokens_per_s": 1000.0,
        "ratio": ratio,
        "cudnn_attention": ratio is None,
        "loss_first": 10.4,
        "loss_last": 10.1,
        "tflops": 395.6,
        f"mfu {bench.DATASHEET_PEAK}": 0.4,
        f"mfu {bench.MEASURED_PEAK}": 0.5,
    }


def test_table_has_a_row_per_variant_and_the_skipped_blocks(bench):
    peaks = bench.peaks_for("NVIDIA H200")
    blocks = [
        {
            "case": "translator",
            "policy": "mixed_bfloat16",
            "rows": [row(bench, "ours", 1.25), row(bench, "keras-hub", None)],
        },
        {"case": "MHA", "policy": "mixed_float16", "skipped": "time budget"},
    ]
    lines = bench.format_table(blocks, peaks).splitlines()
    assert len(lines) == 2 + 3
    assert "MFU vs datasheet dense bf16/fp16 (989)" in lines[0]
    assert "MFU vs measured 8192^3 bf16 matmul (790)" in lines[0]
    assert "| ours | 1,234 | 0.5 + 1.5 |" in lines[2] and "| 1.25x |" in lines[2]
    assert "| 40.0 % | 50.0 % | no |" in lines[2]
    assert "| ref |" in lines[3] and "| yes |" in lines[3]
    assert "skipped: time budget" in lines[4]


@pytest.fixture
def stub_blocks(bench, monkeypatch):
    """Blocks that record their order instead of compiling; attention at T=128 fails."""
    calls = []

    def translator_block(plan, policy, peaks, timing_s, end):
        calls.append(("translator", policy))
        assert timing_s >= 5.0
        return {"rows": [row(bench, "ours", 1.1), row(bench, "keras-hub", None)]}

    def attention_block(plan, shape, policy, peaks, timing_s, end):
        calls.append((shape.length, policy))
        if shape.length == 128:
            raise RuntimeError("boom\nsecond line")
        return {"rows": [row(bench, "ours", 1.2), row(bench, "keras", None)]}

    monkeypatch.setattr(bench, "environment", lambda: {"device": "stub"})
    monkeypatch.setattr(bench, "translator_block", translator_block)
    monkeypatch.setattr(bench, "attention_block", attention_block)
    return calls


def test_run_plan_runs_by_priority_and_reports_failures(bench, stub_blocks, tmp_path):
    out = tmp_path / "gpu.md"
    text = bench.run_plan(bench.GPU_PLAN, bench.POLICIES, bench.peaks_for("H200"), str(out))
    assert stub_blocks == [
        ("translator", "mixed_bfloat16"),
        (512, "mixed_bfloat16"),
        ("translator", "mixed_float16"),
        (512, "mixed_float16"),
        (128, "mixed_bfloat16"),
        (128, "mixed_float16"),
    ]
    assert text.count("skipped: RuntimeError: boom |") == 2
    assert out.read_text() == text + "\n"
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["env"] == {"device": "stub"} and len(saved["blocks"]) == 6


def test_run_plan_skips_what_the_budget_leaves_no_time_for(bench, stub_blocks):
    plan = bench.Plan(**{**bench.GPU_PLAN.__dict__, "budget_s": 10.0})
    text = bench.run_plan(plan, ["mixed_bfloat16"], {}, None)
    assert stub_blocks == []
    assert text.count("skipped: time budget") == 3
    assert "no peak known" in text


def test_main_refuses_another_backend(bench):
    if keras.backend.backend() == "jax":
        pytest.skip("runs the benchmark under JAX")
    with pytest.raises(SystemExit) as error:
        bench.main(["--cpu-check"])
    assert error.value.code == 2
