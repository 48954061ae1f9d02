"""GLUE sentence(-pair) classification and regression: the task table and its readers.

Processors (`--task_name`), as the original's classifier_utils.py: file names
under `data_dir`, 0-based columns, header handling, label lists and the
best-checkpoint metric are in `TASKS`. `data_dir` is the GLUE root (the
original's layout: `data_dir/STS-B/train.tsv`) or the task's own folder
(`data_dir/train.tsv`); see `task_dir`. Texts are read raw; the original's
`preprocess_text(text, lower=do_lower_case)` is applied at tokenization time
(`SentencePieceTokenizer.preprocess`, or in-graph for serving), which gives the
same ids as the original applying it in the processor.

Files are UTF-8 (a BOM is skipped: GLUE's MRPC files have one) and read as
tab-separated with no quoting, as GLUE distributes them. A row with fewer
columns than the task reads, or a label outside the task's label list, is an
error naming the file and line. QQP's known short rows in train/dev are
skipped and counted, as the original skips them.

`custom`: a user's own files `{train,dev,test}.{tsv,csv,txt,jsonl}` in `data_dir`
(`.txt` is read as TSV: ChnSentiCorp's `text<TAB>label` files; `.jsonl` holds one object
per line, the column flags naming its keys) with columns chosen by name (header row) or
0-based index; the label list is the sorted set of training labels (or
`regression=True`; `multi_label=True`: label sets, `multilabel.py`).

CLUE's JSON-lines tasks are in `albert_tf.tasks.classification.clue`; features and
their caches in `features.py`, metrics in `metrics.py` (their names are re-exported
here for old imports).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from absl import logging

from albert_tf import fileio
from albert_tf.option_fields import option
from albert_tf.errors import UserError
# Moved to features.py and metrics.py; re-exported for old imports.
from albert_tf.tasks.classification.features import (  # noqa: F401
    cache_identity, cache_path, convert_examples, dataset, feature_spec, pack_pair,
    prepare_features, serialize, truncate_seq_pair)
from albert_tf.tasks.classification.metrics import compute_metrics, per_example_loss  # noqa: F401

SPLITS = ("train", "dev", "test")


class GlueDataError(UserError, ValueError):
    """A GLUE input file is missing or has a malformed row (the message names file and line)."""


@dataclasses.dataclass
class InputExample:
    """One example: raw texts (text_b None for single-sentence tasks) and its label.

    `label` is a label string (classification), a float (regression) or None
    (test split). `source` is "file:line", for error messages. `example_id` is
    the example's id as its file gives it (CLUE's JSON `id`), for submissions.
    """

    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Optional[object] = None
    source: str = ""
    example_id: Optional[object] = None


@dataclasses.dataclass(frozen=True)
class SplitLayout:
    """Where the fields of one split are: file name and 0-based columns (-1 = last)."""

    file: str
    header: bool
    text_a: int
    text_b: Optional[int] = None
    label: Optional[int] = None     # None: the split has no labels (test)
    guid: Optional[int] = None      # None: guid = "{split}-{row index}", as the original


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One GLUE task as the original's processor reads it."""

    name: str
    directory: str
    splits: Dict[str, SplitLayout]
    labels: Optional[Tuple[str, ...]]   # None = regression (STS-B)
    metric: str                         # best-checkpoint key (the original's)
    extra_metrics: Tuple[str, ...] = ()
    skip_short_rows: bool = False       # QQP: the original skips rows it cannot index
    submission_name: Optional[str] = None  # GLUE leaderboard file name (without .tsv)
    multi_label: bool = False           # labels are sets (multilabel.py): sigmoid per label

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def is_pair(self) -> bool:
        return self.splits["dev"].text_b is not None


def _pair_task(name, directory, labels, guid=0, a=1, b=2, label=-1, test_a=1, test_b=2,
               files=("train.tsv", "dev.tsv", "test.tsv"), **kwargs):
    train, dev, test = files
    return TaskSpec(name, directory, {
        "train": SplitLayout(train, True, a, b, label, guid),
        "dev": SplitLayout(dev, True, a, b, label, guid),
        "test": SplitLayout(test, True, test_a, test_b, None, 0),
    }, labels, **kwargs)


_NLI = ("contradiction", "entailment", "neutral")
_BINARY = ("0", "1")
_ENTAIL = ("entailment", "not_entailment")

