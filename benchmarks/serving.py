"""Serving speed: the exported translator over gRPC against the same SavedModel called in-process.

    python benchmarks/serving.py [--quick] [--model_base_path DIR] [--batching_parameters_file F]

A translator SavedModel (by default trained for a few steps with `keras-attn train` and exported
with `keras-attn export` into a temporary directory; `--model_base_path` reuses an export) is
driven three ways, one sentence per request, by 1, 4 and 8 concurrent callers:

- `in-process`: the SavedModel's `serving_default` signature loaded in this process
  (`tf.saved_model.load`), the reference;
- `gRPC`: `keras-attn serve` in a child process, queried with `keras_attn.serving.client`;
- `gRPC + batching`: a second child started with `--enable_batching --batching_parameters_file`
  (default: the shipped `serving/batching_parameters.txt`).

Reported per variant and concurrency: throughput (requests/s over the wall time of a round) and
the p50 / p99 request latency (over the latencies of all rounds). Ratios are medians of per-round
ratios: gRPC p50 latency / in-process p50 at concurrency 1 (target <= 1.3x), and the throughput
with batching / without at concurrency 8 (target >= 2x). Also the peak resident memory of each
server process (`VmHWM` in `/proc/PID/status`, read before the server is stopped).

Every variant is warmed up first (one untimed round per concurrency), then the variants are timed
round-robin (A, B, C, A, B, C, ...) so that load changes on a shared machine hit them alike.
Before timing, the served translations are checked equal to the in-process ones.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BATCHING_PARAMETERS = ROOT / "serving" / "batching_parameters.txt"
CONCURRENCY = (1, 4, 8)
IN_PROCESS, GRPC, BATCHING = "in-process", "gRPC", "gRPC + batching"
IDEAL = "in-process, c/call"  # one caller, c sentences per call: perfect batching
VARIANTS = (IN_PROCESS, IDEAL, GRPC, BATCHING)
# A tiny translator: the benchmark measures the serving path, not translation quality.
TRAIN_FLAGS = (
    "--batch-size", "32", "--units", "32", "--embedding-dim", "16", "--vocab-size", "600",
    "--eval-sentences", "20", "--checkpoint-every", "1000", "--quiet",
)  # fmt: skip

# A call translates the texts it is given, as worker number `worker`: (worker, texts) -> outputs.
Call = Callable[[int, Sequence[str]], Sequence[str]]


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) with linear interpolation between ranks (NumPy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"Expected q in [0, 100]. Received: q={q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Load:
    """One round at one concurrency: every request's latency and the round's wall time (s).

    `client_cpu` is the CPU time this process spent during the round (for `in-process`, the
    model itself), `server_cpu` that of the server process (0 when there is none), in seconds.
    """

    latencies: list[float]
    wall: float
    client_cpu: float = 0.0
    server_cpu: float = 0.0
    texts_per_request: int = 1

    @property
    def sentences(self) -> int:
        return len(self.latencies) * self.texts_per_request

    @property
    def throughput(self) -> float:
        """Sentences per second (= requests per second for one-sentence requests)."""
        return self.sentences / self.wall


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def run_load(
    call: Call,
    texts: Sequence[str],
    concurrency: int,
    requests: int,
    server_pid: int | None = None,
    texts_per_request: int = 1,
) -> Load:
    """`concurrency` threads each send `requests` requests of `texts_per_request` texts in a row.

    The `j`-th request of worker `i` starts at text `((i * requests + j) * texts_per_request)`
    (cycling through `texts`). The wall time runs from the moment all workers are released to the
    moment the last one finishes; the CPU times of this process and of `server_pid` are taken
    over the same span.
    """
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[BaseException] = []
    start = threading.Barrier(concurrency + 1)

    def worker(index: int) -> None:
        start.wait()
        try:
            for j in range(requests):
                first = (index * requests + j) * texts_per_request
                batch = [texts[(first + k) % len(texts)] for k in range(texts_per_request)]
                began = time.perf_counter()
                call(index, batch)
                latencies[index].append(time.perf_counter() - began)
        except BaseException as error:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    server_began = cpu_seconds(server_pid) if server_pid else 0.0
    client_began = time.process_time()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    client_cpu = time.process_time() - client_began
    server_cpu = cpu_seconds(server_pid) - server_began if server_pid else 0.0
    if errors:
        raise errors[0]
    flat = [t for worker_latencies in latencies for t in worker_latencies]
    return Load(flat, wall, client_cpu, server_cpu, texts_per_request)


@dataclass
class Variant:
    """A way to translate: its call, the server process (if any), and how load is applied.

    With `one_caller`, concurrency `c` means one caller sending `c` texts per request (perfect
    batching, no waiting); otherwise `c` callers sending one text each.
    """

    call: Call
    server_pid: int | None = None
    one_caller: bool = False

    def load(self, texts: Sequence[str], concurrency: int, requests: int) -> Load:
        if self.one_caller:
            return run_load(self.call, texts, 1, requests, self.server_pid, concurrency)
        return run_load(self.call, texts, concurrency, requests, self.server_pid)


def run_rounds(
    variants: dict[str, Variant],
    texts: Sequence[str],
    concurrency: Sequence[int],
    requests: int,
    rounds: int,
) -> dict[tuple[str, int], list[Load]]:
    """Every (variant, concurrency) once untimed, then `rounds` interleaved timed rounds."""
    for level in concurrency:
        for variant in variants.values():
            variant.load(texts, level, max(1, requests // 4))
    loads: dict[tuple[str, int], list[Load]] = {(n, c): [] for n in variants for c in concurrency}
    for _ in range(rounds):
        for level in concurrency:
            for name, variant in variants.items():
                loads[(name, level)].append(variant.load(texts, level, requests))
    return loads


def summarize(loads: dict[tuple[str, int], list[Load]]) -> dict[tuple[str, int], dict[str, float]]:
    """Per (variant, concurrency): median sentences/s over rounds, p50 and p99 request latency
    over all requests, and the CPU milliseconds per sentence of this process and of the server."""
    summary = {}
    for key, rounds in loads.items():
        latencies = [t for load in rounds for t in load.latencies]
        sentences = sum(load.sentences for load in rounds)
        summary[key] = {
            "sent/s": statistics.median(load.throughput for load in rounds),
            "p50 ms": 1e3 * percentile(latencies, 50),
            "p99 ms": 1e3 * percentile(latencies, 99),
            "client cpu ms": 1e3 * sum(load.client_cpu for load in rounds) / sentences,
            "server cpu ms": 1e3 * sum(load.server_cpu for load in rounds) / sentences,
            "requests": float(len(latencies)),
        }
    return summary


def median_ratio(
    numerators: Sequence[Load], denominators: Sequence[Load], measure: Callable[[Load], float]
) -> float:
    """The median over rounds of `measure(numerator round) / measure(denominator round)`."""
    return statistics.median(
        measure(a) / measure(b) for a, b in zip(numerators, denominators, strict=True)
    )


def p50(load: Load) -> float:
    return percentile(load.latencies, 50)


def cpu_per_sentence(load: Load) -> float:
    """CPU seconds per sentence, this process and the server together."""
    return (load.client_cpu + load.server_cpu) / load.sentences


def ratios(loads: dict[tuple[str, int], list[Load]]) -> dict[str, float]:
    """The target ratios (and their neighbours) as medians of per-round ratios.

    Besides latency, the gRPC overhead is given as CPU per sentence (client + server against the
    in-process call), which load from other processes disturbs far less than wall time.
    """
    result = {}
    levels = sorted({level for _, level in loads})
    for level in levels:
        if (GRPC, level) in loads and (IN_PROCESS, level) in loads:
            result[f"gRPC / in-process p50 latency, c={level}"] = median_ratio(
                loads[(GRPC, level)], loads[(IN_PROCESS, level)], p50
            )
    if (GRPC, 1) in loads and (IN_PROCESS, 1) in loads:
        result["gRPC / in-process CPU per sentence, c=1"] = median_ratio(
            loads[(GRPC, 1)], loads[(IN_PROCESS, 1)], cpu_per_sentence
        )
    pairs = (
        ("batching / no batching throughput", BATCHING, GRPC),
        ("in-process c/call / in-process throughput", IDEAL, IN_PROCESS),
    )
    for label, numerator, denominator in pairs:
        for level in levels:
            if (numerator, level) in loads and (denominator, level) in loads and level > 1:
                result[f"{label}, c={level}"] = median_ratio(
                    loads[(numerator, level)],
                    loads[(denominator, level)],
                    lambda load: load.throughput,
                )
    return result


TARGETS = {
    "gRPC / in-process p50 latency, c=1": ("<=", 1.3),
    "batching / no batching throughput, c=8": (">=", 2.0),
}


def format_table(
    summary: dict[tuple[str, int], dict[str, float]],
    ratio_values: dict[str, float],
    memory: dict[str, dict[str, int]],
) -> str:
    """The results as aligned text: one row per (concurrency, variant), then ratios and memory."""
    lines = [
        f"    {'c':>2}  {'variant':<18} {'sent/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'requests':>8}"
        f"   CPU ms/sentence: {'here':>6} {'server':>6}"
    ]
    for level in sorted({level for _, level in summary}):
        for name in VARIANTS:
            row = summary.get((name, level))
            if row is None:
                continue
            lines.append(
                f"    {level:>2}  {name:<18} {row['sent/s']:>8.1f} {row['p50 ms']:>8.2f}"
                f" {row['p99 ms']:>8.2f} {int(row['requests']):>8d}"
                f"                    {row['client cpu ms']:>6.2f} {row['server cpu ms']:>6.2f}"
            )
    lines.append("    ratios (median over rounds):")
    for label, value in ratio_values.items():
        verdict = ""
        if label in TARGETS:
            sign, bound = TARGETS[label]
            met = value <= bound if sign == "<=" else value >= bound
            verdict = f"  target {sign} {bound}x: {'met' if met else 'NOT met'}"
        lines.append(f"      {label:<46} {value:>6.2f}x{verdict}")
    if memory:
        lines.append("    server peak memory (VmHWM; VmRSS at the end):")
        for name, kib in memory.items():
            lines.append(
                f"      {name:<16} {kib['VmHWM'] / 1024:>8.1f} MiB ({kib['VmRSS'] / 1024:.1f} MiB)"
            )
    return "\n".join(lines)


def read_memory_kib(pid: int) -> dict[str, int]:
    """`VmHWM` (peak resident set) and `VmRSS` of a live process, in KiB, from /proc/PID/status."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            values[key] = int(rest.split()[0])
    return values


