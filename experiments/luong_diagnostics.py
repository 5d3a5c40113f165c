"""The attention of trained Luong translators: score scale, peakedness, local-p's p_t.

    python experiments/luong_diagnostics.py RUN_DIR [RUN_DIR ...] [--batches 4]

For every `keras-attn train` run directory of an `rnn-luong` model (a `experiments/quality.py` arm
keeps it in `OUT/CORPUS/ARM/run`), runs the saved model (`model.keras`, the final weights) over the
first `--batches` training batches of its corpus, teacher-forced, dropout off, and prints:

- the standard deviation and the largest magnitude of the raw alignment scores `score(h_t, h_s)`
  over the real (unmasked) source positions, the numbers the softmax sees;
- the mean over target steps of the largest attention weight (1.0: one-hot attention);
- for local-p, `p_t / S` (its predicted position over the source length) at the real (unpadded)
  target steps: the mean, the shares of steps with `p_t / S < 0.05` and `> 0.95` (parked at the
  start or at the end of the sentence), and its correlation with the target step's relative
  position `(t + 1/2) / T_y` (near 1: the window moves through the source as the translation
  advances, as a mostly monotonic language pair needs; near 0: `p_t` ignores where it is);
- for the residual general score `q^T (I + W/d) k`, how far training took it from the dot score
  it starts as: `||W/d||_F / ||I||_F` (0: still the dot score), and the standard deviation of its
  learned term `q^T (W/d) k` over the same real positions as the scores (how much of what the
  softmax sees the learned term contributes).

The scores and positions are read by wrapping `Softmax.call`, `LocalAttention._aligned_positions`
and `ResidualGeneralScore`'s two hooks for the duration of the forward pass (the model is built
first, so the symbolic build is not recorded). It reads; it changes no file.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import contextmanager

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.distributions import softmax as softmax_module  # noqa: E402
from keras_attn.layers.attention import local_attention  # noqa: E402
from keras_attn.scores import ResidualGeneralScore  # noqa: E402
from keras_attn.text import corpora  # noqa: E402
from keras_attn.training.trainer import RunDirectory, _training_data  # noqa: E402


@contextmanager
def recording(records: dict):
    """Record raw scores, weights and local-p positions while the block runs."""
    softmax_call = softmax_module.Softmax.call
    aligned_positions = local_attention.LocalAttention._aligned_positions
    prepare_keys = ResidualGeneralScore.prepare_keys
    residual_score = ResidualGeneralScore.score
    pending = {}  # the residual score's raw keys, then the dot part q^T k of its latest scores

    def spy_softmax(self, scores, attention_mask=None):
        weights = softmax_call(self, scores, attention_mask)
        scores = np.asarray(scores)
        mask = np.ones(scores.shape, bool)
        if attention_mask is not None:
            mask = np.broadcast_to(np.asarray(attention_mask), scores.shape)
        records["scores"].append(scores[mask])
        records["max_weight"].append(np.asarray(weights).max(axis=-1).ravel())
        if "dot" in pending:  # these scores came from a residual score: q^T (W/d) k = a - q^T k
            records["correction"].append((scores - pending.pop("dot"))[mask])
        return weights

    def spy_prepare_keys(self, keys):
        pending["keys"] = np.asarray(keys)  # (batch, T_k, d)
        return prepare_keys(self, keys)

    def spy_residual_score(self, query, prepared_keys):
        scores = residual_score(self, query, prepared_keys)
        # (batch, T_q, d) x (batch, T_k, d) -> (batch, T_q, T_k)
        pending["dot"] = np.einsum("bqd,bkd->bqk", np.asarray(query), pending["keys"])
        return scores

    def spy_positions(self, query, value_mask, query_positions):
        positions = aligned_positions(self, query, value_mask, query_positions)
        lengths = np.asarray(value_mask, "float32").sum(axis=-1, keepdims=True)  # S, (batch, 1)
        # (batch, T_q): all target steps at once, or one step per call inside the decoder's scan
        records["relative_position"].append(np.asarray(positions) / lengths)
        return positions

    softmax_module.Softmax.call = spy_softmax
    local_attention.LocalAttention._aligned_positions = spy_positions
    ResidualGeneralScore.prepare_keys = spy_prepare_keys
    ResidualGeneralScore.score = spy_residual_score
    try:
        yield records
    finally:
        softmax_module.Softmax.call = softmax_call
        local_attention.LocalAttention._aligned_positions = aligned_positions
        ResidualGeneralScore.prepare_keys = prepare_keys
        ResidualGeneralScore.score = residual_score


def diagnose(run_dir: str, batches: int = 4) -> dict:
    """The statistics of one run directory (see the module docstring)."""
    run = RunDirectory(run_dir)
    config = run.read_config()
    splits = corpora.load_corpus(config.corpus, seed=config.seed)
    plan = _training_data(run, config, splits["train"])
    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
    records = {"scores": [], "max_weight": [], "relative_position": [], "correction": []}
    relative, progress = [], []  # local-p's p_t / S and (t + 1/2) / T_y at real target steps
    with recording(records):
        for index in range(batches):
            features, _ = plan.batch(index)
            model(features, training=False)
            if records["relative_position"]:
                # (batch, T_y) in both decoder paths: the steps of this batch side by side
                steps = np.concatenate(records["relative_position"], axis=1)
                records["relative_position"].clear()
                real = np.asarray(features["target_ids"]) != 0  # (batch, T_y)
                lengths = real.sum(axis=1, keepdims=True)
                where = (np.arange(real.shape[1])[None, :] + 0.5) / np.maximum(lengths, 1)
                relative.append(steps[real])
                progress.append(np.broadcast_to(where, real.shape)[real])
    scores = np.concatenate(records["scores"])
    decoder = model.get_layer("decoder")  # the score and attention the model was built with
    result = {
        "score": decoder.score if isinstance(decoder.score, str) else type(decoder.score).__name__,
        "attention": decoder.attention,
        "score_std": float(scores.std()),
        "score_max_abs": float(np.abs(scores).max()),
        "mean_max_weight": float(np.concatenate(records["max_weight"]).mean()),
    }
    score_fn = decoder.attention_layer.score_fn
    if isinstance(score_fn, ResidualGeneralScore):
        kernel = np.asarray(score_fn.kernel.numpy(), "float64")  # (d, d)
        size = kernel.shape[0]
        result["correction"] = float(np.linalg.norm(kernel / size) / np.sqrt(size))
        result["correction_std"] = float(np.concatenate(records["correction"]).std())
    if relative:
        relative, progress = np.concatenate(relative), np.concatenate(progress)
        result["position_steps"] = int(relative.size)  # the real target steps they cover
        result["p_over_S_mean"] = float(relative.mean())
        result["p_over_S_below_0.05"] = float((relative < 0.05).mean())
        result["p_over_S_above_0.95"] = float((relative > 0.95).mean())
        # Pearson correlation; NaN when p_t / S does not vary at all
        spread = relative.std() * progress.std()
        covariance = ((relative - relative.mean()) * (progress - progress.mean())).mean()
        result["p_over_S_progress_corr"] = (
            float(covariance / spread) if spread > 0 else float("nan")
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories of rnn-luong models")
    parser.add_argument("--batches", type=int, default=4, help="training batches to run")
    args = parser.parse_args(argv)
    for run_dir in args.runs:
        result = diagnose(run_dir, args.batches)
        line = (
            f"{run_dir}: {result['attention']} {result['score']}: score std "
            f"{result['score_std']:.1f}, max |score| {result['score_max_abs']:.1f}, mean max "
            f"weight {result['mean_max_weight']:.2f}"
        )
        if "p_over_S_mean" in result:
            line += (
                f"; p_t/S mean {result['p_over_S_mean']:.2f}, "
                f"< 0.05 for {100 * result['p_over_S_below_0.05']:.0f} % and "
                f"> 0.95 for {100 * result['p_over_S_above_0.95']:.0f} % of steps, "
                f"correlation with (t + 1/2) / T_y {result['p_over_S_progress_corr']:.2f}"
            )
        if "correction" in result:
            line += (
                f"; ||W/d|| / ||I|| {result['correction']:.3f}, "
                f"std of q^T (W/d) k {result['correction_std']:.2f}"
            )
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
