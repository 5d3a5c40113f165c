"""Translation quality at one fixed wall-clock training budget per model, by source length.

Trains 22 translators on each real corpus, each for the same `--budget-minutes` of training
loop (`keras_attn.training.trainer.train` with `max_cpu_minutes`, this process' CPU time, the
default `--clock cpu`, fair on a machine shared with other jobs; or `max_minutes`, wall-clock
time, with `--clock wall`; vocabulary building and evaluation are not counted), then translates
the corpus' test split greedily through the exported path
(`keras_attn.export.translator.Translator.translate_with_alignment`) and reports sacrebleu BLEU,
overall and per source-length bucket (source words), as in Luong et al. (2015), figure 6.

Arms: no attention (`rnn-plain`, Cho et al.), Bahdanau (`rnn-attention`), Luong (`rnn-luong`) global
dot (also stacked two and four layers deep), global general, local-p on the general score (the
paper's choice), both general models again on the scaled general score (`scaled_general`), local-p
on the dot score, both general models on the general score parametrized for Adam
(`residual_general`, `q^T (I + W/d) k`), our Transformer (`transformer`) and the same-size
Transformer built from keras-hub's `TransformerEncoder`/`TransformerDecoder` (registered here as
family `keras-hub-transformer`; needs the `bench` extra, `pip install -e '.[bench]'`, and is skipped
with a note without it), all on Adam; then no attention, global dot, global general, local-p general
and local-p dot again on Luong et al.'s optimizer (plain SGD, constant rate for five passes, then
halved after every pass), and both local-p models on it once more with their position predictor at a
tenth of the rate.

Writes into `--out`: `results.json`, `results.md` (the tables), per corpus
`bleu_by_length_<corpus>.png` (BLEU vs source length, one line per model) and
`alignments_<corpus>.png` (alignment heatmaps of a few test sentences, attention models only), and
per arm its run directory and `test.tsv` (source, reference, hypothesis). An arm whose
`result.json` exists is not run again, and one whose training finished (its run directory holds
the model and `metrics.json`, with the same configuration) is only translated and scored, so an
interrupted experiment continues where it stopped.
`--workers N` trains N arms at once, each in its own process with cores/N TensorFlow threads (a
CPU-time budget stays per model); the vocabularies are built first, once per corpus.

    python experiments/quality.py --corpora ding-de-en bible-es-en --budget-minutes 10 --out OUT
    python experiments/quality.py --corpora ding-de-en --budget-minutes 20 --workers 2 --out OUT
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import shutil
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_attn.models.families import (  # noqa: E402
    MODEL_FAMILIES,
    ModelFamily,
    get_family,
    register_family,
)
from keras_attn.models.transformer.options import TransformerOptions  # noqa: E402
from keras_attn.training.metrics import corpus_bleu  # noqa: E402

KERAS_HUB_FAMILY = "keras-hub-transformer"


@dataclasses.dataclass(frozen=True)
class Arm:
    """One model of the comparison: a family and its TrainConfig overrides."""

    name: str
    model: str
    options: dict = dataclasses.field(default_factory=dict)
    attends: bool = True  # whether its alignments are attention weights (heatmaps)

    @property
    def slug(self) -> str:
        return self.name.lower().replace(" ", "-")

    def directory(self, out: Path, corpus: str) -> Path:
        """`OUT/CORPUS/SLUG`: the arm's `result.json`, `test.tsv` and `run/`."""
        return out / corpus / self.slug


def evaluation_pairs(splits, args) -> list:
    """The test pairs the experiment translates: the corpus' test split, or its first
    `--test-sentences`."""
    return splits["test"][: args.test_sentences] if args.test_sentences else splits["test"]


