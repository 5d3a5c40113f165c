import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "show_attend_tell.py"


def load_example():
    spec = importlib.util.spec_from_file_location("show_attend_tell_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_upsample_is_bilinear_and_peaks_at_one():
    example = load_example()
    attention = np.zeros((4, 4), "float32")
    attention[1, 2] = 0.5
    light = example.upsample(attention, (32, 32))
    assert light.shape == (32, 32) and light.max() == pytest.approx(1.0)
    # The peak stays in the region's 8x8 cell, and the far corner stays dark.
    assert np.unravel_index(light.argmax(), light.shape)[0] // 8 == 1
    assert np.unravel_index(light.argmax(), light.shape)[1] // 8 == 2
    assert light[-8:, :8].max() == 0.0
    assert example.upsample(np.zeros((4, 4), "float32"), (8, 8)).max() == 0.0


def test_parse_args_rejects_a_single_run_and_bad_counts(capsys):
    example = load_example()
    for argv, message in (
        (["--soft-run", "x"], "--soft-run and --hard-run go together"),
        (["--objects", "5"], "--objects in 1..4"),
        (["--images", "0"], "--images must be positive"),
    ):
        with pytest.raises(SystemExit):
            example.parse_args(argv)
        assert message in capsys.readouterr().err


def test_quick_run_trains_both_kinds_and_draws_one_map_per_word(tmp_path, capsys):
    example = load_example()
    figure = tmp_path / "figure.png"
    argv = ["--quick", "--steps", "2", "--out", str(tmp_path), "--figure", str(figure)]
    results = example.run_example(example.parse_args([*argv, "--images", "2"]))
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and results["figure"] == figure
    assert len(results["scenes"]) == 2
    assert all(len(scene.objects) == 2 for scene in results["scenes"])
    for kind in ("soft", "hard"):
        assert len(results[kind]) == 2
        for words, attention in results[kind]:
            # One 4x4 map (32-pixel scenes, three poolings) per caption word, each summing to one.
            assert attention.shape == (len(words), 4, 4)
            np.testing.assert_allclose(attention.sum(axis=(1, 2)), 1.0, atol=1e-5)
            if kind == "hard":  # hard attention reads one region per word
                assert set(np.unique(attention)) <= {0.0, 1.0}
    printed = capsys.readouterr().out
    assert printed.count("reference: ") == 2 and f"wrote {figure}" in printed
    # The finished runs are reused, and loaded when given.
    before = (tmp_path / "soft" / "model.keras").stat().st_mtime_ns
    again = ["--soft-run", str(tmp_path / "soft"), "--hard-run", str(tmp_path / "hard")]
    reloaded = example.run_example(example.parse_args([*argv, *again, "--images", "1"]))
    assert (tmp_path / "soft" / "model.keras").stat().st_mtime_ns == before
    assert reloaded["soft"][0][0] == results["soft"][0][0]
