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

    python benchmarks/serving.py --compiled [--quick] [--steps N]

compares compiled exports (`keras-attn export --jit-compile`) with plain ones instead: the demo
RNN translator (`rnn-attention`, the architecture of examples/served_translator.py) and a
Transformer translator, each trained `--steps` steps on the synthetic corpus, exported with the
greedy and with the beam-4 decoder, plain and compiled. Each pair is served by two
`keras-attn serve --xla_cpu_compilation_enabled --enable_batching` children (the shipped batching
parameters) and timed round-robin: p50 / p99 latency at concurrency 1, sentences/s at
concurrency 8 (one sentence per request), the load time (start until serving, the warm-up
compiling every bucket included) and the XLA compilations during the timed rounds (from the
`:tensorflow:core:xla_compilations` metric; must be 0). The served translations of both are
checked equal first. Ratios: plain p50 / compiled p50 (targets: Transformer >= 3x, RNN >= 1.5x,
beam 4 >= 3x) and compiled / plain throughput.
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

PLAIN, COMPILED = "plain", "compiled"
# The demo translator (examples/served_translator.py) and a Transformer, default sizes.
COMPILED_MODELS = {
    "RNN (demo)": ("--model", "rnn-attention", "--batch-size", "96"),
    "Transformer": ("--model", "transformer", "--batch-size", "64"),
}
COMPILED_DECODERS = {"greedy": (), "beam 4": ("--decoder", "beam", "--beam-size", "4")}
MONITORING = 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n'
COMPILED_TARGETS = {"RNN (demo)": 1.5, "Transformer": 3.0, "beam 4": 3.0}

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
    keras_attn("train", "--steps", str(steps), *TRAIN_FLAGS, "--out", str(run_dir))
    keras_attn("export", str(run_dir), "--model_base_path", str(base))
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


