"""Atomic output files: an interrupted job never leaves a file that looks complete. And
`read_json`: a JSON file in, or one line naming it when it is not readable.

Every writer in the project goes through these helpers: data is written to a
temporary file in the destination directory and renamed over the final name
only after it was closed successfully (rename is atomic on POSIX and on most
object stores that `tf.io.gfile` supports as a copy-then-delete).
"""
from __future__ import annotations

import contextlib
import json
import os
import uuid
from typing import Dict, Iterator, IO


def read_json(path: str) -> Dict:
    """A JSON file's object ({} when the file is absent); a UserValueError naming the file
    when it is not readable JSON."""
    from albert_tf.errors import UserValueError

    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise UserValueError(f"{path}: not readable JSON ({error})") from None


def read_utf8_text(path: str, error: type = ValueError) -> str:
    """A whole UTF-8 file, local or gs:// (a BOM is skipped); `error` (a UserError type of
    the caller's) naming file:line when it is not UTF-8."""
    import tensorflow as tf  # gfile: local paths and gs:// alike

    with tf.io.gfile.GFile(path, "rb") as handle:
        raw = handle.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not valid UTF-8 ({err.reason})") from err


def read_rows(path: str, delimiter: str = "\t", error: type = ValueError):
    """(1-based line number, fields) of each non-blank row of a UTF-8 (optional BOM) TSV or
    CSV file, local or gs://. TSV is read without quoting (GLUE's convention: quotes are
    text); CSV with the standard double-quote rules. `error` (the caller's UserError type)
    names the file when it is missing, and file:line when it is not UTF-8."""
    import csv
    import io

    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise error(f"{path}: file not found (check --data_dir and --task_name)")
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    reader = csv.reader(io.StringIO(read_utf8_text(path, error), newline=""),
                        delimiter=delimiter, quoting=quoting)
    previous_end = 0
    for row in reader:
        line, previous_end = previous_end + 1, reader.line_num
        if row:
            yield line, row


def _temp_name(path: str) -> str:
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.tmp-{uuid.uuid4().hex[:8]}")


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yields a temporary path beside `path` for the block to write (by any means, e.g. a
    library that takes a file name), renamed to `path` on success.

    On an exception inside the block the temp file is removed and `path` is
    left untouched (either absent or with its previous complete content).
    """
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = _temp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w", **kwargs) -> Iterator[IO]:
    """Opens `path` for writing through a temp file renamed on success (`atomic_path`)."""
    if not any(flag in mode for flag in "wx"):
        raise ValueError(f"atomic_open is for writing, got mode {mode!r}")
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def atomic_write_text(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


@contextlib.contextmanager
def atomic_tfrecord_writer(path: str, options=None):
    """A `tf.io.TFRecordWriter` whose file appears under `path` only when closed cleanly."""
    import tensorflow as tf  # local import: keeps this module light for data_prep workers

    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    tmp = _temp_name(path)
    writer = tf.io.TFRecordWriter(tmp, options=options)
    try:
        yield writer
        writer.close()
        tf.io.gfile.rename(tmp, path, overwrite=True)
    finally:
        writer.close()
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
