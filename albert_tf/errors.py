"""The one error type the command lines answer without a traceback.

`UserError` marks a mistake in what the user gave: a missing or unreadable
file, a bad flag value or combination, a wrong directory layout, a config that
does not fit the checkpoint, bad data at file:line. Every entry point prints
its message (one or two lines naming the flag or file and what to do) on
stderr and exits with status 2; any other exception is a bug and keeps its
traceback. Library error classes derive from it (and from ValueError or
FileNotFoundError where callers already catch those).

Pure Python: data preparation imports it without TensorFlow.
"""
from __future__ import annotations

import os
import tempfile


class UserError(Exception):
    """A mistake in the user's flags, files or data; the message says which and what to do."""


class UserValueError(UserError, ValueError):
    """A bad flag value or combination, or a file whose content is wrong (a ValueError)."""


class UserFileNotFoundError(UserError, FileNotFoundError):
    """A file or directory the user named is missing or of the wrong kind."""


EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
# A training run stopped by a preemption notice (SIGTERM, a GCE maintenance event) after
# saving a checkpoint at its current step: restart it. 143 (128 + SIGTERM) is what a
# SIGTERM-killed process reports, so schedulers that already restart those keep doing so,
# and TensorFlow's PreemptionCheckpointHandler exits with it on GCE.
EXIT_PREEMPTED = 143
# A multi-worker run that lost a worker (killed, crashed, unreachable): restart every
# worker, which resumes from the last checkpoint. sysexits.h's EX_TEMPFAIL ("a temporary
# failure: retry").
EXIT_WORKER_LOST = 75


class Preempted(Exception):
    """Training stopped on a preemption notice after saving a checkpoint at its current
    step; the message says where. Not a failure: rerunning the same command resumes there."""

    def __init__(self, message: str, step: int, checkpoint: str):
        super().__init__(message)
        self.step = step
        self.checkpoint = checkpoint


class WorkerLost(Exception):
    """A multi-worker run lost a peer; the message names it and the last checkpoint."""


def check_file(path: str, flag: str, what: str = "file") -> str:
    """`path` (given as `flag`) if it is a non-empty local file, else a UserError naming both.

    Paths with a scheme (gs://, s3://, ...) are returned unchecked: TensorFlow's
    file systems read them and report their own errors.
    """
    if not path or "://" in path:
        return path
    if not os.path.exists(path):
        raise UserFileNotFoundError(f"{flag}={path}: no such {what}")
    if os.path.isdir(path):
        raise UserFileNotFoundError(f"{flag}={path} is a directory; give the {what} itself")
    if not os.access(path, os.R_OK):
        raise UserFileNotFoundError(f"{flag}={path}: not readable (permission denied)")
    if os.path.getsize(path) == 0:
        raise UserValueError(f"{flag}={path} is an empty file; give the {what}")
    return path


def check_dir(path: str, flag: str, what: str = "directory") -> str:
    """`path` (given as `flag`) if it is an existing local directory, else a UserError."""
    if not path or "://" in path:
        return path
    if not os.path.exists(path):
        raise UserFileNotFoundError(f"{flag}={path}: no such {what}")
    if not os.path.isdir(path):
        raise UserFileNotFoundError(f"{flag}={path} is a file; give the {what} that holds it")
    return path


def check_writable(path: str, flag: str, kind: str = "file") -> str:
    """`path` (given as `flag`; `kind` "file" or "directory") if it can be created or
    written here: its nearest existing ancestor must be a writable directory (or the path
    itself a writable `kind`). Else a UserError naming the flag and the culprit."""
    if not path or "://" in path:
        return path
    if kind == "file" and os.path.isdir(path):
        raise UserFileNotFoundError(f"{flag}={path} is a directory; give a file path")
    if kind != "file" and os.path.isfile(path):
        raise UserFileNotFoundError(f"{flag}={path} is a file; give a directory")
    # Files are written atomically (a temporary file renamed), so their directory must be
    # writable; a directory to be created needs its nearest existing ancestor writable.
    probe = os.path.abspath(path)
    if kind == "file":
        probe = os.path.dirname(probe)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UserFileNotFoundError(f"{flag}={path}: {probe} is a file, not a directory")
    try:  # a real write: os.access says yes to root even on read-only file systems
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        raise UserValueError(f"{flag}={path}: cannot write in {probe} ({err.strerror}); "
                             "choose another path") from err
    return path