TASKS: Dict[str, TaskSpec] = {
    "cola": TaskSpec("cola", "CoLA", {
        "train": SplitLayout("train.tsv", False, 3, None, 1),
        "dev": SplitLayout("dev.tsv", False, 3, None, 1),
        "test": SplitLayout("test.tsv", True, 1, None, None, 0),
    }, _BINARY, "matthew_corr", ("matthew_corr",), submission_name="CoLA"),
    "sst-2": TaskSpec("sst-2", "SST-2", {
        "train": SplitLayout("train.tsv", True, 0, None, 1),
        "dev": SplitLayout("dev.tsv", True, 0, None, 1),
        "test": SplitLayout("test.tsv", True, 1, None, None, 0),
    }, _BINARY, "eval_accuracy", submission_name="SST-2"),
    "mrpc": TaskSpec("mrpc", "MRPC", {
        "train": SplitLayout("train.tsv", True, 3, 4, 0),
        "dev": SplitLayout("dev.tsv", True, 3, 4, 0),
        "test": SplitLayout("test.tsv", True, 3, 4, None, 0),
    }, _BINARY, "eval_accuracy", ("f1",), submission_name="MRPC"),
    "sts-b": _pair_task("sts-b", "STS-B", None, a=7, b=8, test_a=7, test_b=8,
                        metric="pearson", submission_name="STS-B"),
    "qqp": _pair_task("qqp", "QQP", _BINARY, a=3, b=4, label=5, metric="eval_accuracy",
                      extra_metrics=("f1",), skip_short_rows=True, submission_name="QQP"),
    "mnli": _pair_task("mnli", "MNLI", _NLI, a=8, b=9, test_a=8, test_b=9,
                       files=("train.tsv", "dev_matched.tsv", "test_matched.tsv"),
                       metric="eval_accuracy", submission_name="MNLI-m"),
    "mismnli": _pair_task("mismnli", "MNLI", _NLI, a=8, b=9, test_a=8, test_b=9,
                          files=("train.tsv", "dev_mismatched.tsv", "test_mismatched.tsv"),
                          metric="eval_accuracy", submission_name="MNLI-mm"),
    "qnli": _pair_task("qnli", "QNLI", _ENTAIL, metric="eval_accuracy", submission_name="QNLI"),
    "rte": _pair_task("rte", "RTE", _ENTAIL, metric="eval_accuracy", submission_name="RTE"),
    "wnli": _pair_task("wnli", "WNLI", _BINARY, metric="eval_accuracy", submission_name="WNLI"),
}
CUSTOM_TASK = "custom"


# --- reading ------------------------------------------------------------------------------------


def read_utf8_text(path: str) -> str:
    """A whole UTF-8 file (a BOM is skipped); GlueDataError naming file:line if it is not UTF-8."""
    return fileio.read_utf8_text(path, GlueDataError)


def read_json_lines(path: str) -> Iterator[Tuple[int, dict]]:
    """(1-based line number, object) of each non-blank line of a UTF-8 JSON-lines file."""
    text = read_utf8_text(path)
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise GlueDataError(f"{path}:{number}: not a valid JSON line ({err.msg} at "
                                     f"column {err.colno})") from None
        if not isinstance(value, dict):
            raise GlueDataError(f"{path}:{number}: expected a JSON object, found "
                                     f"{type(value).__name__}")
        yield number, value


def read_rows(path: str, delimiter: str = "\t") -> Iterator[Tuple[int, List[str]]]:
    """(1-based line number, fields) of a UTF-8 (optional BOM) TSV or CSV file.

    TSV is read without quoting (GLUE's convention: quotes are text); CSV with
    the standard double-quote rules (`fileio.read_rows`, GlueDataError naming the file).
    """
    return fileio.read_rows(path, delimiter, GlueDataError)


def _field(row: List[str], column: int, where: str, task: str) -> str:
    try:
        return row[column]
    except IndexError:
        needed = column + 1 if column >= 0 else -column
        raise GlueDataError(f"{where}: expected at least {needed} tab-separated columns, found "
                            f"{len(row)} (task {task})") from None


def _normalise_label(label: str, do_lower_case: bool) -> str:
    from albert_tf.tokenization import preprocess_text
    return preprocess_text(label, lower=do_lower_case)