# RNNs at peak 3e-3, the Transformers at 1e-3, with `--warmup-steps` 100: the built-in families'
# own defaults (tests/experiments/test_quality_smoke.py keeps them the same); all on the
# inverse-sqrt schedule, which does not depend on the step target (a time budget leaves it
# unknown).
RNN = {"learning_rate": 3e-3}
TRANSFORMER = {"learning_rate": 1e-3}
# Luong et al. (2015, section 4.1): SGD at rate 1.0 on the loss summed over a sentence's target
# words, gradient norm clipped at 5, no warm-up. The trainer's loss is the mean over target tokens,
# so their rate does not carry over; the rate and clip norm used here are chosen in
# docs/results.md. Halving starts after SGD_HALVING[0] passes, then every SGD_HALVING[1];
# `arm_config` turns passes into steps.
SGD = {
    "optimizer": "sgd",
    "learning_rate": 4.0,
    "clipnorm": 1.0,
    "schedule": "halving",
    "warmup_steps": 0,
}
SGD_HALVING = (5, 1)
# The "slow predictor" arms train local-p's position predictor (W_p and v_p) at a tenth of the rate:
# a factor on their gradients, `--position-gradient-scale` (docs/results.md).
SGD_PREDICTOR_SCALE = 0.1
# The slope of the scheduled-sampling arm's linear decay: epsilon is 0.6 at step 2,500 and 0.52
# at step 3,000, so a run of the shared budget ends with about half its inputs sampled.
SAMPLING_SLOPE = 1.6e-4
ARMS = (
    Arm("no attention", "rnn-plain", RNN, attends=False),
    Arm("Bahdanau", "rnn-attention", {**RNN, "score": "additive"}),
    Arm("Luong dot", "rnn-luong", {**RNN, "score": "dot"}),
    Arm("Luong general", "rnn-luong", {**RNN, "score": "general"}),
    Arm("Luong local-p", "rnn-luong", {**RNN, "score": "general", "attention": "local-p"}),
    # The same two models with the 1/sqrt(d) factor on the general score, and local-p on the dot
    # score.
    Arm("Luong general scaled", "rnn-luong", {**RNN, "score": "scaled_general"}),
    Arm(
        "Luong local-p scaled",
        "rnn-luong",
        {**RNN, "score": "scaled_general", "attention": "local-p"},
    ),
    Arm("Luong local-p dot", "rnn-luong", {**RNN, "score": "dot", "attention": "local-p"}),
    # The general score parametrized for Adam: q^T (I + W/d) k, starting as the dot score.
    Arm("Luong general residual", "rnn-luong", {**RNN, "score": "residual_general"}),
    Arm(
        "Luong local-p residual",
        "rnn-luong",
        {**RNN, "score": "residual_general", "attention": "local-p"},
    ),
    # Luong et al.'s stacking (section 4.1: four layers): the global dot model at two and four
    # layers, residual connections from the third layer up (Wu et al., 2016).
    Arm("Luong dot 2 layers", "rnn-luong", {**RNN, "score": "dot", "num_layers": 2}),
    Arm("Luong dot 4 layers", "rnn-luong", {**RNN, "score": "dot", "num_layers": 4}),
    # Scheduled sampling (Bengio et al., 2015) on the global dot model: linear decay of the
    # probability of a gold input, epsilon_i = 1 - SAMPLING_SLOPE * i.
    Arm(
        "Luong dot scheduled sampling",
        "rnn-luong",
        {
            **RNN,
            "score": "dot",
            "scheduled_sampling": "linear",
            "sampling_constant": SAMPLING_SLOPE,
        },
    ),
    Arm("Transformer", "transformer", TRANSFORMER),
    Arm("keras-hub Transformer", KERAS_HUB_FAMILY, TRANSFORMER, attends=False),
    # Luong et al.'s own optimizer, where a step follows the gradient's size instead of Adam's
    # per-weight ~lr: plain SGD at a constant rate for five passes, then halved after every pass.
    Arm("no attention SGD", "rnn-plain", SGD, attends=False),
    Arm("Luong dot SGD", "rnn-luong", {**SGD, "score": "dot"}),
    Arm("Luong general SGD", "rnn-luong", {**SGD, "score": "general"}),
    Arm("Luong local-p SGD", "rnn-luong", {**SGD, "score": "general", "attention": "local-p"}),
    Arm("Luong local-p dot SGD", "rnn-luong", {**SGD, "score": "dot", "attention": "local-p"}),
    Arm(
        "Luong local-p SGD slow predictor",
        "rnn-luong",
        {
            **SGD,
            "score": "general",
            "attention": "local-p",
            "position_gradient_scale": SGD_PREDICTOR_SCALE,
        },
    ),
    Arm(
        "Luong local-p dot SGD slow predictor",
        "rnn-luong",
        {
            **SGD,
            "score": "dot",
            "attention": "local-p",
            "position_gradient_scale": SGD_PREDICTOR_SCALE,
        },
    ),
)
# Source-length bucket edges (words) per corpus: bucket i holds lengths in (edges[i-1], edges[i]].
BUCKET_EDGES = {"ding-de-en": (4, 8, 12), "bible-es-en": (10, 20, 30, 40)}
DEFAULT_EDGES = (10, 20, 30, 40)
RESULT_FILE = "result.json"  # per arm, in OUT/CORPUS/ARM-SLUG: a finished arm is not run again
RECENT_STEPS = 200  # the "train loss" column: mean loss of an arm's last 200 steps


# ---------------------------------------------------------------------------- pure functions


def source_length(sentence: str) -> int:
    """Length of a source sentence in whitespace-separated words (Luong et al.'s x axis)."""
    return len(sentence.split())


def bucket_labels(edges: Sequence[int]) -> list[str]:
    """`(4, 8)` -> `["1-4", "5-8", "9+"]`: the buckets `bucket_index` numbers."""
    if not edges or any(b <= a for a, b in zip(edges, edges[1:], strict=False)) or edges[0] < 1:
        raise ValueError(f"Expected increasing positive bucket edges. Received: {list(edges)}")
    lows = [1, *(edge + 1 for edge in edges)]
    return [f"{low}-{high}" for low, high in zip(lows, edges, strict=False)] + [f"{lows[-1]}+"]


