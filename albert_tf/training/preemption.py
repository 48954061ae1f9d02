"""Preemption notices: SIGTERM (what schedulers, `docker stop` and spot VMs send before they
kill) and, on Google Cloud, the host-maintenance notice, turned into a stop request that the
compiled training loop reads at every step.

Why not Python's signal handler alone: it runs only when the main thread returns to the
interpreter, i.e. after a whole window of `steps_per_loop` steps inside one tf.function call,
which can outlast a scheduler's grace period. CPython's C-level handler also writes the
signal's number to a "wakeup" file descriptor from whatever thread the signal lands on; a
reader thread here sets a host variable the loop reads as every step starts, so the loop
stops after the step in progress and the next. The loop sums the request into an all-reduce it already makes, so
every worker of a cluster stops after the same step (see loop.Trainer).

Why not `tf.distribute.experimental.PreemptionCheckpointHandler`: it checks between its
`run()` calls (our windows of steps), restores and saves through its own checkpoint manager
(our divergence guard rolls back through ours), and exits the process itself; the loop needs
the stop inside a window and an exception its callers can report.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Callable, Optional

import tensorflow as tf
from absl import logging

from albert_tf.kernels import tf_internals

# The signals that mean "you will be killed soon; save what you can".
NOTICE_SIGNALS = (signal.SIGTERM,)
_GCE_POLL_SECONDS = 1.0
_gce_lock = threading.Lock()
_gce_answer = []  # [the check or None], once asked: the metadata server is asked once


def _gce_watcher() -> Optional[Callable[[], bool]]:
    """TensorFlow's GCE maintenance check on Google Cloud, else None (asked once a process)."""
    with _gce_lock:
        if not _gce_answer:
            _gce_answer.append(tf_internals.gce_termination_watcher())
        return _gce_answer[0]


class StopRequest:
    """A host-side int32 variable (0: go on, 1: stop after the next step to start) and why."""

    def __init__(self):
        self.variable = tf.Variable(0, dtype=tf.int32, trainable=False, name="stop_request")
        self.reason: Optional[str] = None
        # Reentrant: Python's handler may run on the main thread while it holds the lock.
        self._lock = threading.RLock()

    def request(self, reason: str) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
        logging.warning("%s: stopping after the next step to save a checkpoint", reason)
        # Eager even when Python's handler runs in the middle of a trace (the main thread
        # may be tracing a tf.function): the assign must not land in that graph.
        with tf.init_scope():
            self.variable.assign(1)

    def clear(self) -> None:
        self.reason = None
        self.variable.assign(0)

    @property
    def requested(self) -> bool:
        return self.reason is not None


class PreemptionWatcher:
    """While entered (`with watcher:`), a notice signal or GCE's maintenance notice calls
    `stop.request(reason)` instead of killing the process. Outside, the signals do what
    they did before. Installs nothing off the main thread (Python allows signal handlers
    only there) and says so.

    `gce_watcher`: a function returning True once the host will be taken down (default:
    TensorFlow's GCE metadata check, polled only when the metadata server answers).
    """

    def __init__(self, stop: StopRequest, gce_watcher: Optional[Callable[[], bool]] = None):
        self.stop = stop
        self._gce_watcher = gce_watcher
        self._previous_handlers = {}
        self._previous_wakeup_fd = None
        self._pipe = None
        self._reader = None  # the wakeup descriptor's reader thread
        self._done = threading.Event()

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            logging.info("training off the main thread: SIGTERM is not turned into a "
                         "checkpoint (Python sets signal handlers on the main thread only)")
            return self
        self._done = threading.Event()  # a new one: the last entry's GCE thread may still run
        for signum in NOTICE_SIGNALS:
            self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
        self._start_wakeup_reader()
        # Not joined on exit: it may be waiting (up to 5 s) for the metadata server's answer,
        # and it stops by itself once `_done` is set.
        threading.Thread(target=self._watch_gce, args=(self._done,), daemon=True,
                         name="albert_tf_gce_maintenance_watcher").start()
        return self

    def __exit__(self, *exc_info):
        self._done.set()
        for signum, handler in self._previous_handlers.items():
            # (None: a handler set from C, which Python cannot reinstall; the default then)
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        self._previous_handlers = {}
        if self._pipe is not None:
            signal.set_wakeup_fd(self._previous_wakeup_fd)
            # Nothing writes to the pipe any more: closing its write end ends the reader.
            os.close(self._pipe[1])
            self._pipe = None
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
        return False

    def _on_signal(self, signum, frame) -> None:
        self.stop.request(f"received {signal.Signals(signum).name}")

    # --- the wakeup descriptor: a notice during a compiled window --------------------

    def _start_wakeup_reader(self) -> None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except ValueError:  # not the main thread of the main interpreter
            os.close(read_fd)
            os.close(write_fd)
            return
        self._pipe = (read_fd, write_fd)
        self._reader = threading.Thread(target=self._read_wakeups, daemon=True,
                                        args=(read_fd, self._previous_wakeup_fd),
                                        name="albert_tf_signal_reader")
        self._reader.start()

    def _read_wakeups(self, read_fd: int, chained_fd: int) -> None:
        """Until the pipe's write end is closed (__exit__)."""
        try:
            while True:
                data = os.read(read_fd, 64)
                if not data:
                    return
                if chained_fd is not None and chained_fd >= 0:
                    try:  # whoever set a wakeup descriptor before us still gets its bytes
                        os.write(chained_fd, data)
                    except OSError:
                        pass
                for signum in data:
                    if signum in NOTICE_SIGNALS:
                        self.stop.request(f"received {signal.Signals(signum).name}")
        finally:
            os.close(read_fd)

    # --- Google Cloud's maintenance notice ---------------------------------------------

    def _watch_gce(self, done: threading.Event) -> None:
        watcher = self._gce_watcher or _gce_watcher()
        if watcher is None:
            return
        while not done.wait(_GCE_POLL_SECONDS):
            try:
                if watcher():
                    self.stop.request("Google Cloud announced a host maintenance event "
                                      "(TERMINATE_ON_HOST_MAINTENANCE)")
                    return
            except Exception as err:  # noqa: BLE001 -- a metadata hiccup must not stop training
                logging.log_every_n_seconds(logging.WARNING, "GCE maintenance check failed: %s",
                                            600, err)

