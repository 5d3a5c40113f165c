"""Does denoising pre-training help a translator trained on few pairs? mBART vs from scratch.

    python examples/pretrained_translator.py [--corpus synthetic] [--seed 0] [--quick]
        [--train-pairs 1000] [--pretrain-steps 2000] [--finetune-steps 1000]
        [--out pretrained_translator]

Three runs of `keras_attn.training.trainer.train`, written under `--out/seed<seed>/`:

    mbart       an mBART (Liu et al., 2020) pre-trained by denoising (text infilling + sentence
                permutation, Lewis et al., 2019) on the Spanish and the English monolingual text
                of the corpus' training split, each sentence followed by its language tag
                (`model="bart"`, `side="both"`); no pair is used
    pretrained  a `bart-translator` initialised from `mbart` (`init_from`: every weight, and its
                vocabulary) and fine-tuned on the first `--train-pairs` Spanish→English pairs
                of the training split (less those longer than `--max-length` tokens, which
                training leaves out)
    scratch     the same `bart-translator`, the same vocabulary (`vocab_from`: mbart's
                vocabulary, not its weights), pairs, steps, batch size and learning rate, from
                random weights

and prints the dev BLEU of both translators (`metrics.json`'s `dev_bleu`, greedy decoding) and
the pre-training's cost, which the fine-tuning budget does not include. Each trained
translator is an ordinary run: `keras-attn export RUN --model_base_path M` exports it.

`--corpus` is `synthetic` (generated Spanish→English pairs, nothing to install) or an installed
corpus such as `libreoffice-es-en` (`make corpora`). `--quick` (one encoder and one decoder
block of width 64, 600 pre-training and 300 fine-tuning steps, 100 dev sentences) runs in a
few minutes on a CPU.

References:
    Lewis et al., 2019, "BART: denoising sequence-to-sequence pre-training for natural language
    generation, translation, and comprehension", arXiv:1910.13461.
    Liu et al., 2020, "Multilingual denoising pre-training for neural machine translation",
    arXiv:2001.08210.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from keras_attn.errors import ConfigError
from keras_attn.training.config import TrainConfig
from keras_attn.training.trainer import train

ARMS = ("pretrained", "scratch")
SIZES = ("num_layers", "d_model", "num_heads", "ff_dim")
QUICK = {
    "pretrain_steps": 600,
    "finetune_steps": 300,
    "train_pairs": 1000,
    "batch_size": 32,
    "learning_rate": 3e-3,
    "warmup_steps": 50,
    "num_layers": 1,
    "d_model": 64,
    "num_heads": 4,
    "ff_dim": 128,
    "vocab_size": 600,
    "max_length": 40,
    "eval_sentences": 100,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; `--quick` replaces every size and budget by `QUICK`'s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="synthetic", help="a Spanish→English corpus")
    parser.add_argument("--out", type=Path, default=Path("pretrained_translator"))
    parser.add_argument("--seed", type=int, default=0, help="weights, batches and noise")
    parser.add_argument("--quick", action="store_true", help="a small run of a few minutes")
    parser.add_argument("--pretrain-steps", type=int, default=2000)
    parser.add_argument("--finetune-steps", type=int, default=1000, help="for both translators")
    parser.add_argument(
        "--train-pairs", type=int, default=1000, help="fine-tune on the first N training pairs"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="peak, every run")
    parser.add_argument("--warmup-steps", type=int, default=50, help="every run")
    parser.add_argument("--num-layers", type=int, default=2, help="encoder and decoder blocks")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--ff-dim", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=1000, help="one shared WordPiece")
    parser.add_argument("--max-length", type=int, default=48, help="tokens per text")
    parser.add_argument("--eval-sentences", type=int, default=500, help="dev pairs for BLEU")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    for name in ("pretrain_steps", "finetune_steps", "train_pairs", "eval_sentences"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    return args


def configs(args: argparse.Namespace, directory: Path) -> dict[str, TrainConfig]:
    """The `TrainConfig` of each run: `mbart`, then the two translators it is compared with.

    Both translators have mbart's architecture, vocabulary, data, steps and optimizer; they
    differ in `init_from` (mbart's weights) versus `vocab_from` (its vocabulary only).
    """
    shared = {
        "corpus": args.corpus,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup_steps": args.warmup_steps,
        "schedule": "cosine",
        "max_length": args.max_length,
        "checkpoint_every": max(args.pretrain_steps, args.finetune_steps),
        "options": {name: getattr(args, name) for name in SIZES},
    }
    translator = {
        **shared,
        "model": "bart-translator",
        "steps": args.finetune_steps,
        "train_examples": args.train_pairs,
        "eval_sentences": args.eval_sentences,
    }
    return {
        "mbart": TrainConfig(
            model="bart",
            side="both",
            steps=args.pretrain_steps,
            vocab_size=args.vocab_size,
            eval_sentences=args.eval_sentences,
            **shared,
        ),
        "pretrained": TrainConfig(init_from=str(directory / "mbart"), **translator),
        "scratch": TrainConfig(vocab_from=str(directory / "mbart"), **translator),
    }


def run_all(args: argparse.Namespace) -> dict[str, dict]:
    """Train mbart, then both translators; returns each run's metrics (and wall seconds)."""
    directory = args.out / f"seed{args.seed}"
    results = {}
    for name, config in configs(args, directory).items():
        start = time.perf_counter()
        metrics = train(
            directory / name,
            config,
            log=lambda line, n=name: print(f"[{n}] {line}"),
            progress=False,
        )
        results[name] = {**metrics, "seconds": time.perf_counter() - start}
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run_all(args)
    except ConfigError as error:
        print(f"pretrained_translator: error: {error}", file=sys.stderr)
        return 2
    mbart = results["mbart"]
    print(
        f"\nmBART pre-training on {args.corpus} (Spanish + English text): "
        f"{mbart['steps']} steps, {mbart['seconds']:.0f} s, dev reconstruction accuracy "
        f"{mbart['dev_token_accuracy']:.1%}"
    )
    budget = f"{args.finetune_steps} steps each on the first {args.train_pairs} training pairs"
    print(f"translators: {budget} (seed {args.seed})")
    for arm in ARMS:
        print(f"{arm:<11} dev BLEU {results[arm]['dev_bleu']:6.2f}")
    gain = results["pretrained"]["dev_bleu"] - results["scratch"]["dev_bleu"]
    print(f"gain from pre-training: {gain:+.2f} BLEU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
