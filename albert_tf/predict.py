"""Batch prediction over a file: one JSON line per input line, resumable.

  python -m albert_tf.predict --model hf/albert-ner --task token-classification \
      --input texts.txt --output entities.jsonl --options '{"aggregation_strategy": "simple"}'
  python -m albert_tf.predict --model runs/sst2/export --task text-classification \
      --input reviews.tsv --output labels.jsonl --batch_size 64

Input (--input_format auto: by extension):
  .jsonl / .json   one JSON object a line: `text` (and `text_pair`), `question` + `context`,
                   `question` + `choices` (+ `context`), per task; an `id` is carried over
  .tsv             a header line naming those columns (`choices`: a JSON list)
  anything else    plain text, one text a line (the tasks that read one text)
Output: one JSON line per input line, in input order: {"line": N, "id": ..., "result": ...}
(blank input lines have none)
(`result` is what `albert_tf.pipeline(task, ...)` returns for that input in a list of
inputs; `id` only when the input has one). The output appears when the run completes (written as
OUTPUT.partial until then).

Interrupted (Ctrl-C, kill -9, a lost machine), the same command resumes where the last
flush left off: OUTPUT.partial.json records how many input lines and output bytes are
done, the partial output is cut back to that size, and the finished file equals an
uninterrupted run's byte for byte. A bad line (not JSON, a missing field, a text the task
cannot read) stops the run with one line naming it; --skip_bad_lines skips and counts them.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import itertools
import json
import os
import sys
import time
from typing import Dict, Iterator, Optional, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags  # noqa: E402

from albert_tf import fileio  # noqa: E402
from albert_tf.errors import UserFileNotFoundError, UserValueError  # noqa: E402

FORMATS = ("auto", "jsonl", "tsv", "text")
# task -> (required fields, optional fields) of an input line
FIELDS = {
    "text-classification": (("text",), ("text_pair",)),
    "token-classification": (("text",), ()),
    "fill-mask": (("text",), ()),
    "feature-extraction": (("text",), ()),
    "zero-shot-classification": (("text",), ()),
    "question-answering": (("question", "context"), ()),
    "multiple-choice": (("question", "choices"), ("context",)),
}
FLUSH_SECONDS = 2.0
PROGRESS_SECONDS = 10.0


class BadLine(UserValueError):
    """An input line the task cannot read."""


BLANK = UserValueError("a blank line")  # passes through the pipeline in its place


def input_format(path: str, chosen: str) -> str:
    if chosen != "auto":
        return chosen
    extension = os.path.splitext(path)[1].lower()
    return {".jsonl": "jsonl", ".json": "jsonl", ".tsv": "tsv"}.get(extension, "text")


def _text_field(record: Dict, name: str, where: str) -> str:
    value = record[name]
    if not isinstance(value, str):
        raise BadLine(f"{where}: {name!r} is a {type(value).__name__}, not a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BadLine(f"{where}: {name!r} is not valid Unicode ({error.reason} at "
                      f"character {error.start})") from None
    return value


def make_item(task: str, record: Dict, where: str):
    """The pipeline's input for one record (a dict of the line's fields)."""
    required, optional = FIELDS[task]
    missing = [name for name in required if record.get(name) in (None, "")]
    if missing:
        raise BadLine(f"{where}: no {missing[0]!r} field (the {task} task reads "
                      f"{', '.join(required + optional)})")
    present = [n for n in required + optional if record.get(n) not in (None, "")]
    texts = {n: _text_field(record, n, where) for n in present if n != "choices"}
    if task == "multiple-choice":
        choices = record["choices"]
        if isinstance(choices, str):
            try:
                choices = json.loads(choices)
            except ValueError:
                raise BadLine(f"{where}: 'choices' is not a JSON list") from None
        if not (isinstance(choices, list) and choices
                and all(isinstance(c, str) for c in choices)):
            raise BadLine(f"{where}: 'choices' must be a non-empty list of strings")
        item = {"question": texts["question"], "choices": choices}
        if "context" in texts:
            item["context"] = texts["context"]
        return item
    if task == "question-answering":
        return {"question": texts["question"], "context": texts["context"]}
    if task == "text-classification" and "text_pair" in texts:
        return {"text": texts["text"], "text_pair": texts["text_pair"]}
    return texts["text"]


def read_lines(path: str, fmt: str, task: str, start: int
               ) -> Iterator[Tuple[int, int, object]]:
    """(line number, bytes read so far, record or BadLine) for each input line after the
    first `start` ones (a header counts as a line). Streams: one line in memory at a time."""
    with open(path, "rb") as handle:
        header = None
        if fmt == "tsv":
            header = tsv_cells(handle.readline().decode("utf-8-sig", "replace").rstrip("\r\n"))
            number = 1
        else:
            number = 0
        for raw in handle:
            number += 1
            if number <= start:
                continue
            where = f"{path} line {number}"
            try:
                # A file saved with a byte-order mark starts with it: not part of the text.
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                yield number, handle.tell(), BadLine(f"{where}: not UTF-8 ({error.reason} at "
                                                     f"byte {error.start})")
                continue
            if not text.strip():
                yield number, handle.tell(), None  # a blank line: nothing to predict
                continue
            yield number, handle.tell(), parse_line(text, fmt, header, task, where)


def tsv_cells(line: str):
    """A TSV line's cells; quotes are text (a cell may start with one)."""
    return next(csv.reader([line], delimiter="\t", quoting=csv.QUOTE_NONE), [])


