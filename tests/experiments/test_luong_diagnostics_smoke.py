"""experiments/luong_diagnostics.py on tiny Luong translators.

The diagnostics read a run directory: each test writes one as `keras-attn train` does, untrained
(`write_tiny_run`), and sets the weights a statistic is checked against itself."""

import importlib.util
import pathlib
import shutil
import sys

import keras
import numpy as np
import pytest

from keras_attn.distributions.softmax import Softmax
from keras_attn.layers.attention.local_attention import LocalAttention
from keras_attn.scores import ResidualGeneralScore
from keras_attn.text import corpora
from keras_attn.training.trainer import RunDirectory, _training_data
from tests.export.conftest import write_tiny_run

_PATH = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "luong_diagnostics.py"
TINY = {"batch_size": 16, "train_examples": 256}  # two diagnosed batches: 32 pairs


def tiny_run(path, **options):
    """An untrained `rnn-luong` run (16 units) at `path`."""
    return write_tiny_run(path, "rnn-luong", **TINY, **options)


@pytest.fixture(scope="module")
def diagnostics():
    spec = importlib.util.spec_from_file_location("luong_diagnostics", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_global_and_local_p_statistics(diagnostics, tmp_path, capsys):
    tiny_run(tmp_path / "dot", score="dot")
    tiny_run(tmp_path / "local", attention="local-p", window=3)
    softmax_call, positions = Softmax.call, LocalAttention._aligned_positions

    dot = diagnostics.diagnose(str(tmp_path / "dot"), batches=1)
    assert (dot["attention"], dot["score"]) == ("global", "dot")
    assert "correction" not in dot  # only the residual general score has one
    assert "p_over_S_mean" not in dot  # global attention predicts no position
    assert np.isfinite(dot["score_std"]) and dot["score_std"] > 0
    assert dot["score_max_abs"] >= dot["score_std"]
    # Softmax over at least two real source positions per step: the top weight is below one
    # and at least 1 / T_x.
    assert 0.0 < dot["mean_max_weight"] < 1.0

    local = diagnostics.diagnose(str(tmp_path / "local"), batches=1)
    assert (local["attention"], local["score"]) == ("local-p", "general")
    assert 0.0 <= local["p_over_S_mean"] <= 1.0  # p_t = S * sigmoid(.) lies in [0, S]
    assert 0.0 <= local["p_over_S_above_0.95"] <= 1.0
    assert 0.0 <= local["p_over_S_below_0.05"] <= 1.0
    assert -1.0 <= local["p_over_S_progress_corr"] <= 1.0
    # The wrapped methods are put back.
    assert (Softmax.call, LocalAttention._aligned_positions) == (softmax_call, positions)

    assert diagnostics.main([str(tmp_path / "local"), "--batches", "1"]) == 0
    assert "local-p general: score std" in capsys.readouterr().out


@pytest.mark.parametrize("input_feeding", [True, False])  # the scan and the one-pass decoder
def test_local_p_positions_from_a_known_predictor(diagnostics, tmp_path, input_feeding):
    """v_p = 0 puts p_t at S / 2 at every step; v_p = 60 sign(tanh(W_p h_t)) saturates it."""
    tiny_run(tmp_path / "run", attention="local-p", window=3, input_feeding=input_feeding)
    model = keras.saving.load_model(str(tmp_path / "run" / "model.keras"))
    align = model.get_layer("decoder").attention_layer
    align.position_v.assign(np.zeros(align.position_v.shape, "float32"))
    model.save(str(tmp_path / "run" / "model.keras"))
    middle = diagnostics.diagnose(str(tmp_path / "run"), batches=2)
    run = RunDirectory(tmp_path / "run")
    config = run.read_config()
    plan = _training_data(run, config, corpora.load_corpus(config.corpus, seed=0)["train"])
    real_steps = sum(int((plan.batch(i)[0]["target_ids"] != 0).sum()) for i in range(2))
    assert middle["position_steps"] == real_steps  # padded target steps are left out
    np.testing.assert_allclose(middle["p_over_S_mean"], 0.5, rtol=1e-6)
    assert middle["p_over_S_below_0.05"] == middle["p_over_S_above_0.95"] == 0.0
    assert np.isnan(middle["p_over_S_progress_corr"])  # a constant p_t / S follows nothing

    # W_p all 1e5 and v_p all 60: every unit of tanh(W_p h_t) is the sign of sum(h_t) (|sum| is
    # about 1e-3 at the smallest here), so p_t sits at one end or the other: the shares at the
    # two ends add up to one.
    align.position_kernel.assign(np.full(align.position_kernel.shape, 1e5, "float32"))
    align.position_v.assign(np.full(align.position_v.shape, 60.0, "float32"))
    model.save(str(tmp_path / "run" / "model.keras"))
    parked = diagnostics.diagnose(str(tmp_path / "run"), batches=2)
    np.testing.assert_allclose(
        parked["p_over_S_below_0.05"] + parked["p_over_S_above_0.95"], 1.0, rtol=1e-6
    )


def test_residual_score_correction_is_read_from_the_saved_kernel(diagnostics, tmp_path, capsys):
    residual_score = ResidualGeneralScore.score
    tiny_run(tmp_path / "residual", score="residual_general")
    model = keras.saving.load_model(str(tmp_path / "residual" / "model.keras"))
    score_fn = model.get_layer("decoder").attention_layer.score_fn
    kernel = np.random.default_rng(0).normal(0.0, 0.3, score_fn.kernel.shape).astype("float32")
    score_fn.kernel.assign(kernel)  # W starts at zero: the dot score
    model.save(str(tmp_path / "residual" / "model.keras"))
    result = diagnostics.diagnose(str(tmp_path / "residual"), batches=1)
    expected = np.linalg.norm(kernel / 16.0) / np.sqrt(16.0)  # ||W/d||_F / ||I||_F, d = 16
    np.testing.assert_allclose(result["correction"], expected, rtol=1e-6)
    learned_std = result["correction_std"]
    assert learned_std > 0  # the W term moves the scores
    assert diagnostics.main([str(tmp_path / "residual"), "--batches", "1"]) == 0
    printed = capsys.readouterr().out
    assert "global residual_general: score std" in printed
    assert f"||W/d|| / ||I|| {expected:.3f}, std of q^T (W/d) k" in printed

    # With W = 0 the model is the dot model: the learned term is zero at every position, up to
    # float32 rounding of two einsum orders (about 1e-4 of the model with W set, here).
    zeroed = tmp_path / "zeroed"
    shutil.copytree(tmp_path / "residual", zeroed)
    score_fn.kernel.assign(np.zeros_like(kernel))
    model.save(str(zeroed / "model.keras"))
    result = diagnostics.diagnose(str(zeroed), batches=1)
    assert result["correction"] == 0.0
    assert result["correction_std"] < 1e-3 * learned_std
    assert ResidualGeneralScore.score is residual_score  # the wrapped hooks are put back