def task_dir(spec: TaskSpec, data_dir: str, split: str = "train") -> str:
    """The folder holding the task's files: `data_dir/<spec.directory>` when --data_dir is
    the GLUE root (the original's layout), else `data_dir` itself when it is the task's
    own folder; the first of the two holding any of the task's split files.

    GlueDataError naming --data_dir, the task and both places when neither does (`split`
    only chooses the file named first in that message).
    """
    import tensorflow as tf

    names = list(dict.fromkeys(layout.file for layout in spec.splits.values()))
    root_layout = os.path.join(data_dir, spec.directory)
    for directory, layout in ((root_layout, "the GLUE root"), (data_dir, "the task's folder")):
        if any(tf.io.gfile.exists(os.path.join(directory, name)) for name in names):
            logging.info("GLUE %s: reading the files in %s (--data_dir is %s)", spec.name,
                         directory, layout)
            return directory
    files = "{" + ",".join(names) + "}" if len(names) > 1 else names[0]
    raise GlueDataError(
        f"{os.path.join(root_layout, spec.splits[split].file)}: file not found (check "
        f"--data_dir and --task_name): no {files} of task {spec.name} in {root_layout} "
        f"(--data_dir as the GLUE root) or in {data_dir} (--data_dir as the task's folder)")


def read_examples(spec: TaskSpec, data_dir: str, split: str,
                  do_lower_case: bool = True) -> List[InputExample]:
    """The examples of `split` ("train", "dev" or "test") of a GLUE task; `data_dir` is
    the GLUE root or the task's own folder (`task_dir`).

    Labels are normalised like the original (`preprocess_text`) and must be in
    `spec.labels`; regression labels must parse as floats.
    """
    layout = spec.splits[split]
    path = os.path.join(task_dir(spec, data_dir, split), layout.file)
    needed = [c for c in (layout.text_a, layout.text_b, layout.label, layout.guid)
              if c is not None]
    min_columns = max(c + 1 if c >= 0 else -c for c in needed)
    examples, skipped = [], 0
    for index, (line, row) in enumerate(read_rows(path)):
        if layout.header and index == 0:
            continue
        where = f"{path}:{line}"
        if len(row) < min_columns and spec.skip_short_rows and layout.label is not None:
            skipped += 1
            continue
        guid = (_field(row, layout.guid, where, spec.name) if layout.guid is not None
                else f"{split}-{index}")
        text_a = _field(row, layout.text_a, where, spec.name)
        text_b = (_field(row, layout.text_b, where, spec.name)
                  if layout.text_b is not None else None)
        label = None
        if layout.label is not None:
            raw = _field(row, layout.label, where, spec.name)
            label = _parse_label(raw, spec.labels, do_lower_case, where, spec.name)
        examples.append(InputExample(guid, text_a, text_b, label, where))
    if skipped:
        logging.warning("%s: skipped %d rows with fewer than %d columns (as the original does "
                        "for %s)", path, skipped, min_columns, spec.name)
    logging.info("read %d %s examples from %s", len(examples), split, path)
    return examples


def _parse_label(raw: str, labels: Optional[Sequence[str]], do_lower_case: bool, where: str,
                 task: str):
    if labels is None:
        try:
            return float(raw)
        except ValueError:
            raise GlueDataError(f"{where}: regression label {raw!r} is not a number "
                                f"(task {task})") from None
    label = _normalise_label(raw, do_lower_case)
    if label not in labels:
        raise GlueDataError(f"{where}: label {raw!r} is not one of {', '.join(labels)} "
                            f"(task {task})")
    return label


# --- the generic TSV/CSV task -------------------------------------------------------------------


@dataclasses.dataclass
class CustomTaskOptions:
    """A user's own task: files `{train,dev,test}.tsv` (or `.csv`, or `.txt` read as TSV)
    in data_dir.

    Columns are header names (with `has_header`) or 0-based indices given as
    strings ("0", "3"). text_b_column None = single-sentence task; the test
    file may lack the label column. `regression` reads float labels.
    """

    text_a_column: str = option(help="custom task: column of the first text (header name "
                                     "or 0-based index).")
    label_column: str = option(help="custom task: column of the label.")
    text_b_column: Optional[str] = option(None, help="custom task: column of the second "
                                                     "text, for sentence pairs.")
    id_column: Optional[str] = option(None, help="custom task: column of the example id "
                                                 "written to the predictions (default: row "
                                                 "number).")
    has_header: bool = option(True, help="custom task: the files start with a header row.")
    regression: bool = option(False, help="custom task: float labels, squared-error loss.")
    multi_label: bool = option(False, help="custom task: each label cell holds a set of "
                                           "labels (comma-separated names, or a JSON list in "
                                           ".jsonl files; empty: none); a sigmoid per label "
                                           "with binary cross-entropy.")

    def __post_init__(self) -> None:
        if self.regression and self.multi_label:
            raise GlueDataError("--regression and --multi_label exclude each other")