def bucket_index(length: int, edges: Sequence[int]) -> int:
    """The bucket of a length: the number of edges below it (`(4, 8)`: 1-4 -> 0, 9+ -> 2)."""
    return int(np.searchsorted(np.asarray(edges), length, side="left"))


def bleu_by_bucket(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[str],
    edges: Sequence[int],
) -> list[dict]:
    """Corpus BLEU of the sentences of every source-length bucket.

    Returns one `{"bucket", "sentences", "bleu"}` per bucket of `bucket_labels(edges)`, in order;
    `bleu` is None for an empty bucket.
    """
    if not len(sources) == len(hypotheses) == len(references):
        raise ValueError(
            f"{len(sources)} sources, {len(hypotheses)} hypotheses, {len(references)} references"
        )
    members: list[list[int]] = [[] for _ in range(len(edges) + 1)]
    for row, source in enumerate(sources):
        members[bucket_index(source_length(source), edges)].append(row)
    return [
        {
            "bucket": label,
            "sentences": len(rows),
            "bleu": corpus_bleu([hypotheses[r] for r in rows], [references[r] for r in rows])
            if rows
            else None,
        }
        for label, rows in zip(bucket_labels(edges), members, strict=True)
    ]


def alignment_monotonicity(alignment: np.ndarray, target_length: int, source_length: int) -> dict:
    """How monotonic one sentence's alignment is, from each target token's most-attended source.

    With `a_t = argmax_s alignment[t, s]` over the real `target_length x source_length` block:
    `monotone` is the share of consecutive target steps with `a_{t+1} >= a_t` (1.0 for a
    diagonal), `crossings` the number of steps with `a_{t+1} < a_t` (a reordering). Rows that are
    all zero (no attention) give `monotone` None.
    """
    block = np.asarray(alignment)[:target_length, :source_length]
    if target_length < 2 or not np.any(block):
        return {"monotone": None, "crossings": 0}
    peaks = block.argmax(axis=-1)
    steps = np.diff(peaks)
    return {"monotone": float(np.mean(steps >= 0)), "crossings": int(np.sum(steps < 0))}


def recent_loss(run_dir: Path, last: int = RECENT_STEPS) -> float | None:
    """Mean training loss of a run's last `last` steps (its `train_log.tsv`); None without one.

    A steadier end-of-training figure than the last batch's loss, which moves with that batch's
    sentence lengths.
    """
    from keras_attn.training.trainer import TRAIN_LOG, read_train_log

    rows = read_train_log(Path(run_dir) / TRAIN_LOG)[-last:]
    return float(np.mean([loss for _, loss, _ in rows])) if rows else None


