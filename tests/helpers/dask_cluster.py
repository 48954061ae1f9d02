"""A dask.distributed cluster on localhost for the DaskRunner tests and bench.

One scheduler and N workers, each a subprocess of this Python in its own process
group (a worker's nanny and worker process die together when it is killed), with
PYTHONPATH set to this checkout so that the scheduler and the workers import
data_prep. Ports are chosen by the system (port 0; the address is read from the
scheduler file), so concurrent runs never collide. Every process is killed on
exit, whatever happened.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Iterator, List

REPO = pathlib.Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class LocalCluster:
    address: str
    directory: pathlib.Path
    scheduler: subprocess.Popen
    workers: List[subprocess.Popen]  # worker i is named f"worker-{i}" on the scheduler

    def kill_worker(self, index: int) -> None:
        """SIGKILLs worker `index` (its nanny and its worker process)."""
        _kill(self.workers[index])

    def logs(self) -> str:
        """The last lines of every process's log (for a failure message)."""
        parts = []
        for path in sorted(self.directory.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)


def _start(args: List[str], log: pathlib.Path, env: dict) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=log.parent, start_new_session=True)


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_for_address(scheduler_file: pathlib.Path, scheduler: subprocess.Popen,
                      timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scheduler.poll() is not None:
            raise RuntimeError(f"the dask scheduler exited with status {scheduler.returncode}")
        with contextlib.suppress(OSError, ValueError, KeyError):
            return json.loads(scheduler_file.read_text())["address"]
        time.sleep(0.1)
    raise RuntimeError(f"the dask scheduler wrote no {scheduler_file} within {timeout} s")


@contextlib.contextmanager
def local_cluster(directory: pathlib.Path, workers: int = 2, threads: int = 1,
                  timeout: float = 60.0) -> Iterator[LocalCluster]:
    """Starts the cluster (logs and worker spill directories in `directory`), waits until
    every worker has joined, yields it, and kills every process at the end."""
    from distributed import Client

    directory.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    processes: List[subprocess.Popen] = []
    try:
        processes.append(_start(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--no-dashboard", "--idle-timeout", "900",
             "--scheduler-file", str(directory / "scheduler.json")],
            directory / "scheduler.log", env))
        address = _wait_for_address(directory / "scheduler.json", processes[0], timeout)
        for index in range(workers):
            processes.append(_start(
                [sys.executable, "-m", "distributed.cli.dask_worker", address,
                 "--nthreads", str(threads), "--nworkers", "1", "--host", "127.0.0.1",
                 "--no-dashboard", "--name", f"worker-{index}", "--death-timeout", "60",
                 "--local-directory", str(directory / f"worker-{index}")],
                directory / f"worker-{index}.log", env))
        cluster = LocalCluster(address, directory, processes[0], processes[1:])
        with Client(address, set_as_default=False, timeout=timeout) as client:
            try:
                client.wait_for_workers(workers, timeout=timeout)
            except TimeoutError as error:
                raise RuntimeError(f"{workers} dask workers did not join within {timeout} s\n"
                                   f"{cluster.logs()}") from error
        yield cluster
    finally:
        for process in reversed(processes):
            _kill(process)
