"""A localhost cluster of run_*.py processes for fault tests: each worker a subprocess with
its own TF_CONFIG (MultiWorkerMirroredStrategy), stderr kept in a file to read afterwards."""
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO_ROOT


def free_ports(count):
    """`count` distinct free localhost ports (held open together while chosen)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class Cluster:
    """`workers` processes running `argv` (a run_*.py command line) as one cluster."""

    def __init__(self, argv, workers, log_dir, env=None):
        self.addresses = [f"127.0.0.1:{port}" for port in free_ports(workers)]
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.procs = []
        for index in range(workers):
            worker_env = dict(os.environ, **(env or {}), TF_CPP_MIN_LOG_LEVEL="2",
                              TF_CONFIG=json.dumps({"cluster": {"worker": self.addresses},
                                                    "task": {"type": "worker",
                                                             "index": index}}))
            with open(self.log(index), "w") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable] + list(argv), env=worker_env, cwd=REPO_ROOT,
                    stdout=subprocess.DEVNULL, stderr=log))

    def log(self, index) -> Path:
        return self.log_dir / f"worker-{index}.log"

    def stderr(self, index) -> str:
        return self.log(index).read_text(errors="replace")

    def wait(self, timeout=300):
        """The workers' exit statuses, once all have exited."""
        deadline = time.time() + timeout
        for proc in self.procs:
            proc.wait(timeout=max(1.0, deadline - time.time()))
        return [proc.returncode for proc in self.procs]

    def kill(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.kill()
        return False


def wait_for_checkpoint(ckpt_dir, step, procs, timeout=240):
    """Waits until `ckpt_dir`'s checkpoint state names ckpt-`step` (written after the files),
    failing fast when a process of `procs` exits first."""
    state = Path(ckpt_dir) / "checkpoint"
    deadline = time.time() + timeout
    while not (state.exists() and f'ckpt-{step}"' in state.read_text()):
        for proc in procs:
            assert proc.poll() is None, f"a worker exited (status {proc.returncode}) early"
        assert time.time() < deadline, f"no ckpt-{step} in {ckpt_dir} after {timeout} s"
        time.sleep(0.02)


def steps_logged(text: str) -> list:
    """The steps a run's log reports (`] step N/...`), in order."""
    return [int(step) for step in re.findall(r"\] step (\d+)/", text)]


def last_line(text: str) -> str:
    """The last line of a worker's stderr that albert-tf wrote (`<prog>: ...`)."""
    lines = [line for line in text.splitlines() if line.startswith("run_")]
    return lines[-1] if lines else ""