def format_table(results: Sequence[dict], edges: Sequence[int]) -> str:
    """A markdown table: one row per arm, BLEU overall and per bucket, steps, parameters."""
    labels = bucket_labels(edges)
    counts = results[0]["buckets"] if results else []
    header = ["model", "steps", "CPU min", "params", "BLEU"] + [
        f"{b['bucket']} (n={b['sentences']})" for b in counts
    ]
    if not counts:
        header += labels
    header += ["train loss", "monotone", "crossing sents"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        cells = [
            result["arm"],
            str(result["steps"]),
            f"{result['train_cpu_seconds'] / 60:.1f}" if "train_cpu_seconds" in result else "–",
            f"{result['parameters'] / 1e6:.2f} M",
            f"{result['bleu']:.2f}",
        ]
        cells += ["–" if b["bleu"] is None else f"{b['bleu']:.2f}" for b in result["buckets"]]
        loss = result.get("recent_loss")
        cells.append("–" if loss is None else f"{loss:.2f}")
        mono = result.get("monotone")
        cells += [
            "–" if mono is None else f"{mono:.2f}",
            "–" if mono is None else f"{result['crossing_share']:.0%}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- keras-hub arm


def keras_hub_available() -> bool:
    return importlib.util.find_spec("keras_hub") is not None


def keras_hub_translator(
    source_vocab_size: int,
    target_vocab_size: int,
    num_layers: int = 2,
    d_model: int = 128,
    num_heads: int = 4,
    ff_dim: int = 512,
    dropout: float = 0.1,
    positions: int = 256,
) -> keras.Model:
    """Our `transformer_translator`'s sizes from keras-hub layers: post-LN, tied output, dropout.

    Differences that keras-hub's layers impose: learned positions (`positions` of them; ours are
    sinusoidal, no weights) and no `sqrt(d)` scaling of the embeddings.
    """
    from keras_hub.layers import (
        PositionEmbedding,
        ReversibleEmbedding,
        TransformerDecoder,
        TransformerEncoder,
    )

    source_ids = keras.Input((None,), dtype="int32", name="source_ids")
    target_ids = keras.Input((None,), dtype="int32", name="target_ids")

    def embed(vocab_size, ids, name):
        # keras-hub's TokenAndPositionEmbedding, unrolled so that the tied output projection
        # calls a top-level layer (a nested one does not survive a .keras reload).
        tokens = ReversibleEmbedding(vocab_size, d_model, name=name)
        embedded = tokens(ids)
        where = PositionEmbedding(positions, name=f"{name}_positions")(embedded)
        embedded = keras.layers.Add(name=f"{name}_sum")([embedded, where])
        return tokens, keras.layers.Dropout(dropout, name=f"{name}_dropout")(embedded)

    # Padding masks passed explicitly (keras-hub's PositionEmbedding drops the Keras mask).
    source_mask = keras.ops.not_equal(source_ids, 0)
    target_mask = keras.ops.not_equal(target_ids, 0)
    _, memory = embed(source_vocab_size, source_ids, "source_embedding")
    for index in range(num_layers):
        memory = TransformerEncoder(ff_dim, num_heads, dropout=dropout, name=f"encoder_{index}")(
            memory, padding_mask=source_mask
        )
    target_embedding, hidden = embed(target_vocab_size, target_ids, "target_embedding")
    for index in range(num_layers):
        hidden = TransformerDecoder(ff_dim, num_heads, dropout=dropout, name=f"decoder_{index}")(
            hidden,
            memory,
            decoder_padding_mask=target_mask,
            encoder_padding_mask=source_mask,
        )
    logits = target_embedding(hidden, reverse=True)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, logits)


class FullPassSteps:
    """The step contract over any teacher-forced translator, without a cache.

    `encode` keeps the source ids, an empty `(batch, max_length)` target buffer and the write
    position; `step` writes the token, runs the whole model on the prefix written so far and
    returns the logits of its last position, so decoding computes exactly what training computed
    (at `O(t)` model work per step instead of `O(1)`). `attention` stays all zeros: keras-hub's
    decoder does not return its cross-attention weights.
    """

    def __init__(self, model: keras.Model, max_length: int = 128):
        self.model = model
        self.max_length = max_length

    def encode(self, source_ids) -> dict:
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        batch = ops.shape(source_ids)[0]
        return {
            "source_ids": source_ids,
            "tokens": ops.zeros((batch, self.max_length + 1), "int32"),
            "position": ops.zeros((batch,), "int32"),
            "attention": ops.zeros(ops.shape(source_ids), "float32"),
        }

    def step(self, token_ids, state: dict):
        position = state["position"]  # (batch,)
        columns = ops.arange(self.max_length + 1, dtype="int32")[None, :]
        here = ops.equal(columns, position[:, None])  # (batch, max_length + 1)
        tokens = ops.where(here, ops.cast(token_ids, "int32")[:, None], state["tokens"])
        width = ops.max(position) + 1
        logits = self.model(
            {"source_ids": state["source_ids"], "target_ids": tokens[:, :width]}, training=False
        )  # (batch, width, V)
        last = ops.take_along_axis(logits, position[:, None, None], axis=1)[:, 0]
        new_state = dict(state, tokens=tokens, position=position + 1)
        return ops.cast(last, "float32"), new_state


def register_keras_hub_family() -> None:
    if KERAS_HUB_FAMILY not in MODEL_FAMILIES:
        register_family(
            KERAS_HUB_FAMILY,
            ModelFamily(
                build=keras_hub_translator,
                steps=FullPassSteps,
                options=TransformerOptions,
                sized_steps=True,
            ),
        )


# ---------------------------------------------------------------------------- one arm


def translate_test(run_dir: Path, pairs, batch_size: int = 200) -> dict:
    """Greedy translations and alignments of `pairs` by the run's model, via `Translator`."""
    import tensorflow as tf

    from keras_attn.export.translator import MAX_OUTPUT_LENGTH, Translator
    from keras_attn.models.families import get_family
    from keras_attn.training.trainer import RunDirectory

    run = RunDirectory(run_dir)
    config = run.read_config()
    model = run.load_model()
    source_tokenizer, target_tokenizer = run.tokenizers()
    translator = Translator(
        model,
        get_family(config.model).decoding_steps(model, MAX_OUTPUT_LENGTH),
        source_tokenizer,
        target_tokenizer,
        config.max_length,
        max_output_length=MAX_OUTPUT_LENGTH,
    )
    hypotheses, alignments = [], []
    for begin in range(0, len(pairs), batch_size):
        text = tf.constant([source for source, _ in pairs[begin : begin + batch_size]])
        out = translator.translate_with_alignment(text)
        tokens = out["tokens"].numpy()
        sources = out["source_tokens"].numpy()
        for row, translation in enumerate(out["translation"].numpy()):
            hypotheses.append(translation.decode("utf-8"))
            target_words = [t.decode("utf-8") for t in tokens[row] if t]
            source_words = [t.decode("utf-8") for t in sources[row] if t]
            alignments.append(
                {
                    "source_tokens": source_words,
                    "target_tokens": target_words,
                    "alignment": out["alignment"].numpy()[row][
                        : len(target_words), : len(source_words)
                    ],
                }
            )
    return {
        "hypotheses": hypotheses,
        "alignments": alignments,
        "parameters": int(model.count_params()),
    }


def arm_config(arm: Arm, corpus: str, args, train_pairs: int | None = None):
    """The arm's `TrainConfig`: the shared budget, batch, schedule and seed, then its options
    (the run's and its family's, the family's defaults filled in).

    An arm on the halving schedule needs `train_pairs` (the corpus' training split): it halves
    after `SGD_HALVING[0]` passes of `train_pairs // batch_size` steps, then every
    `SGD_HALVING[1]` passes. The trainer drops pairs longer than `max_length` tokens, so its pass
    can be a little shorter (421 batches instead of 425 on libreoffice-es-en): the halvings come
    at most that much late.
    """
    from keras_attn.training.trainer import TrainConfig

    settings = {
        "schedule": "inverse-sqrt",
        "warmup_steps": args.warmup_steps,
        **arm.options,
    }
    if settings["schedule"] == "halving":
        if train_pairs is None:
            raise ValueError(f"{arm.name}: the halving schedule needs the training split's size")
        steps_per_pass = max(train_pairs // args.batch_size, 1)
        settings["decay_start"] = SGD_HALVING[0] * steps_per_pass
        settings["decay_every"] = SGD_HALVING[1] * steps_per_pass
    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    family_options = {name: value for name, value in settings.items() if name not in fields}
    settings = {name: value for name, value in settings.items() if name in fields}
    if arm.model == KERAS_HUB_FAMILY:
        register_keras_hub_family()
    return TrainConfig(
        model=arm.model,
        corpus=corpus,
        steps=args.max_steps,
        batch_size=args.batch_size,
        seed=args.seed,
        eval_sentences=0,
        checkpoint_every=args.max_steps,
        **{"max_cpu_minutes" if args.clock == "cpu" else "max_minutes": args.budget_minutes},
        **settings,
        options=get_family(arm.model).option_values(family_options),
    )


def finished_training(run_dir: Path, config) -> dict | None:
    """The metrics of a run in `run_dir` that finished training with `config`, else None.

    The trainer writes `metrics.json` after it saved `model.keras`, so both being there means the
    budget was spent; an experiment killed while translating then only needs the translation. A run
    with another configuration (other budget, seed or options) does not count.
    """
    from keras_attn.training.trainer import CONFIG_FILE, METRICS_FILE, MODEL_FILE, RunDirectory

    run = RunDirectory(run_dir)
    if not all(run.file(name).is_file() for name in (CONFIG_FILE, METRICS_FILE, MODEL_FILE)):
        return None
    if run.read_config() != config:
        return None
    return json.loads(run.file(METRICS_FILE).read_text())


def train_arm(arm: Arm, corpus: str, splits, config, out: Path, run_dir: Path, log) -> dict:
    """Train `arm` from step 0 in a fresh `run_dir` for the budget; the trainer's metrics."""
    from keras_attn.training.trainer import CONFIG_FILE, RunDirectory, train

    if run_dir.exists():  # a run killed mid-way: start it again from scratch
        shutil.rmtree(run_dir)
    # Every arm of a corpus uses the same vocabularies (building one costs minutes): the run
    # directory starts with them and its config, and `train(resume=True)` finds no checkpoint,
    # so it trains from step 0 without building them again.
    vocabularies = shared_vocabularies(out / corpus / "vocab", splits["train"], config, log)
    run = RunDirectory(run_dir)
    run.path.mkdir(parents=True)
    for name, path in vocabularies.items():
        shutil.copyfile(path, run.file(name))
    run.write_json(CONFIG_FILE, dataclasses.asdict(config))
    return train(
        run_dir,
        config,
        resume=True,
        progress=False,
        log=lambda line: log(f"{corpus} / {arm.name}: {line}"),
    )


def run_arm(arm: Arm, corpus: str, splits, args, out: Path, log) -> dict:
    """Train `arm` for the budget (or reuse a finished run), translate the test split, score."""
    from keras_attn.text.normalization import normalize_text

    arm_dir = arm.directory(out, corpus)
    result_file = arm_dir / RESULT_FILE
    run_dir = arm_dir / "run"
    if result_file.exists():
        log(f"{corpus} / {arm.name}: reusing {result_file}")
        result = json.loads(result_file.read_text())
        if "recent_loss" not in result:  # written before the column existed: read the run's log
            result["recent_loss"] = recent_loss(run_dir)
        return result
    config = arm_config(arm, corpus, args, train_pairs=len(splits["train"]))
    metrics = finished_training(run_dir, config)
    if metrics is not None:  # killed while translating: the trained model is all there
        log(f"{corpus} / {arm.name}: trained earlier ({metrics['steps']} steps), evaluating")
    else:
        metrics = train_arm(arm, corpus, splits, config, out, run_dir, log)
    test = evaluation_pairs(splits, args)
    started = time.perf_counter()
    translated = translate_test(run_dir, test)
    sources = [source for source, _ in test]
    references = [normalize_text(reference) for _, reference in test]
    hypotheses = translated["hypotheses"]
    rows = heatmap_rows(sources, args)
    edges = args.bucket_edges or BUCKET_EDGES.get(corpus, DEFAULT_EDGES)
    shapes = [
        alignment_monotonicity(a["alignment"], len(a["target_tokens"]), len(a["source_tokens"]))
        for a in translated["alignments"]
    ]
    scored = [s for s in shapes if s["monotone"] is not None]
    result = {
        "arm": arm.name,
        "model": arm.model,
        "options": arm.options,
        "corpus": corpus,
        "steps": metrics["steps"],
        "train_seconds": metrics["train_seconds_this_session"],
        "train_cpu_seconds": metrics["train_cpu_seconds_this_session"],
        "final_loss": metrics["final_loss"],
        "recent_loss": recent_loss(run_dir),
        "parameters": translated["parameters"],
        "test_sentences": len(test),
        "bleu": corpus_bleu(hypotheses, references),
        "buckets": bleu_by_bucket(sources, hypotheses, references, edges),
        "bucket_edges": list(edges),
        "monotone": float(np.mean([s["monotone"] for s in scored])) if scored else None,
        "crossing_share": float(np.mean([s["crossings"] > 0 for s in scored])) if scored else None,
        "decode_seconds": round(time.perf_counter() - started, 1),
        "heatmap_rows": rows,
        "heatmaps": heatmap_entries([translated["alignments"][i] for i in rows]),
    }
    with open(arm_dir / "test.tsv", "w", encoding="utf-8") as handle:
        for source, reference, hypothesis in zip(sources, references, hypotheses, strict=True):
            handle.write(f"{source}\t{reference}\t{hypothesis}\n")
    result_file.write_text(json.dumps(result, ensure_ascii=False) + "\n")
    log(
        f"{corpus} / {arm.name}: {result['steps']} steps, test BLEU {result['bleu']:.2f} "
        f"({result['decode_seconds']} s to translate {len(test)})"
    )
    return result


def shared_vocabularies(directory: Path, train_pairs, config, log) -> dict[str, Path]:
    """The corpus' source and target WordPiece vocabularies, built once into `directory`.

    Built exactly as the trainer builds a run's (`build_wordpiece_vocab` on the training side,
    `config.vocab_size` tokens); later arms and later experiment runs reuse the files.
    """
    from keras_attn.text.vocab import build_wordpiece_vocab, save_vocab
    from keras_attn.training.trainer import SOURCE_VOCAB, TARGET_VOCAB

    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, side in ((SOURCE_VOCAB, 0), (TARGET_VOCAB, 1)):
        path = directory / f"{config.vocab_size}_{name}"
        if not path.exists():
            started = time.perf_counter()
            vocab = build_wordpiece_vocab([pair[side] for pair in train_pairs], config.vocab_size)
            save_vocab(path.with_suffix(".tmp"), vocab)
            os.replace(path.with_suffix(".tmp"), path)
            log(f"built {path}: {len(vocab)} tokens in {time.perf_counter() - started:.1f} s")
        files[name] = path
    return files


def heatmap_rows(sources: Sequence[str], args) -> list[int]:
    """The test sentences drawn as heatmaps: `--heatmap-rows`, else the first `--heatmaps` ones
    with 6 to 14 source words."""
    if args.heatmap_rows:
        wrong = [row for row in args.heatmap_rows if not 0 <= row < len(sources)]
        if wrong:
            raise ValueError(
                f"--heatmap-rows {wrong} are outside the {len(sources)} test sentences"
            )
        return list(args.heatmap_rows)
    rows = [i for i, s in enumerate(sources) if 6 <= source_length(s) <= 14]
    return rows[: args.heatmaps]


def heatmap_entries(alignments: Sequence[dict]) -> list[dict]:
    """What `result.json` keeps of the drawn sentences' alignments (rounded, as lists)."""
    return [
        {
            "source_tokens": a["source_tokens"],
            "target_tokens": a["target_tokens"],
            "alignment": np.round(a["alignment"], 4).tolist(),
        }
        for a in alignments
    ]


def redraw_heatmaps(arm: Arm, result: dict, test, rows: list[int], out: Path, log) -> dict:
    """`result` with the heatmaps of test sentences `rows`, translated again by the arm's run.

    For an arm finished with other heatmap rows (a reused `result.json`): only those sentences
    are translated; the result file is rewritten. Without the run directory it is left as is.
    """
    arm_dir = arm.directory(out, result["corpus"])
    if not (arm_dir / "run").exists():
        log(f"{result['corpus']} / {result['arm']}: no run directory, heatmaps not redrawn")
        return result
    translated = translate_test(arm_dir / "run", [test[row] for row in rows])
    result = dict(result, heatmap_rows=rows, heatmaps=heatmap_entries(translated["alignments"]))
    (arm_dir / RESULT_FILE).write_text(json.dumps(result, ensure_ascii=False) + "\n")
    return result


# ---------------------------------------------------------------------------- figures


def plot_bleu_by_length(results: Sequence[dict], corpus: str, path: Path) -> None:
    """BLEU vs source length, one line per model (the shape of Luong et al.'s figure 6)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for result in results:
        points = [(i, b["bleu"]) for i, b in enumerate(result["buckets"]) if b["bleu"] is not None]
        style = "--" if result["model"] in ("rnn-plain",) else "-"
        axis.plot(*zip(*points, strict=True), style, marker="o", label=result["arm"])
    buckets = results[0]["buckets"]
    axis.set_xticks(range(len(buckets)))
    axis.set_xticklabels([f"{b['bucket']}\n(n={b['sentences']})" for b in buckets])
    axis.set_xlabel("source sentence length (words)")
    axis.set_ylabel("test BLEU (greedy)")
    steps = ", ".join(f"{r['arm']} {r['steps']}" for r in results)
    axis.set_title(f"{corpus}: BLEU by source length", fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    # Wrapped to the figure's width (about 190 characters of 5-point text per line).
    footnote = "\n".join(textwrap.wrap(f"training steps: {steps}", 190))
    figure.text(0.01, 0.005, footnote, fontsize=5)
    figure.tight_layout(rect=(0, 0.015 * (footnote.count("\n") + 2), 1, 1))
    figure.savefig(path)
    plt.close(figure)


def plot_alignments(results: Sequence[dict], corpus: str, path: Path) -> None:
    """Alignment heatmaps: one row per test sentence, one column per attention model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = [r for r in results if r["heatmaps"] and r.get("monotone") is not None]
    if not drawn:
        return
    rows = min(len(r["heatmaps"]) for r in drawn)
    figure, axes = plt.subplots(
        rows, len(drawn), figsize=(3.0 * len(drawn), 3.0 * rows), dpi=80, squeeze=False
    )
    for column, result in enumerate(drawn):
        for row in range(rows):
            heatmap = result["heatmaps"][row]
            axis = axes[row][column]
            matrix = np.asarray(heatmap["alignment"], dtype=float)
            if matrix.size == 0:
                axis.axis("off")
                continue
            axis.imshow(matrix, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
            axis.set_xticks(range(len(heatmap["source_tokens"])))
            axis.set_xticklabels(heatmap["source_tokens"], rotation=90, fontsize=6)
            axis.set_yticks(range(len(heatmap["target_tokens"])))
            axis.set_yticklabels(heatmap["target_tokens"], fontsize=6)
            if row == 0:
                axis.set_title(result["arm"], fontsize=9)
    figure.suptitle(f"{corpus}: alignments of test sentences (rows: output, columns: source)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


# ---------------------------------------------------------------------------- workers

# Options that name what one worker process runs; `child_argv` replaces them.
_WORKER_OPTIONS = ("--corpora", "--arms", "--workers")


def child_argv(argv: Sequence[str], corpus: str, slug: str) -> list[str]:
    """`argv` for a worker that runs one arm of one corpus: the same budget, batch, seed, out.

    Drops `--corpora`, `--arms` and `--workers` with their values (`--arms a b` and `--arms=a`
    alike) and appends `--corpora corpus --arms slug --workers 1`.
    """
    kept, skipping = [], False
    for token in argv:
        name = token.split("=", 1)[0]
        if name in _WORKER_OPTIONS:
            skipping = "=" not in token
            continue
        if skipping and not token.startswith("--"):
            continue
        skipping = False
        kept.append(token)
    return [*kept, "--corpora", corpus, "--arms", slug, "--workers", "1"]


def threads_per_worker(workers: int, cpus: int | None = None) -> int:
    """TensorFlow intra-op threads for each of `workers` processes sharing `cpus` cores."""
    return max(1, (cpus or os.cpu_count() or 1) // workers)


def run_workers(jobs: Sequence[tuple[str, Arm]], argv: Sequence[str], workers: int, log) -> int:
    """Runs every `(corpus, arm)` job in its own process, at most `workers` at a time.

    Each child trains, translates and writes its arm's `result.json` exactly as a serial run
    would (the budget is its own CPU time, so the arms sharing the machine stay comparable); the
    caller then reads them back. Returns 0, or the exit status of the first child that failed
    (the others are let finish, their results are kept).
    """
    import subprocess

    env = dict(os.environ)
    threads = str(threads_per_worker(workers))
    env.update(TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS="1")
    pending, running, status = list(jobs), [], 0
    try:
        while pending or running:
            while pending and len(running) < workers:
                corpus, arm = pending.pop(0)
                command = [sys.executable, str(Path(__file__).resolve())]
                command += child_argv(argv, corpus, arm.slug)
                log(f"{corpus} / {arm.name}: worker started ({threads} thread(s))")
                running.append((corpus, arm, subprocess.Popen(command, env=env)))
            time.sleep(1.0)
            for job in [job for job in running if job[2].poll() is not None]:
                running.remove(job)
                corpus, arm, process = job
                if process.returncode != 0:
                    log(f"{corpus} / {arm.name}: worker failed, exit status {process.returncode}")
                    status = status or process.returncode
    finally:  # interrupted (Ctrl-C): no orphan keeps training; a rerun starts those arms again
        for _, _, process in running:
            process.terminate()
        for _, _, process in running:
            process.wait()
    return status


# ---------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--corpora", nargs="+", default=["ding-de-en", "bible-es-en"])
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=10.0,
        help="minutes of training loop per model (the same for every model; see --clock)",
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: the budget is this process' CPU time (fair on a machine shared with other "
        "jobs); wall: wall-clock time",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        default=[arm.slug for arm in ARMS],
        choices=[arm.slug for arm in ARMS],
        help="models to run (default: all 22)",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument(
        "--max-steps", type=int, default=1_000_000, help="step cap (the budget normally ends it)"
    )
    parser.add_argument("--test-sentences", type=int, default=0, help="first N test pairs (0: all)")
    parser.add_argument(
        "--bucket-edges",
        type=int,
        nargs="+",
        default=None,
        help=f"source-length bucket edges in words (default per corpus: {BUCKET_EDGES}, "
        f"else {DEFAULT_EDGES})",
    )
    parser.add_argument("--heatmaps", type=int, default=2, help="test sentences drawn per model")
    parser.add_argument(
        "--heatmap-rows",
        type=int,
        nargs="+",
        default=None,
        help="test-split indices of the sentences to draw (default: the first --heatmaps with "
        "6-14 words); finished arms translate just these again",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="arms trained at once, each in its own process with cores/workers threads "
        "(the CPU clock keeps the budgets equal)",
    )
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    if args.budget_minutes <= 0:
        parser.error(f"--budget-minutes must be positive, got {args.budget_minutes}")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if args.bucket_edges is not None:
        try:
            bucket_labels(args.bucket_edges)
        except ValueError as error:
            parser.error(str(error))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    from keras_attn.text.corpora import CorpusNotInstalledError, load_corpus

    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    arms = [arm for arm in ARMS if arm.slug in args.arms]
    if any(arm.model == KERAS_HUB_FAMILY for arm in arms):
        if keras_hub_available():
            register_keras_hub_family()
        else:
            log("keras-hub is not installed (pip install -e '.[bench]'): its arm is skipped")
            arms = [arm for arm in arms if arm.model != KERAS_HUB_FAMILY]
    log(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, keras "
        f"{keras.__version__}; {args.budget_minutes} {args.clock} min per model; "
        f"arms: {', '.join(arm.name for arm in arms)}"
    )
    corpora, drawn = {}, {}  # per corpus: its splits, and its heatmap rows
    for corpus in args.corpora:
        try:
            corpora[corpus] = load_corpus(corpus, seed=args.seed)
            test = evaluation_pairs(corpora[corpus], args)
            drawn[corpus] = heatmap_rows([source for source, _ in test], args)  # bad rows fail here
        except (CorpusNotInstalledError, ValueError) as error:
            print(f"quality.py: {error}", file=sys.stderr)
            return 2
    jobs = [
        (corpus, arm)
        for corpus in corpora
        for arm in arms
        if not (arm.directory(out, corpus) / RESULT_FILE).exists()
    ]
    if args.workers > 1 and len(jobs) > 1:
        for corpus in {corpus for corpus, _ in jobs}:  # built once, before the workers share them
            config = arm_config(arms[0], corpus, args, len(corpora[corpus]["train"]))
            shared_vocabularies(out / corpus / "vocab", corpora[corpus]["train"], config, log)
        argv = sys.argv[1:] if argv is None else list(argv)
        status = run_workers(jobs, argv, args.workers, log)
        if status:
            return status
    everything = {}
    for corpus, splits in corpora.items():
        rows = drawn[corpus]
        results = []
        for arm in arms:
            result = run_arm(arm, corpus, splits, args, out, log)
            if result.get("monotone") is not None and result.get("heatmap_rows") != rows:
                result = redraw_heatmaps(
                    arm, result, evaluation_pairs(splits, args), rows, out, log
                )
            results.append(result)
        edges = results[0]["bucket_edges"]
        everything[corpus] = results
        plot_bleu_by_length(results, corpus, out / f"bleu_by_length_{corpus}.png")
        plot_alignments(results, corpus, out / f"alignments_{corpus}.png")
        table = format_table(results, edges)
        budget = f"{args.budget_minutes} {args.clock} min per model"
        print(f"\n{corpus}, {budget}, test BLEU (greedy):\n{table}\n")
    (out / "results.json").write_text(
        json.dumps(
            {"budget_minutes": args.budget_minutes, "argv": sys.argv[1:], "results": everything},
            ensure_ascii=False,
        )
        + "\n"
    )
    with open(out / "results.md", "w", encoding="utf-8") as handle:
        for corpus, results in everything.items():
            handle.write(f"### {corpus}\n\n{format_table(results, results[0]['bucket_edges'])}\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