def make_translator(workdir: Path, steps: int) -> Path:
    """Trains a tiny translator for `steps` steps and exports it; returns the model base path."""
    run_dir, base = workdir / "run", workdir / "models" / "translator"
    for command in (
        ["train", "--steps", str(steps), *TRAIN_FLAGS, "--out", str(run_dir)],
        ["export", str(run_dir), "--model_base_path", str(base)],
    ):
        completed = subprocess.run(
            [sys.executable, "-m", "keras_attn.cli", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if completed.returncode != 0:
            tail = "\n".join(completed.stdout.splitlines()[-10:])
            raise RuntimeError(f"keras-attn {command[0]} failed:\n{tail}")
    return base


def in_process_call(model_base_path: Path) -> Call:
    """The latest version's `serving_default`, loaded here: texts -> translations (str)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tf-text ops the graph uses

    from keras_attn.serving.servable import latest_version

    version = latest_version("translator", str(model_base_path))
    function = tf.saved_model.load(str(model_base_path / str(version))).signatures[
        "serving_default"
    ]

    def call(worker: int, texts: Sequence[str]) -> list[str]:
        translation = function(text=tf.constant(list(texts)))["translation"].numpy()
        return [value.decode("utf-8", errors="replace") for value in translation]

    return call


def grpc_call(target: str, workers: int) -> tuple[Call, Callable[[], None]]:
    """One `TranslatorClient` (own channel) per worker; returns the call and a closer."""
    from keras_attn.serving.client import TranslatorClient

    clients = [TranslatorClient(target, "translator", timeout=120) for _ in range(workers)]

    def call(worker: int, texts: Sequence[str]) -> list[str]:
        return clients[worker].translate(texts)

    def close() -> None:
        for client in clients:
            client.close()

    return call, close


@contextlib.contextmanager
def served(model_base_path: Path, batching_parameters_file: Path | None) -> Iterator[object]:
    """`keras-attn serve` in a child process, with batching when a parameters file is given."""
    from keras_attn.testing.server_process import serve_in_subprocess

    extra = []
    if batching_parameters_file is not None:
        extra = ["--enable_batching", "--batching_parameters_file", str(batching_parameters_file)]
    with serve_in_subprocess(model_base_path, "translator", extra_args=extra) as server:
        yield server


def benchmark_serving(
    model_base_path: Path,
    batching_parameters_file: Path,
    texts: Sequence[str],
    concurrency: Sequence[int] = CONCURRENCY,
    requests: int = 20,
    rounds: int = 5,
) -> tuple[dict[tuple[str, int], list[Load]], dict[str, dict[str, int]]]:
    """Times the four variants; returns the loads and each server's memory (KiB)."""
    reference = in_process_call(model_base_path)
    workers = max(concurrency)
    with contextlib.ExitStack() as stack:
        variants = {IN_PROCESS: Variant(reference), IDEAL: Variant(reference, one_caller=True)}
        for name, parameters in ((GRPC, None), (BATCHING, batching_parameters_file)):
            server = stack.enter_context(served(model_base_path, parameters))
            call, close = grpc_call(server.target, workers)
            stack.callback(close)
            variants[name] = Variant(call, server.process.pid)
        expected = reference(0, texts[:4])
        for name in (GRPC, BATCHING):
            served_texts = variants[name].call(0, texts[:4])
            if served_texts != expected:
                raise AssertionError(f"{name} answered {served_texts}, in-process {expected}")
        loads = run_rounds(variants, texts, concurrency, requests, rounds)
        memory = {name: read_memory_kib(variants[name].server_pid) for name in (GRPC, BATCHING)}
    return loads, memory


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="5 rounds x 20 requests (about a minute of timing, plus training)",
    )
    parser.add_argument(
        "--model_base_path", type=Path, help="an exported translator (default: train one)"
    )
    parser.add_argument("--steps", type=int, default=30, help="training steps of the default model")
    parser.add_argument(
        "--batching_parameters_file", type=Path, default=DEFAULT_BATCHING_PARAMETERS
    )
    args = parser.parse_args(argv)
    for path in (args.model_base_path, args.batching_parameters_file):
        if path is not None and not path.exists():
            parser.error(f"no such file or directory: {path}")
    rounds, requests = (5, 20) if args.quick else (9, 40)

    import tensorflow as tf

    from keras_attn.text.corpora import load_corpus

    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    texts = [source for source, _ in load_corpus("synthetic")["test"]]
    with tempfile.TemporaryDirectory() as workdir:
        model_base_path = args.model_base_path
        if model_base_path is None:
            started = time.perf_counter()
            model_base_path = make_translator(Path(workdir), args.steps)
            seconds = time.perf_counter() - started
            print(f"trained ({args.steps} steps) and exported in {seconds:.0f} s")
        loads, memory = benchmark_serving(
            model_base_path, args.batching_parameters_file, texts, requests=requests, rounds=rounds
        )
    print(
        f"translator {model_base_path if args.model_base_path else '(tiny, trained here)'}, "
        f"one sentence per request, {rounds} rounds x {requests} requests per worker, "
        f"batching: {args.batching_parameters_file.name}"
    )
    print(format_table(summarize(loads), ratios(loads), memory))
    print(f"load average at the end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