def parse_line(text: str, fmt: str, header, task: str, where: str):
    if fmt == "jsonl":
        try:
            record = json.loads(text)
        except ValueError as error:
            return BadLine(f"{where}: not JSON ({error})")
        if not isinstance(record, dict):
            return BadLine(f"{where}: a JSON object is expected, got {type(record).__name__}")
    elif fmt == "tsv":
        values = tsv_cells(text)
        if len(values) != len(header):
            return BadLine(f"{where}: {len(values)} columns, the header has {len(header)}")
        record = dict(zip(header, values))
    else:
        if FIELDS[task][0] != ("text",):
            return BadLine(f"{where}: plain text lines give only `text`; the {task} task "
                           "reads JSON lines or TSV")
        record = {"text": text}
    try:
        return record.get("id"), make_item(task, record, where)
    except BadLine as error:
        return error


@dataclasses.dataclass
class Progress:
    """Where a run is: input lines consumed, output bytes written, lines skipped."""

    lines: int = 0
    output_bytes: int = 0
    skipped: int = 0
    first_skipped: str = ""
    fingerprint: str = ""


def run_fingerprint(args: Dict) -> str:
    """What must not change between a run and its resumption."""
    stat = os.stat(args["input"])
    key = dict(args, input_size=stat.st_size, input_mtime=int(stat.st_mtime))
    return hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()


def load_progress(state_path: str, partial_path: str, fingerprint: str) -> Progress:
    if not os.path.exists(state_path):
        return Progress(fingerprint=fingerprint)
    try:
        with open(state_path, encoding="utf-8") as handle:
            progress = Progress(**json.load(handle))
    except (OSError, ValueError, TypeError) as error:
        raise UserValueError(f"{state_path} is not readable ({error}): delete it and "
                             f"{partial_path} to start again") from None
    if progress.fingerprint != fingerprint:
        raise UserValueError(f"{partial_path} is left by a run with other flags or another "
                             "input file: rerun that command to finish it, or delete "
                             f"{partial_path} and {state_path} to start again")
    size = os.path.getsize(partial_path) if os.path.exists(partial_path) else -1
    if size < progress.output_bytes:
        raise UserValueError(f"{partial_path} is shorter than {state_path} says: delete both "
                             "to start again")
    return progress


def save_progress(state_path: str, progress: Progress) -> None:
    fileio.atomic_write_text(state_path, json.dumps(dataclasses.asdict(progress)) + "\n")


class Reporter:
    """A progress line with rate and ETA every PROGRESS_SECONDS (on stderr); the rate counts
    from this run's first line (a resumed run's earlier lines are not in it)."""

    def __init__(self, total_bytes: int):
        self.total = max(total_bytes, 1)
        self.start_bytes = None
        self.started = self.last = time.monotonic()
        self.lines = 0

    def update(self, number: int, position: int, count: int) -> None:
        if self.start_bytes is None:
            self.start_bytes = position
        self.lines += count
        now = time.monotonic()
        if now - self.last < PROGRESS_SECONDS:
            return
        self.last = now
        elapsed = max(now - self.started, 1e-9)
        done = (position - self.start_bytes) / max(self.total - self.start_bytes, 1)
        eta = elapsed * (1 - done) / done if done > 0 else float("nan")
        eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if eta == eta else "?"
        sys.stderr.write(f"predict: line {number:,} ({100 * position / self.total:.1f}%), "
                         f"{self.lines / elapsed:,.1f} lines/s, ETA {eta_text}\n")
        sys.stderr.flush()


