"""The flagship, end to end: train a Spanish→English translator, export it, serve it, query it.

    python examples/served_translator.py --out demo      (what `make demo` runs)

1. `keras-attn train`  — a BiLSTM encoder + Bahdanau-attention LSTM decoder on the generated
   Spanish→English corpus (keras_attn.text.synthetic), on the CPU in a few minutes.
2. `keras-attn export` — a SavedModel with tokenization and greedy decoding inside the graph,
   checked to load with only tensorflow + tensorflow_text (what TF Serving has).
3. `keras-attn serve`  — the TF-Serving-compatible gRPC server on a free 127.0.0.1 port.
4. Every test-split sentence goes over gRPC (tensorflow-serving-api's PredictionService);
   we print a few translations, the test BLEU and the sentence exact match.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

MARKER = ".keras-attn-demo"


def run(command: list[str]) -> None:
    print("$", " ".join(command), flush=True)
    subprocess.run([sys.executable, "-m", "keras_attn.cli", *command[1:]], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo", help="demo directory (recreated on each run)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=96)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--examples", type=int, default=8, help="translations to print")
    args = parser.parse_args()

    out = Path(args.out)
    if out.exists():
        if not (out / MARKER).exists():
            sys.exit(f"{out} exists and was not made by this demo; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).touch()
    run_dir, model_base_path = out / "run", out / "models" / "translator"
    started = time.perf_counter()

    run([
        "keras-attn", "train", "--model", "rnn-attention", "--corpus", "synthetic",
        "--steps", str(args.steps), "--batch-size", str(args.batch_size),
        "--units", str(args.units), "--out", str(run_dir),
    ])  # fmt: skip
    run(["keras-attn", "export", str(run_dir), "--model_base_path", str(model_base_path)])

    from keras_attn.serving.client import TranslatorClient
    from keras_attn.testing.server_process import serve_in_subprocess
    from keras_attn.text.corpora import load_corpus
    from keras_attn.text.normalization import normalize_text
    from keras_attn.training.metrics import corpus_bleu, exact_match

    test_pairs = load_corpus("synthetic")["test"]
    print(f"$ keras-attn serve --model_name translator --model_base_path {model_base_path}")
    with serve_in_subprocess(model_base_path) as server:
        print(server.output[-1], flush=True)
        with TranslatorClient(server.target, "translator", timeout=60) as client:
            hypotheses: list[str] = []
            for begin in range(0, len(test_pairs), 64):
                batch = [source for source, _ in test_pairs[begin : begin + 64]]
                hypotheses.extend(client.translate(batch))
    references = [normalize_text(target) for _, target in test_pairs]

    print(f"\nTranslations of test-split sentences, received over gRPC from {server.target}:")
    for (source, _), hypothesis, reference in list(
        zip(test_pairs, hypotheses, references, strict=True)
    )[: args.examples]:
        mark = "=" if hypothesis == reference else "≠"
        print(f"  es: {source}\n  en: {hypothesis}\n  {mark}  {reference}\n")
    results = {
        "test_sentences": len(test_pairs),
        "test_bleu": round(corpus_bleu(hypotheses, references), 2),
        "test_exact_match": round(exact_match(hypotheses, references), 4),
        "minutes": round((time.perf_counter() - started) / 60, 1),
    }
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"test split ({results['test_sentences']} sentences, over gRPC): "
        f"BLEU {results['test_bleu']:.2f}, exact match {results['test_exact_match']:.1%} "
        f"— {results['minutes']} min for train + export + serve + query"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
