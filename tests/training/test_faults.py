"""Faults at cluster scale, with run_pretraining.py as two MultiWorkerMirroredStrategy
processes on localhost (and one process): SIGTERM to one worker makes both save at the same
step and exit 143; kill -9 (or freezing) one worker stops the other within the timeout with
one line naming it (75); rerunning resumes (the input too) and ends with the weights of an
uninterrupted run."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT
from tests.helpers.cluster import Cluster, last_line, steps_logged, wait_for_checkpoint
from tests.helpers.pretraining_data import make_examples, write_records

pytestmark = pytest.mark.slow

CONFIG = dict(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=64, max_position_embeddings=16)
STEPS, INTERVAL = 300, 100


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("fault_data")
    config = root / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return {"train": write_records(root / "train.tfrecord", make_examples(160, seed=0)),
            "config": str(config)}


def command(data, output_dir, *extra):
    """run_pretraining.py with a seeded, reproducible input and op determinism; windows
    of 50 steps, a checkpoint every 100."""
    return [str(REPO_ROOT / "run_pretraining.py"), f"--albert_config_file={data['config']}",
            f"--input_file={data['train']}", f"--output_dir={output_dir}",
            "--train_batch_size=8", "--max_seq_length=16", "--max_predictions_per_seq=4",
            f"--num_train_steps={STEPS}", "--num_warmup_steps=4", "--learning_rate=1e-3",
            "--optimizer=adamw", f"--save_checkpoints_steps={INTERVAL}",
            "--iterations_per_loop=50", "--seed=7", "--deterministic", "--nodo_eval",
            "--strategy=multi_worker_mirrored", *extra]


def final_weights(output_dir):
    reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt-best"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_same_weights(got, want, steps=STEPS):
    assert got.keys() == want.keys() and int(got["global_step"]) == steps
    for name in want:  # bit for bit: same batches, same sums, same order
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory):
    """The final weights of an uninterrupted two-worker run."""
    out = tmp_path_factory.mktemp("uninterrupted")
    with Cluster(command(data, out), 2, out / "logs") as cluster:
        statuses = cluster.wait()
        assert statuses == [0, 0], cluster.stderr(0)[-3000:]
    return final_weights(out)


def rerun(data, out, *extra):
    """The same command rerun on both workers, to completion; their stderr."""
    with Cluster(command(data, out, *extra), 2, out / "logs-rerun") as cluster:
        statuses = cluster.wait()
        assert statuses == [0, 0], cluster.stderr(0)[-3000:]
        return [cluster.stderr(0), cluster.stderr(1)]


def test_sigterm_to_one_worker_saves_both_at_the_same_step_then_resumes(
        data, uninterrupted, tmp_path):
    out = tmp_path / "run"
    with Cluster(command(data, out), 2, out / "logs") as cluster:
        wait_for_checkpoint(out / "checkpoints", INTERVAL, cluster.procs)
        cluster.procs[1].send_signal(signal.SIGTERM)
        sent = time.time()
        assert cluster.wait(timeout=60) == [143, 143], cluster.stderr(0)[-3000:]
        stopped_in = time.time() - sent
        lines = [last_line(cluster.stderr(i)) for i in range(2)]
    step = int(re.search(r"at step (\d+) of", lines[0]).group(1))
    assert INTERVAL < step < STEPS, lines
    path = out / "checkpoints" / f"ckpt-{step}"
    assert lines[0] == (f"run_pretraining.py: preempted: a preemption notice reached another "
                        f"worker; saved checkpoint {path} at step {step} of {STEPS}: rerun "
                        "the same command to resume there")
    assert lines[1].startswith("run_pretraining.py: preempted: received SIGTERM; saved "
                               f"checkpoint {path} at step {step} of")
    assert os.path.exists(f"{path}.index") and stopped_in < 30
    assert max(steps_logged(cluster.stderr(0))) == step  # no step trained and lost

    logs = rerun(data, out)
    assert f"resumed from {path} at step {step}" in logs[0]
    assert f"skipping the {step} steps of input the checkpoint had read" in logs[1]
    assert min(steps_logged(logs[0])) > step
    assert_same_weights(final_weights(out), uninterrupted)


@pytest.mark.parametrize("fault,lost", [("kill -9", 1), ("kill -9", 0), ("frozen", 1)])
def test_a_lost_worker_stops_the_other_within_the_timeout_naming_it(
        data, uninterrupted, tmp_path, fault, lost):
    """Worker 0 is the chief and leads TensorFlow's coordination service: losing it too."""
    out = tmp_path / "run"
    timeout, survivor = 5, 1 - lost
    with Cluster(command(data, out, f"--worker_timeout_seconds={timeout}"), 2,
                 out / "logs") as cluster:
        wait_for_checkpoint(out / "checkpoints", INTERVAL, cluster.procs)
        victim = cluster.procs[lost]
        victim.send_signal(signal.SIGKILL if fault == "kill -9" else signal.SIGSTOP)
        lost_at = time.time()
        cluster.procs[survivor].wait(timeout=timeout + 55)
        stopped_in = time.time() - lost_at
        if fault == "frozen":
            victim.kill()
        assert cluster.procs[survivor].returncode == 75, cluster.stderr(survivor)[-3000:]
        text = cluster.stderr(survivor)
    line = last_line(text)
    latest = tf.train.latest_checkpoint(str(out / "checkpoints"))
    cause = ("it stopped sending heartbeats" if fault == "frozen" else
             "(its connection closed|it stopped sending heartbeats)")
    assert re.fullmatch(
        rf"run_pretraining\.py: error: lost worker {lost} "
        rf"\({re.escape(cluster.addresses[lost])}\): "
        rf"{cause}.*; the last checkpoint is {re.escape(latest)}\. Rerun the same command on "
        r"every worker to resume from it", line), line
    assert "Traceback" not in text
    assert stopped_in < timeout + 25, stopped_in
    if fault == "frozen" or lost == 0:
        return
    resumed_at = int(latest.rsplit("-", 1)[1])
    assert max(steps_logged(text)) - resumed_at <= INTERVAL  # at most one interval lost
    logs = rerun(data, out)
    assert f"resumed from {latest} at step {resumed_at}" in logs[0]
    assert_same_weights(final_weights(out), uninterrupted)


