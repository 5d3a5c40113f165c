"""Run `keras-attn serve` in a child process for end-to-end checks and the demo."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on `host` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    """A running `keras-attn serve` child: its address and everything it printed."""

    process: subprocess.Popen
    port: int
    rest_port: int | None
    output: list[str] = field(default_factory=list)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextlib.contextmanager
def serve_in_subprocess(
    model_base_path: str | os.PathLike,
    model_name: str = "translator",
    rest_api: bool = False,
    ready_timeout: float = 120.0,
    extra_args: Sequence[str] = (),
) -> Iterator[ServerProcess]:
    """Start `python -m keras_attn.cli serve` on free 127.0.0.1 ports and wait for its ready line.

    `extra_args` are appended to the command line (e.g. `["--enable_batching",
    "--batching_parameters_file", path]`).

    Stops it with SIGTERM on exit (SIGKILL if it has not exited 30 s later).

    Raises:
        RuntimeError: the server exited or printed no ready line within `ready_timeout`; the
            message carries the server's last output lines.
    """
    port = free_port()
    rest_port = free_port() if rest_api else None
    command = [
        sys.executable, "-m", "keras_attn.cli", "serve",
        "--port", str(port),
        "--model_name", model_name,
        "--model_base_path", str(model_base_path),
    ]  # fmt: skip
    if rest_port:
        command += ["--rest_api_port", str(rest_port)]
    command += list(extra_args)
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    server = ServerProcess(process, port, rest_port)
    ready = threading.Event()

    def pump() -> None:
        for line in process.stdout:
            server.output.append(line.rstrip("\n"))
            if line.startswith("Serving "):
                ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + ready_timeout
        while not ready.wait(0.2):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(server.output[-15:])
                raise RuntimeError(f"keras-attn serve did not become ready:\n{tail}")
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(timeout=5)
