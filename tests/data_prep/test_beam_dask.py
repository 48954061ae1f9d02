"""The Beam pipeline on Beam's DaskRunner, against a dask.distributed cluster on localhost
(a scheduler and two one-thread workers, subprocesses: tests/helpers/dask_cluster.py):
the same bytes as the local runner, also when a worker is SIGKILLed mid-run, and one
line for a scheduler that does not answer or a missing dask.

Needs apache-beam, dask and distributed (requirements-beam.txt; `make test-beam`).
"""
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip(
    "apache_beam", reason="apache_beam is not importable (optional extra: pip install .[beam]; "
    "it needs protobuf<7, so use a separate venv such as .venv-beam)")
pytest.importorskip("distributed", reason="dask.distributed is not installed "
                    "(requirements-beam.txt)")

import apache_beam.runners.dask.dask_runner  # noqa: E402,F401  (imported before any thread)
from distributed import Client  # noqa: E402

from data_prep import beam_dask, beam_pipeline, runner  # noqa: E402
from tests.conftest import REPO_ROOT  # noqa: E402
from tests.helpers.beam_corpus import assert_same_outputs, small_corpus  # noqa: E402
from tests.helpers.dask_cluster import local_cluster  # noqa: E402


@pytest.fixture
def cluster(tmp_path):
    with local_cluster(tmp_path / "cluster", workers=2, threads=1) as running:
        yield running


def _local_and_dask(tmp_path, shared_data, dupe_factor=2):
    """(files, options, local outputs, their summary, DaskRunner output names)."""
    files, options = small_corpus(shared_data, dupe_factor)
    (tmp_path / "out").mkdir()
    local = [str(tmp_path / "out" / f"local-{i}") for i in range(2)]
    dask = [str(tmp_path / "out" / f"dask-{i}") for i in range(2)]
    summary = runner.create_pretraining_data(files, local, options, log=lambda m: None)
    return files, options, local, summary, dask


def test_dask_runner_matches_local_runner(tmp_path, shared_data, cluster):
    files, options, local, summary, dask = _local_and_dask(tmp_path, shared_data)
    beam_pipeline.run(",".join(files), dask, options, runner="DaskRunner",
                      pipeline_args=[f"--dask_client_address={cluster.address}"])
    assert_same_outputs(local, dask, summary)
    assert not list((tmp_path / "out").glob(".*"))  # no temporary file left


class _KillWhenBusy(threading.Thread):
    """SIGKILLs the first worker seen running a task while holding `results` finished
    results (which the scheduler must then recompute elsewhere): polls the scheduler."""

    def __init__(self, cluster, results: int = 3):
        super().__init__(daemon=True)
        self.cluster, self.results = cluster, results
        self.client = Client(cluster.address, set_as_default=False)
        self.killed = None  # (worker name, keys it was running, results it held)
        self.stop = threading.Event()

    def run(self):
        names = {address: info["name"] for address, info in
                 self.client.scheduler_info()["workers"].items()}
        while not self.stop.is_set() and self.killed is None:
            running, held = self.client.processing(), self.client.has_what()
            for address, keys in running.items():
                if keys and len(held.get(address, ())) >= self.results:
                    self.cluster.kill_worker(int(names[address].split("-")[1]))
                    self.killed = (names[address], list(keys), len(held[address]))
                    break
            time.sleep(0.02)


def test_dask_runner_survives_a_killed_worker(tmp_path, shared_data, cluster):
    # 4x the work of the test above, so that tasks are still running when the first
    # results are in.
    files, options, local, summary, dask = _local_and_dask(tmp_path, shared_data, 8)
    killer = _KillWhenBusy(cluster)
    killer.start()
    try:
        beam_pipeline.run(",".join(files), dask, options, runner="DaskRunner",
                          pipeline_args=[f"--dask_client_address={cluster.address}"])
        assert killer.killed is not None, "the job ended before a worker was busy"
        assert len(killer.client.nthreads()) == 1  # the scheduler saw the worker go
    finally:
        killer.stop.set()
        killer.join()
        killer.client.close()
    # Dask ran the lost worker's tasks (and recomputed its results) on the other one.
    assert_same_outputs(local, dask, summary)
    assert not list((tmp_path / "out").glob(".*"))  # the killed attempt's temp files removed


def test_unreachable_scheduler_is_one_line(tmp_path, shared_data):
    files, _ = small_corpus(shared_data)
    model = shared_data / "spm" / "albert_style_pd8k.model"
    process = subprocess.run(
        [sys.executable, "-m", "data_prep.create_pretraining_data", "--runner=DaskRunner",
         "--beam_pipeline_options=--dask_client_address=tcp://127.0.0.1:9 "
         "--dask_connection_timeout=1",
         f"--input_file={files[0]}", f"--output_file={tmp_path / 'out'}",
         f"--spm_model_file={model}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert process.returncode == 2, process.stderr
    assert "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith("create_pretraining_data.py: error: "
                           "--dask_client_address=tcp://127.0.0.1:9: no Dask scheduler "
                           "answered within 1 s"), last


@pytest.mark.parametrize("options,message", [
    (["--dask_client_address=tcp://127.0.0.1:9", "--dask_connection_timeout=1"],
     "--dask_client_address=tcp://127.0.0.1:9: no Dask scheduler answered within 1 s"),
    (["--dask_scheduler_file=/nonexistent/scheduler.json"],
     "--dask_scheduler_file=/nonexistent/scheduler.json: no such file"),
])
def test_bad_cluster_option_is_one_line(options, message):
    with pytest.raises(beam_dask.ClusterError) as raised:
        beam_dask.prepare(options)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_missing_dask_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    with pytest.raises(beam_dask.ClusterError,
                       match=r"^--runner=DaskRunner needs dask and distributed: "):
        beam_dask.prepare(["--dask_client_address=tcp://127.0.0.1:9"])