CUSTOM_EXTENSIONS = ("tsv", "csv", "txt", "jsonl")


def custom_file(data_dir: str, split: str) -> str:
    """data_dir/{split}.tsv, .csv, .txt or .jsonl (error unless exactly one exists)."""
    import tensorflow as tf

    found = [os.path.join(data_dir, f"{split}.{ext}") for ext in CUSTOM_EXTENSIONS
             if tf.io.gfile.exists(os.path.join(data_dir, f"{split}.{ext}"))]
    if len(found) != 1:
        raise GlueDataError(f"{data_dir}: expected exactly one of {split}.tsv, {split}.csv "
                            f"and {split}.jsonl (or {split}.txt, read as TSV) for "
                            f"--task_name=custom, found {len(found)}")
    return found[0]


def _column_index(column: Optional[str], header: Optional[List[str]], path: str,
                  flag: str) -> Optional[int]:
    if column is None:
        return None
    if column.lstrip("-").isdigit():
        return int(column)
    if header is None:
        raise GlueDataError(f"--{flag}={column!r} names a column but {path} is read without a "
                            "header (--has_header=false); give a 0-based index")
    if column not in header:
        raise GlueDataError(f"--{flag}={column!r}: no such column in the header of {path} "
                            f"(columns: {', '.join(header)})")
    return header.index(column)


def read_custom_examples(options: CustomTaskOptions, data_dir: str, split: str,
                         labels: Optional[Sequence[str]] = None,
                         do_lower_case: bool = True) -> List[InputExample]:
    """Examples of a user's TSV/CSV/JSON-lines split; `labels` None accepts any label."""
    path = custom_file(data_dir, split)
    if path.endswith(".jsonl"):
        examples = _read_custom_json(options, path, split, labels, do_lower_case)
    else:
        examples = _read_custom_table(options, path, split, labels, do_lower_case)
    logging.info("read %d %s examples from %s", len(examples), split, path)
    return examples


def _read_custom_table(options: CustomTaskOptions, path: str, split: str,
                       labels: Optional[Sequence[str]], do_lower_case: bool
                       ) -> List[InputExample]:
    delimiter = "," if path.endswith(".csv") else "\t"
    rows = read_rows(path, delimiter)
    header = None
    if options.has_header:
        first = next(rows, None)
        if first is None:
            raise GlueDataError(f"{path}: empty file")
        header = first[1]
    flags = ["text_a_column", "text_b_column", "id_column"]
    if split != "test" or header is None or options.label_column in header \
            or options.label_column.lstrip("-").isdigit():
        flags.append("label_column")  # the test file may lack the label column
    columns = {flag: _column_index(getattr(options, flag), header, path, flag)
               for flag in flags}
    label_column = columns.get("label_column")
    examples = []
    for index, (line, row) in enumerate(rows):
        where = f"{path}:{line}"
        if header is not None and len(row) != len(header):
            raise GlueDataError(f"{where}: {len(row)} columns, the header has {len(header)}")
        text_a = _field(row, columns["text_a_column"], where, CUSTOM_TASK)
        text_b = (None if columns["text_b_column"] is None
                  else _field(row, columns["text_b_column"], where, CUSTOM_TASK))
        guid = (f"{split}-{index}" if columns["id_column"] is None
                else _field(row, columns["id_column"], where, CUSTOM_TASK))
        label = None
        if label_column is not None and (split != "test" or len(row) > label_column):
            label = _custom_label(_field(row, label_column, where, CUSTOM_TASK), options,
                                  labels, do_lower_case, where)
        examples.append(InputExample(guid, text_a, text_b, label, where))
    return examples


