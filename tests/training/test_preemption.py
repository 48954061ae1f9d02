"""Preemption notices and lost workers, in one process: SIGTERM stops the loop after the
current step with a checkpoint there, GCE's maintenance notice does the same, the handler
is only in place while training, and a lost peer's TensorFlow error becomes one line."""
import http.server
import os
import signal
import threading

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import cli, errors
from albert_tf.training import preemption, worker_loss
from tests.helpers.pretraining_data import make_examples
from tests.training.test_loop import as_batch, make_trainer


def sigterm_at_step(trainer, step):
    """A thread that sends this process SIGTERM once `trainer` has passed `step` (a
    scheduler's signal lands on any thread, the training thread being busy in a window)."""
    def watch():
        while int(trainer.optimizer.iterations.numpy()) < step:
            threading.Event().wait(0.005)
        os.kill(os.getpid(), signal.SIGTERM)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_sigterm_stops_inside_a_window_with_a_checkpoint_at_that_step(tmp_path):
    examples = make_examples(32, seed=3)
    trainer = make_trainer(tmp_path / "run", 60, 60)
    trainer.config.steps_per_loop = 40  # the notice comes inside the first window
    plain = lambda ctx: tf.data.Dataset.from_tensor_slices(as_batch(examples)).repeat().batch(4)
    before = signal.getsignal(signal.SIGTERM)
    sender = sigterm_at_step(trainer, 5)
    with pytest.raises(errors.Preempted) as stopped:
        trainer.train(plain)
    sender.join()
    step = trainer.step
    assert 5 <= step < 40, step  # after the step that saw the notice, not the window's end
    assert stopped.value.step == step
    assert stopped.value.checkpoint == str(tmp_path / "run" / f"ckpt-{step}")
    assert "received SIGTERM; saved checkpoint" in str(stopped.value)
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith(f"ckpt-{step}")
    assert signal.getsignal(signal.SIGTERM) == before  # the handler lives only in train()

    # The rerun starts at that step: no step lost, and the input goes on where it was.
    straight = make_trainer(tmp_path / "straight", 60, 60)
    straight.config.steps_per_loop = 40
    straight.train(plain)
    resumed = make_trainer(tmp_path / "run", 60, 60, seed=5)
    resumed.config.steps_per_loop = 40
    resumed.train(plain)
    assert resumed.step == 60
    for a, b in zip(straight.model.weights, resumed.model.weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-6, err_msg=a.path)


class _FakeMetadata(http.server.BaseHTTPRequestHandler):
    """Google Cloud's metadata server: a host name, then a maintenance notice."""
    notice = "NONE"

    def do_GET(self):  # noqa: N802 -- http.server's name
        if self.headers.get("Metadata-Flavor") != "Google":
            self.send_response(403)
            self.end_headers()
            return
        body = {"/computeMetadata/v1/instance/hostname": "vm-1",
                "/computeMetadata/v1/instance/maintenance-event": type(self).notice}.get(
            self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write((body or "").encode())

    def log_message(self, *args):
        pass


def test_gce_maintenance_notice_requests_a_stop(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeMetadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("GCE_METADATA_IP", f"127.0.0.1:{server.server_address[1]}")
    monkeypatch.setattr(preemption, "_gce_answer", [])  # asked once a process: ask again
    stop = preemption.StopRequest()
    try:
        with preemption.PreemptionWatcher(stop):
            event = threading.Event()
            event.wait(2.5)
            assert not stop.requested  # NONE: no notice yet
            _FakeMetadata.notice = "TERMINATE_ON_HOST_MAINTENANCE"
            for _ in range(100):
                if stop.requested:
                    break
                event.wait(0.1)
        assert stop.requested and "maintenance" in stop.reason
        assert int(stop.variable.numpy()) == 1
    finally:
        _FakeMetadata.notice = "NONE"
        server.shutdown()


def test_watcher_off_the_main_thread_installs_nothing():
    stop = preemption.StopRequest()
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def enter():
        with preemption.PreemptionWatcher(stop, gce_watcher=lambda: False):
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert seen == [before]


CLUSTER = tf.train.ClusterSpec({"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]})
HEARTBEAT = ("Collective ops is aborted by: Error reported from /job:worker/task:1: The "
             "following tasks are unhealthy (stopped sending heartbeats):\n"
             "/job:worker/replica:0/task:1\nThe tasks have crashed.")


def test_a_lost_peer_is_named_with_its_address_and_cause():
    assert worker_loss.describe_message(HEARTBEAT, ("worker", 0), CLUSTER) == (
        "lost worker 1 (127.0.0.1:2223): it stopped sending heartbeats for "
        "--worker_timeout_seconds (killed, crashed, frozen or cut off)")
    # Tasks named outside the unhealthy list may only have passed the error on.
    passed_on = ("Collective ops is aborted by: Error reported from /job:worker/task:1: "
                 "recvmsg:Connection reset by peer")
    assert worker_loss.describe_message(passed_on, ("worker", 0), CLUSTER, probe=False) is None
    assert worker_loss.describe_message("Incompatible shapes: [2] vs [3]", ("worker", 0),
                                        CLUSTER) is None


def test_a_peer_nobody_names_is_found_by_its_closed_port():
    import socket
    with socket.socket() as listening:  # worker 0: alive
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        with socket.socket() as closed:  # worker 1: a free port, nothing listens
            closed.bind(("127.0.0.1", 0))
            cluster = tf.train.ClusterSpec({"worker": [
                f"127.0.0.1:{listening.getsockname()[1]}", f"127.0.0.1:{closed.getsockname()[1]}",
                "127.0.0.1:1"]})
        message = "Collective ops is aborted by: recvmsg:Connection reset by peer"
        line = worker_loss.describe_message(message, ("worker", 2), cluster)
        assert line == (f"lost worker 1 ({cluster.task_address('worker', 1)}): its "
                        "connection closed (killed or crashed)")
        # Every peer answers: not a lost worker (a file system's dropped connection, say).
        alive = tf.train.ClusterSpec({"worker": [
            f"127.0.0.1:{listening.getsockname()[1]}", "127.0.0.1:1"]})
        assert worker_loss.describe_message(message, ("worker", 1), alive) is None


@pytest.mark.parametrize("raised,status,line", [
    (errors.Preempted("received SIGTERM; saved checkpoint out/ckpt-7 at step 7 of 9: rerun",
                      7, "out/ckpt-7"), errors.EXIT_PREEMPTED,
     "prog: preempted: received SIGTERM; saved checkpoint out/ckpt-7 at step 7 of 9: rerun\n"),
    (errors.WorkerLost("lost worker 1 (h:1): gone; the last checkpoint is c"),
     errors.EXIT_WORKER_LOST, "prog: error: lost worker 1 (h:1): gone; the last checkpoint is c\n"),
])
def test_the_command_line_exit_statuses(capsys, raised, status, line):
    def main(argv):
        raise raised
    assert cli.guard(main, [], "prog") == status
    assert capsys.readouterr().err == line