def test_sigterm_to_one_process_saves_the_current_step(data, tmp_path):
    """No cluster: SIGTERM (a scheduler, `docker stop`) saves mid-window and exits 143."""
    steps = 1500  # one process runs ~200 steps/s: long enough to be signalled mid-run
    extra = ("--strategy=one_device", "--iterations_per_loop=100", f"--num_train_steps={steps}")
    out = tmp_path / "run"
    argv = [sys.executable] + command(data, out, *extra)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    straight = subprocess.run([sys.executable] + command(data, tmp_path / "straight", *extra),
                              capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert straight.returncode == 0, straight.stderr[-2000:]
    with open(tmp_path / "log", "w") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, cwd=REPO_ROOT,
                                env=env)
        try:
            wait_for_checkpoint(out / "checkpoints", INTERVAL, [proc])
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 143
        finally:
            proc.kill()
    text = (tmp_path / "log").read_text()
    step = max(steps_logged(text))
    assert last_line(text) == (
        f"run_pretraining.py: preempted: received SIGTERM; saved checkpoint "
        f"{out / 'checkpoints' / f'ckpt-{step}'} at step {step} of {steps}: rerun the same "
        "command to resume there")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"at step {step}" in done.stderr
    assert_same_weights(final_weights(out), final_weights(tmp_path / "straight"), steps)


def test_a_distributed_iterator_resumes_by_skipping_each_replicas_elements():
    """MirroredStrategy over 2 logical CPUs: one input pipeline feeds both replicas, so a
    resumed run skips 2 elements per step read; 3 + 3 steps equal 6 straight (exactly)."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "tests/helpers/mirrored_resume.py")],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"max_weight_diff": 0.0}