def _read_custom_json(options: CustomTaskOptions, path: str, split: str,
                      labels: Optional[Sequence[str]], do_lower_case: bool
                      ) -> List[InputExample]:
    """JSON lines: the column flags name keys; texts are strings, a label a string, a
    number (--regression) or a list of names (--multi_label)."""
    examples = []
    for index, (line, row) in enumerate(read_json_lines(path)):
        where = f"{path}:{line}"

        def text(flag, required=True):
            key = getattr(options, flag)
            if key is None or (key not in row and not required):
                return None
            if not isinstance(row.get(key), str):
                raise GlueDataError(f"{where}: --{flag}={key!r}: expected a string field "
                                    f"{key!r}, found {_json_kind(row.get(key), key in row)}")
            return row[key]

        text_a, text_b = text("text_a_column"), text("text_b_column")
        guid = f"{split}-{index}"
        if options.id_column is not None:
            if options.id_column not in row:
                raise GlueDataError(f"{where}: no id field {options.id_column!r} "
                                    "(--id_column)")
            guid = str(row[options.id_column])
        label = None
        if options.label_column in row:
            raw = row[options.label_column]
            if not options.multi_label:
                raw = str(raw) if isinstance(raw, (str, int, float)) else raw
            label = _custom_label(raw, options, labels, do_lower_case, where)
        elif split != "test":
            raise GlueDataError(f"{where}: no label field {options.label_column!r} "
                                "(--label_column)")
        examples.append(InputExample(guid, text_a, text_b, label, where))
    return examples


def _json_kind(value, present: bool) -> str:
    return type(value).__name__ if present else "no such field"


def _custom_label(raw, options: CustomTaskOptions, labels: Optional[Sequence[str]],
                  do_lower_case: bool, where: str):
    """A custom cell's label: a float (--regression), a tuple of names (--multi_label) or
    a name (of `labels`, when given)."""
    if options.multi_label:
        return parse_label_set(raw, labels, where)
    if not isinstance(raw, str):
        raise GlueDataError(f"{where}: expected a label string, found {raw!r} (a list of "
                            "labels needs --multi_label)")
    if options.regression:
        return _parse_label(raw, None, do_lower_case, where, CUSTOM_TASK)
    label = raw.strip()
    if labels is not None and label not in labels:
        raise GlueDataError(f"{where}: label {raw!r} is not one of "
                            f"{', '.join(labels)} (labels of the training data)")
    return label


def parse_label_set(value, labels: Optional[Sequence[str]], where: str) -> Tuple[str, ...]:
    """A custom file's label cell: comma-separated names (a string) or a JSON list of
    names; empty: no label. With `labels`, a name outside them is a GlueDataError naming
    `where`; the names come back in `labels`' order (else sorted), each once."""
    if isinstance(value, str):
        names = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list) and all(isinstance(name, str) and name.strip()
                                          for name in value):
        names = [name.strip() for name in value]
    else:
        raise GlueDataError(f"{where}: a multi-label cell is comma-separated names or "
                            f"a JSON list of non-empty strings, found {value!r}")
    if labels is None:
        return tuple(sorted(set(names)))
    unknown = [name for name in names if name not in labels]
    if unknown:
        raise GlueDataError(f"{where}: label {unknown[0]!r} is not one of "
                                 f"{', '.join(labels)} (labels of the training data)")
    return tuple(name for name in labels if name in set(names))


def custom_spec(options: CustomTaskOptions, labels: Optional[Sequence[str]]) -> TaskSpec:
    """A TaskSpec for a custom task with the given label list (None for regression)."""
    layout = SplitLayout("", options.has_header, 0, 1 if options.text_b_column else None, 0)
    metric = ("pearson" if options.regression
              else "macro_f1" if options.multi_label else "eval_accuracy")
    return TaskSpec(CUSTOM_TASK, "", {s: layout for s in SPLITS},
                    None if options.regression else tuple(labels), metric,
                    multi_label=options.multi_label)


def custom_labels(options: CustomTaskOptions, data_dir: str) -> List[str]:
    """Sorted distinct labels of the training file (the dev file when there is no train);
    with --multi_label, every name of its label sets."""
    for split in ("train", "dev"):
        try:
            custom_file(data_dir, split)
        except GlueDataError:
            continue
        examples = read_custom_examples(options, data_dir, split)
        if options.multi_label:
            found = {name for e in examples for name in (e.label or ())}
        else:
            found = {e.label for e in examples}
        found.discard(None)
        if len(found) < 2:
            raise GlueDataError(f"{custom_file(data_dir, split)}: found {len(found)} distinct "
                                "labels; classification needs at least 2 (or --regression)")
        return sorted(found)
    raise GlueDataError(f"{data_dir}: no train or dev file to take the label list from")

