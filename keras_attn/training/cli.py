"""`keras-attn train`."""

from __future__ import annotations

import argparse
import sys

from keras_attn.distributions import DISTRIBUTIONS
from keras_attn.layers.recurrent.luong_decoder import ATTENTIONS
from keras_attn.scores import SCORES
from keras_attn.training.distribution import OPTIMIZERS, STRATEGIES
from keras_attn.training.precision import POLICIES
from keras_attn.training.schedules import SCHEDULES


def add_parsers(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model and write a resumable run directory",
        description="Train a model on a corpus; writes RUN/ with the .keras model, vocabularies, "
        "checkpoints and TensorBoard logs, and prints dev BLEU (perplexity for gpt) at the end.",
    )
    parser.add_argument(
        "--model",
        default="rnn-attention",
        help="model family (rnn-plain: no attention, rnn-attention, rnn-luong, transformer; gpt: "
        "a language model of the corpus' target side)",
    )
    parser.add_argument(
        "--corpus",
        default="synthetic",
        help="corpus: synthetic, ding-de-en, bible-es-en, libreoffice-es-en, or PATH.tsv "
        "(source TAB target per line; see docs/corpora.md)",
    )
    parser.add_argument("--steps", type=int, default=2000, help="total training steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument(
        "--warmup-steps", type=int, default=100, help="steps until the peak learning rate"
    )
    parser.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="cosine",
        help="cosine: linear warm-up, cosine decay to 5%% at --steps; inverse-sqrt: Vaswani et "
        "al.'s linear warm-up, then lr ~ step^-0.5; halving: Luong et al.'s constant rate, halved "
        "every --decay-every steps from --decay-start (all peak at --learning-rate)",
    )
    parser.add_argument(
        "--decay-start", type=int, default=None, help="--schedule halving: first halving's step"
    )
    parser.add_argument(
        "--decay-every", type=int, default=None, help="--schedule halving: steps between halvings"
    )
    parser.add_argument(
        "--optimizer",
        choices=tuple(OPTIMIZERS),
        default="adam",
        help="adam, or plain SGD (Luong et al.'s optimizer; the loss is a per-token mean, so "
        "their rate 1 / clip 5 does not carry over: rate 4 with --clipnorm 1 trained well on "
        "libreoffice-es-en, docs/results.md)",
    )
    parser.add_argument(
        "--label-smoothing",
        type=float,
        default=0.0,
        help="move this much target probability mass to the uniform distribution (0: off)",
    )
    parser.add_argument(
        "--clipnorm", type=float, default=5.0, help="clip the gradient's global norm (0: off)"
    )
    parser.add_argument("--mixed-precision", choices=POLICIES, default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-length", type=int, default=80, help="longest tokenized sentence")
    parser.add_argument("--vocab-size", type=int, default=2000, help="WordPiece size per side")
    parser.add_argument("--embedding-dim", type=int, default=128)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--cell", choices=("lstm", "gru"), default="lstm")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument(
        "--score",
        choices=sorted(SCORES),
        default=None,
        help="alignment score (default: additive for rnn-attention, general for rnn-luong)",
    )
    parser.add_argument(
        "--distribution",
        choices=sorted(DISTRIBUTIONS),
        default=None,
        help="attention distribution, rnn-luong (default: softmax)",
    )
    parser.add_argument(
        "--attention",
        choices=tuple(ATTENTIONS),
        default=None,
        help="rnn-luong attention: global, local-m or local-p (default: global)",
    )
    parser.add_argument(
        "--window", type=int, default=None, help="local window half width D, rnn-luong (10)"
    )
    parser.add_argument(
        "--position-gradient-scale",
        type=float,
        default=None,
        help="local-p only: a factor on the gradients of the position predictor (W_p, v_p), its "
        "learning rate relative to the rest under --optimizer sgd (default: 1)",
    )
    parser.add_argument(
        "--input-feeding",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="feed h~_{t-1} to the decoder cell, rnn-luong (default: on)",
    )
    parser.add_argument(
        "--context-feeding",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="feed the encoder summary c to every decoder step, rnn-plain (default: on, Cho et "
        "al.; off: Sutskever et al.)",
    )
    parser.add_argument(
        "--num-layers", type=int, default=None, help="blocks per stack, transformer/gpt (2)"
    )
    parser.add_argument(
        "--d-model", type=int, default=None, help="model width, transformer/gpt (128)"
    )
    parser.add_argument(
        "--num-heads", type=int, default=None, help="attention heads, transformer/gpt (4)"
    )
    parser.add_argument(
        "--ff-dim", type=int, default=None, help="feed-forward width, transformer/gpt (512)"
    )
    parser.add_argument(
        "--normalize-first",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="pre-LN blocks instead of post-LN, transformer (default: post-LN)",
    )
    parser.add_argument(
        "--checkpoint-every", type=int, default=200, help="steps between checkpoints"
    )
    parser.add_argument(
        "--eval-sentences", type=int, default=1000, help="dev sentences for BLEU (0: skip)"
    )
    parser.add_argument(
        "--distribute",
        choices=STRATEGIES,
        default="none",
        help="tf.distribute strategy: mirrored = this host's GPUs (or logical CPUs), "
        "multiworker = the hosts in TF_CONFIG; --batch-size is the global batch",
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop the training loop after this many minutes of wall-clock time (checkpointed, "
        "evaluated and resumable like a finished run)",
    )
    parser.add_argument(
        "--max-cpu-minutes",
        type=float,
        default=None,
        help="the same limit in CPU time of this process (all threads): a budget that other jobs "
        "on a shared machine do not eat into",
    )
    parser.add_argument("--out", required=True, help="run directory")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    """Exit 0 when the run finished, 1 when it diverged (one line on stderr), 2 for a user
    mistake (a bad flag, an unusable --out, a run whose checkpoints do not restore)."""
    from keras_attn.cli import UserError
    from keras_attn.training.trainer import TrainConfig, TrainingDiverged, train

    config = TrainConfig(
        model=args.model,
        corpus=args.corpus,
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        schedule=args.schedule,
        decay_start=args.decay_start,
        decay_every=args.decay_every,
        optimizer=args.optimizer,
        clipnorm=args.clipnorm,
        label_smoothing=args.label_smoothing,
        mixed_precision=args.mixed_precision,
        seed=args.seed,
        max_length=args.max_length,
        vocab_size=args.vocab_size,
        embedding_dim=args.embedding_dim,
        units=args.units,
        cell=args.cell,
        dropout=args.dropout,
        score=args.score,
        distribution=args.distribution,
        attention=args.attention,
        window=args.window,
        input_feeding=args.input_feeding,
        position_gradient_scale=args.position_gradient_scale,
        context_feeding=args.context_feeding,
        num_layers=args.num_layers,
        d_model=args.d_model,
        num_heads=args.num_heads,
        ff_dim=args.ff_dim,
        normalize_first=args.normalize_first,
        checkpoint_every=args.checkpoint_every,
        eval_sentences=args.eval_sentences,
        max_minutes=args.max_minutes,
        max_cpu_minutes=args.max_cpu_minutes,
    )
    try:
        train(
            args.out,
            config,
            resume=args.resume,
            progress=not args.quiet,
            distribute=args.distribute,
        )
    except (ValueError, FileExistsError, FileNotFoundError, NotADirectoryError) as error:
        raise UserError(str(error)) from error
    except TrainingDiverged as error:  # not a mistake in the flags: exit 1, as a failed run
        print(f"keras-attn train: error: {error}", file=sys.stderr)
        return 1
    return 0
