"""Start `keras-attn` processes cheaply for the tests that kill them."""

import json
import os
import select
import subprocess
import sys
from pathlib import Path

# A process that imports TensorFlow and keras_attn's command line once, then forks one child per
# request line (JSON: [plan, argv, log path]); each child arranges a SIGKILL of itself as PLAN
# says and runs `keras-attn ARGV...` with its output in LOG. The server answers each request with
# the child's pid, then with its exit status (negative: the signal) once it has ended. Nothing
# but imports happens before a fork, so each child starts as a fresh `python -c` process would,
# without paying ~5 CPU s to import TensorFlow again.
FORK_SERVER = r"""
import json, os, signal, sys, time

from tensorflow.python.checkpoint import checkpoint_management

from keras_attn.cli import main


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def arrange(plan):
    if "before_replace" in plan:  # killed with the new file complete under its temporary name
        real_replace = os.replace

        def replace(source, target, *args, **kwargs):
            if os.path.basename(str(target)) == plan["before_replace"]:
                die()
            return real_replace(source, target, *args, **kwargs)

        os.replace = replace
    if "checkpoint" in plan:  # checkpoint N: its files are complete; killed before/after recording
        real_update = checkpoint_management.update_checkpoint_state_internal

        def update(directory, model_checkpoint_path, *args, **kwargs):
            ours = model_checkpoint_path.endswith(f"-{plan['checkpoint']}")
            if ours and not plan["recorded"]:
                die()
            real_update(directory, model_checkpoint_path, *args, **kwargs)
            if ours:
                die()

        checkpoint_management.update_checkpoint_state_internal = update
    if "pause_from_row" in plan:  # slow steps from that train-log row on
        from keras_attn.training.trainer import TrainLog

        real_append = TrainLog.append

        def append(self, step, *args, **kwargs):
            real_append(self, step, *args, **kwargs)
            if step >= plan["pause_from_row"]:
                time.sleep(plan["pause"])

        TrainLog.append = append


for line in sys.stdin:
    plan, argv, log = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the child: leaves this loop only by exiting, as `python -c` would
        output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        arrange(plan)
        sys.exit(main(argv))
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class ForkedProcess:
    """One child of the fork server, with the part of `subprocess.Popen` the tests use."""

    def __init__(self, server: "ForkServer", log: Path):
        self.server, self.log, self.returncode = server, log, None
        self.pid = int(server.read_line(timeout=600))

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.server.answers], [], [], 0)[0]:
            self.returncode = int(self.server.read_line(timeout=600))
        return self.returncode

    def send_signal(self, signal: int) -> None:
        os.kill(self.pid, signal)

    def communicate(self, timeout: float = 600) -> tuple[str, None]:
        if self.returncode is None:
            self.returncode = int(self.server.read_line(timeout=timeout))
        return self.log.read_text(), None


class ForkServer:
    def __init__(self, directory: Path):
        self.directory, self.count = directory, 0
        # One OpenBLAS thread: numpy would otherwise start a second thread before any fork.
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL="3",
            OPENBLAS_NUM_THREADS="1",
        )  # fmt: skip
        self.errors = directory / "server.log"
        with open(self.errors, "w") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "-c", FORK_SERVER], env=env, bufsize=0,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            )  # fmt: skip
        self.answers = self.process.stdout  # unbuffered: select() sees every line not yet read

    def read_line(self, timeout: float) -> str:
        ready = select.select([self.answers], [], [], timeout)[0]
        line = self.answers.readline() if ready else b""
        assert line.endswith(b"\n"), f"fork server: {line!r}\n{self.errors.read_text()}"
        return line.decode()

    def launch(self, plan: dict, argv: list) -> ForkedProcess:
        """`keras-attn ARGV...` in a new process, killing itself as PLAN says (see FORK_SERVER)."""
        self.count += 1
        log = self.directory / f"child-{self.count}.log"
        request = json.dumps([plan, [str(arg) for arg in argv], str(log)]) + "\n"
        self.process.stdin.write(request.encode())
        return ForkedProcess(self, log)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