def predict_file(runner, task: str, input_path: str, output_path: str, fmt: str = "auto",
                 skip_bad_lines: bool = False, fingerprint: str = "") -> Progress:
    """Runs `runner` (an albert_tf pipeline) over `input_path` into `output_path` (see the
    module docstring); returns the finished run's Progress."""
    partial, state = output_path + ".partial", output_path + ".partial.json"
    progress = load_progress(state, partial, fingerprint)
    fmt = input_format(input_path, fmt)
    mode = "r+b" if os.path.exists(partial) and progress.output_bytes else "wb"
    with open(partial, mode) as out:
        out.seek(progress.output_bytes)
        out.truncate()
        reporter = Reporter(os.path.getsize(input_path))
        last_flush = time.monotonic()
        position = [0]

        def items():
            """(line number, input id) -> the pipeline's input; a blank or bad line goes
            through as its marker, so that results and skips come back in line order."""
            for number, position[0], parsed in read_lines(input_path, fmt, task,
                                                          progress.lines):
                if parsed is None or isinstance(parsed, BadLine):
                    yield (number, None), parsed or BLANK
                else:
                    yield (number, parsed[0]), parsed[1]

        options = runner.resolve_options({})
        source = items()
        committed = dataclasses.replace(progress, output_bytes=out.tell())
        try:
            while True:
                # Groups of batch_size inputs counted from the first line: a resumed run
                # starts at a group boundary, so that it makes the same batches (the same
                # padding, the same float results) as an uninterrupted run.
                group = list(itertools.islice(source, runner.batch_size))
                if not group:
                    break
                skipped = []
                for (number, record_id), result in runner.keyed(group, options,
                                                                skip_errors=True):
                    skip = write_result(out, input_path, number, record_id, result,
                                        skip_bad_lines)
                    if skip:
                        skipped.append(skip)
                # One assignment: an interrupt leaves either the last group or this one.
                committed = dataclasses.replace(
                    committed, lines=group[-1][0][0], output_bytes=out.tell(),
                    skipped=committed.skipped + len(skipped),
                    first_skipped=committed.first_skipped or (skipped or [""])[0])
                reporter.update(committed.lines, position[0], len(group))
                if time.monotonic() - last_flush >= FLUSH_SECONDS:
                    _flush(out, state, committed)
                    last_flush = time.monotonic()
        finally:
            _flush(out, state, committed)  # an interrupted group's lines are redone
    os.replace(partial, output_path)
    os.remove(state)
    return committed


def write_result(out, input_path: str, number: int, record_id, result,
                 skip_bad_lines: bool) -> Optional[str]:
    """Writes one input line's output line. A bad line raises BadLine, or with
    skip_bad_lines returns the message (the caller counts it); a blank line writes nothing."""
    if result is BLANK:
        return None
    if isinstance(result, UserValueError):
        message = str(result)
        if not isinstance(result, BadLine):
            message = f"{input_path} line {number}: {message}"
        if not skip_bad_lines:
            raise BadLine(message + " (--skip_bad_lines skips such lines)")
        return message
    line = {"line": number}
    if record_id is not None:
        line["id"] = record_id
    line["result"] = result
    out.write((json.dumps(line, ensure_ascii=False, default=_plain) + "\n").encode(
        "utf-8", "backslashreplace"))
    return None


def _flush(out, state: str, progress: Progress) -> None:
    """The partial output cut to `progress.output_bytes` and synced, then the state file."""
    out.truncate(progress.output_bytes)
    out.seek(progress.output_bytes)
    out.flush()
    os.fsync(out.fileno())
    save_progress(state, progress)