def keras_attn(*command: str) -> None:
    """`python -m keras_attn.cli COMMAND...`; a RuntimeError with its last lines if it fails."""
    completed = subprocess.run(
        [sys.executable, "-m", "keras_attn.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if completed.returncode != 0:
        tail = "\n".join(completed.stdout.splitlines()[-10:])
        raise RuntimeError(f"keras-attn {command[0]} failed:\n{tail}")


def xla_compilations(rest_port: int) -> int:
    """`:tensorflow:core:xla_compilations` on a server's Prometheus page."""
    import urllib.request

    url = f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics"
    with urllib.request.urlopen(url, timeout=30) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(":tensorflow:core:xla_compilations"):
                return int(float(line.split()[-1]))
    raise RuntimeError(f"{url} has no :tensorflow:core:xla_compilations")


def compare_compiled(
    model_base_paths: dict[str, Path],
    workdir: Path,
    batching_parameters_file: Path,
    texts: Sequence[str],
    requests: int,
    rounds: int,
) -> dict[str, object]:
    """Serve a plain and a compiled export side by side and time them round-robin.

    Returns the loads per (variant, concurrency), each server's load time (s) and the
    compiled server's XLA compilations before and during the timed rounds.
    """
    monitoring = workdir / "monitoring.txt"
    monitoring.write_text(MONITORING)
    flags = [
        "--xla_cpu_compilation_enabled",
        "--enable_batching",
        "--batching_parameters_file",
        str(batching_parameters_file),
        "--monitoring_config_file",
        str(monitoring),
    ]
    from keras_attn.testing.server_process import serve_in_subprocess

    with contextlib.ExitStack() as stack:
        variants, load_seconds, servers = {}, {}, {}
        for name, base in model_base_paths.items():
            started = time.perf_counter()
            server = stack.enter_context(
                serve_in_subprocess(
                    base, "translator", rest_api=True, ready_timeout=1800, extra_args=flags
                )
            )
            load_seconds[name] = time.perf_counter() - started
            call, close = grpc_call(server.target, 8)
            stack.callback(close)
            variants[name], servers[name] = Variant(call, server.process.pid), server
        expected = variants[PLAIN].call(0, texts[:8])
        found = variants[COMPILED].call(0, texts[:8])
        if found != expected:
            raise AssertionError(f"compiled answered {found}, plain {expected}")
        after_load = xla_compilations(servers[COMPILED].rest_port)
        loads = run_rounds(variants, texts, (1, 8), requests, rounds)
        during = xla_compilations(servers[COMPILED].rest_port) - after_load
    return {"loads": loads, "load_seconds": load_seconds, "compilations": (after_load, during)}


def compiled_main(args: argparse.Namespace, texts: Sequence[str]) -> int:
    """`--compiled`: plain vs compiled exports of the RNN and Transformer translators."""
    rounds, requests = (3, 10) if args.quick else (5, 20)
    buckets = ["--batch-buckets", args.batch_buckets, "--length-buckets", args.length_buckets]
    lines = []
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        for model, train_flags in COMPILED_MODELS.items():
            run = workdir / model.split()[0].lower()
            started = time.perf_counter()
            keras_attn("train", *train_flags, "--steps", str(args.steps), "--quiet",
                       "--eval-sentences", "20", "--out", str(run))  # fmt: skip
            print(f"{model}: trained {args.steps} steps in {time.perf_counter() - started:.0f} s")
            for decoder, decoder_flags in COMPILED_DECODERS.items():
                bases = {}
                for variant in (PLAIN, COMPILED):
                    base = workdir / "models" / f"{run.name}-{decoder[:4]}-{variant}"
                    extra = ["--jit-compile", *buckets] if variant == COMPILED else []
                    keras_attn("export", str(run), "--model_base_path", str(base),
                               *decoder_flags, *extra)  # fmt: skip
                    bases[variant] = base
                result = compare_compiled(
                    bases, workdir, args.batching_parameters_file, texts, requests, rounds
                )
                loads, summary = result["loads"], summarize(result["loads"])
                latency = median_ratio(loads[(PLAIN, 1)], loads[(COMPILED, 1)], p50)
                throughput = median_ratio(
                    loads[(COMPILED, 8)], loads[(PLAIN, 8)], lambda load: load.throughput
                )
                after_load, during = result["compilations"]
                lines.append(f"  {model}, {decoder}:")
                for variant in (PLAIN, COMPILED):
                    one, eight = summary[(variant, 1)], summary[(variant, 8)]
                    lines.append(
                        f"    {variant:<9} p50 {one['p50 ms']:>8.2f} ms"
                        f"  p99 {one['p99 ms']:>8.2f} ms  c=8 {eight['sent/s']:>7.1f} sent/s"
                        f"  load {result['load_seconds'][variant]:>6.1f} s"
                    )
                target = COMPILED_TARGETS["beam 4" if decoder == "beam 4" else model]
                met = "met" if latency >= target and during == 0 else "NOT met"
                lines.append(
                    f"    plain / compiled p50 {latency:.2f}x (target >= {target}x: {met}); "
                    f"compiled / plain sent/s at c=8 {throughput:.2f}x; XLA compilations: "
                    f"{after_load} while loading, {during} during the timed rounds"
                )
    print(
        f"compiled vs plain exports, {args.steps} training steps, buckets {' '.join(buckets)}, "
        f"{rounds} rounds x {requests} requests per worker, one sentence per request, "
        f"batching: {args.batching_parameters_file.name}"
    )
    print("\n".join(lines))
    print(f"load average at the end {os.getloadavg()}")
    return 0


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
    parser.add_argument(
        "--compiled", action="store_true", help="compiled vs plain exports (module docstring)"
    )
    parser.add_argument("--batch-buckets", default="1,2,4,8", help="--compiled: export buckets")
    parser.add_argument("--length-buckets", default="16,32", help="--compiled: export buckets")
    args = parser.parse_args(argv)
    for path in (args.model_base_path, args.batching_parameters_file):
        if path is not None and not path.exists():
            parser.error(f"no such file or directory: {path}")
    rounds, requests = (5, 20) if args.quick else (9, 40)

    import tensorflow as tf

    from keras_attn.text.corpora import load_corpus

    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    texts = [source for source, _ in load_corpus("synthetic")["test"]]
    if args.compiled:
        return compiled_main(args, texts)
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