def _plain(value):
    """JSON for numpy values in results (float32 scores, arrays)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def main(argv):
    del argv
    args = flags.FLAGS
    from albert_tf.pipelines import ALIASES as TASK_ALIASES
    from albert_tf.pipelines import pipeline

    task = TASK_ALIASES.get(args.task, args.task)
    if task not in FIELDS:
        raise UserValueError(f"--task={args.task}: one of {', '.join(FIELDS)} (or "
                             f"{', '.join(TASK_ALIASES)})")
    if input_format(args.input, args.input_format) == "text" and FIELDS[task][0] != ("text",):
        raise UserValueError(f"--input={args.input}: plain text gives one text a line; the "
                             f"{task} task reads JSON lines (.jsonl) or TSV (.tsv) with "
                             f"{', '.join(FIELDS[task][0])} (or pass --input_format)")
    if not os.path.isfile(args.input):
        raise UserFileNotFoundError(f"--input={args.input}: no such file")
    if os.path.exists(args.output):
        raise UserValueError(f"--output={args.output} exists (a finished run): delete it or "
                             "choose another --output")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise UserFileNotFoundError(f"--output={args.output}: no directory {out_dir}")
    if args.batch_size < 1:
        raise UserValueError(f"--batch_size={args.batch_size}: must be at least 1")
    try:
        options = json.loads(args.options) if args.options else {}
    except ValueError as error:
        raise UserValueError(f"--options is not a JSON object: {error}") from None
    if not isinstance(options, dict):
        raise UserValueError("--options must be a JSON object, e.g. "
                             '\'{"aggregation_strategy": "simple"}\'')
    reserved = sorted(set(options) & {"model", "batch_size", "do_lower_case", "task",
                                      "num_layers", "patience", "exit_confidence"})
    if reserved:
        raise UserValueError(f"--options: {reserved[0]!r} is a flag of its own "
                             f"(--{reserved[0]}), not a pipeline option")
    light = {name: getattr(args, name) for name in ("num_layers", "patience",
                                                    "exit_confidence")
             if getattr(args, name, None) is not None}
    runner = pipeline(task, model=args.model, batch_size=args.batch_size, **light, **options)
    # The batch size is in it: a resumed run must make the same batches (same results).
    fingerprint = run_fingerprint({"input": os.path.abspath(args.input), "task": task,
                                   "model": os.path.abspath(args.model), "options": options,
                                   "input_format": args.input_format,
                                   "batch_size": args.batch_size, **light})
    progress = predict_file(runner, task, args.input, args.output, args.input_format,
                            args.skip_bad_lines, fingerprint)
    summary = f"predict: wrote {args.output} ({progress.lines:,} input lines"
    if progress.skipped:
        summary += f"; skipped {progress.skipped:,} bad lines, the first: " \
                   f"{progress.first_skipped}"
    print(summary + ")")
    return 0


def define_flags() -> None:
    flags.DEFINE_string("model", None, "Model: a Hugging Face ALBERT directory, an official "
                        "directory, or an albert-tf export (SavedModel, model.onnx, "
                        "model.tflite).")
    flags.DEFINE_string("task", None, f"Task: {', '.join(FIELDS)} (or sentiment-analysis, ner).")
    flags.DEFINE_string("input", None, "Input file: JSON lines, TSV with a header, or text.")
    flags.DEFINE_string("output", None, "Output JSON lines (written as OUTPUT.partial until "
                        "the run completes; a rerun resumes it).")
    flags.DEFINE_enum("input_format", "auto", list(FORMATS), "Input format (auto: .jsonl/.json "
                      "JSON lines, .tsv TSV, else text).")
    flags.DEFINE_integer("batch_size", 32, "Inputs per model call.")
    flags.DEFINE_string("options", None, "The task's pipeline options as a JSON object, e.g. "
                        '\'{"aggregation_strategy": "simple"}\' or \'{"top_k": 3}\'.')
    flags.DEFINE_bool("skip_bad_lines", False, "Skip (and count) input lines the task cannot "
                      "read instead of stopping at the first.")
    flags.DEFINE_integer("num_layers", None, "Run the shared layer this many times instead "
                         "of all (a checkpoint source; an export runs as exported).")
    flags.DEFINE_integer("patience", None, "Early exit (PABEE; text and token "
                         "classification): a row stops at the first layer whose prediction "
                         "has not changed for this many layers; each result says its "
                         "exit_layer.")
    flags.DEFINE_float("exit_confidence", None, "Early exit: a row also stops when its top "
                       "probability reaches this, in (0, 1].")
    flags.mark_flags_as_required(["model", "task", "input", "output"])


def interrupted_message() -> str:
    output = flags.FLAGS.output if flags.FLAGS.is_parsed() else "OUTPUT"
    return (f"the lines done are kept in {output}.partial; rerun the same command to "
            "resume")


if __name__ == "__main__":
    from albert_tf.kernels import onednn

    onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once
    from albert_tf import cli

    define_flags()
    cli.run(main, interrupted=interrupted_message)
