"""CLUE classification tasks (AFQMC, TNEWS, IFLYTEK, OCNLI, CMNLI, CSL): readers and submissions.

Each task is read as CLUE's own baseline processors read it (CLUEbenchmark/CLUE,
`baselines/models/classifier_utils.py`): JSON-lines files `train.json`,
`dev.json`, `test.json` (OCNLI ships `train.50k.json`, used when there is no
`train.json`), one object per line, with these fields and label lists:

  task     text_a              text_b      labels (order = class index)
  afqmc    sentence1           sentence2   "0", "1"
  tnews    sentence            -           "100".."116" without 105 and 111 (15)
  iflytek  sentence            -           "0".."118" (119)
  ocnli    sentence1           sentence2   contradiction, entailment, neutral
  cmnli    sentence1           sentence2   contradiction, entailment, neutral
  csl      " ".join(keyword)   abst        "0", "1"

CSL's text_a is its keyword list joined with single spaces, as CLUE's baseline
joins it (`" ".join(line['keyword'])`); the WordPiece tokenizer splits on the
spaces, so the joined keywords tokenize like the keywords one by one.
Labels may be JSON strings or integers (FewCLUE's TNEWS has integers); both
are read as their string. TNEWS and IFLYTEK take their label list from
`labels.json` in the task's directory when it is there (CLUE ships one),
otherwise the baseline's fixed list above. OCNLI and CMNLI rows labelled "-"
(no majority label) are skipped and counted, as the baseline skips them.

A task's files are in `data_dir/<task>/`, `data_dir/<task>_public/` (the
names of CLUE's downloads) or `data_dir` itself: the first of these that holds
any of the task's files is used, and logged. Test examples take their id from
the `id` field, or the line's 0-based index among the file's records when
there is none (as CLUE's baseline numbers its submissions); the id goes into
the submission file `<task>_predict.json` (`write_submission`).

Examples are `glue.InputExample`s and the task a `glue.TaskSpec`, so features,
caches, training, evaluation (accuracy) and export are GLUE's.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging

from albert_tf import fileio
from albert_tf.tasks.classification import glue

_NLI = ("contradiction", "entailment", "neutral")
_BINARY = ("0", "1")
NO_LABEL = "-"


@dataclasses.dataclass(frozen=True)
class ClueDataSet:
    """Where one CLUE task's texts and label are in its JSON objects.

    `text_a` / `text_b`: field names (text_b None: single sentence);
    `keywords_a`: text_a is a list of strings joined with spaces (CSL);
    `labels`: CLUE's baseline label list (class order); `labels_file`: read
    `labels.json` when present; `skip_unlabelled`: skip rows labelled "-";
    `train_files`: candidate names of the training file, first found wins.
    """

    name: str
    text_a: str
    text_b: Optional[str]
    labels: Tuple[str, ...]
    keywords_a: bool = False
    labels_file: bool = False
    skip_unlabelled: bool = False
    train_files: Tuple[str, ...] = ("train.json",)

    def files(self, split: str) -> Tuple[str, ...]:
        return self.train_files if split == "train" else (f"{split}.json",)

    @property
    def submission_file(self) -> str:
        return f"{self.name}_predict.json"

    def write_submission(self, output_dir: str, examples: Sequence[glue.InputExample],
                         predicted: Sequence[str]) -> str:
        """The module's `write_submission` for this task: the job's extra prediction file."""
        return write_submission(output_dir, self, examples, predicted)


TASKS: Dict[str, ClueDataSet] = {
    "afqmc": ClueDataSet("afqmc", "sentence1", "sentence2", _BINARY),
    "tnews": ClueDataSet("tnews", "sentence", None,
                      tuple(str(100 + i) for i in range(17) if i not in (5, 11)),
                      labels_file=True),
    "iflytek": ClueDataSet("iflytek", "sentence", None, tuple(str(i) for i in range(119)),
                        labels_file=True),
    "ocnli": ClueDataSet("ocnli", "sentence1", "sentence2", _NLI, skip_unlabelled=True,
                      train_files=("train.json", "train.50k.json")),
    "cmnli": ClueDataSet("cmnli", "sentence1", "sentence2", _NLI, skip_unlabelled=True),
    "csl": ClueDataSet("csl", "keyword", "abst", _BINARY, keywords_a=True),
}


def _exists(path: str) -> bool:
    import tensorflow as tf  # gfile: local paths and gs:// alike
    return tf.io.gfile.exists(path)


def task_dir(task: ClueDataSet, data_dir: str) -> str:
    """The directory holding the task's files: data_dir/<task>, data_dir/<task>_public
    or data_dir (the first with any train/dev/test file)."""
    candidates = [os.path.join(data_dir, task.name), os.path.join(data_dir, f"{task.name}_public"),
                  data_dir]
    names = [n for split in glue.SPLITS for n in task.files(split)]
    for directory in candidates:
        if any(_exists(os.path.join(directory, n)) for n in names):
            logging.info("CLUE %s: reading the files in %s", task.name, directory)
            return directory
    raise glue.GlueDataError(f"no {' / '.join(names)} for task {task.name} in "
                             f"{', '.join(candidates)} (check --data_dir and --task_name)")


def split_file(task: ClueDataSet, directory: str, split: str) -> str:
    """Path of `split`'s file in `directory` (error naming the names tried)."""
    for name in task.files(split):
        path = os.path.join(directory, name)
        if _exists(path):
            return path
    raise glue.GlueDataError(f"{os.path.join(directory, task.files(split)[0])}: file not found "
                             f"(the {split} split of {task.name}; check --data_dir)")


read_json_lines = glue.read_json_lines  # moved to glue.py (custom .jsonl files read it too)


def task_labels(task: ClueDataSet, directory: str) -> Tuple[Tuple[str, ...], Dict[str, str]]:
    """(labels in class order, label -> description) of a task.

    `labels.json` (lines `{"label": ..., "label_desc"|"label_des": ...}`) in
    `directory` when the task has one and it is there; else CLUE's fixed list
    (no descriptions).
    """
    path = os.path.join(directory, "labels.json")
    if not task.labels_file or not _exists(path):
        return task.labels, {}
    labels, descriptions = [], {}
    for number, row in read_json_lines(path):
        if "label" not in row:
            raise glue.GlueDataError(f"{path}:{number}: no field 'label'")
        label = _label_string(row["label"], f"{path}:{number}")
        if label in descriptions:
            raise glue.GlueDataError(f"{path}:{number}: label {label!r} is listed twice")
        labels.append(label)
        descriptions[label] = str(row.get("label_desc", row.get("label_des", "")))
    if len(labels) < 2:
        raise glue.GlueDataError(f"{path}: {len(labels)} labels; classification needs 2 or more")
    if set(labels) != set(task.labels):
        logging.warning("%s: its %d labels differ from CLUE's %d %s labels", path, len(labels),
                        len(task.labels), task.name)
    logging.info("CLUE %s: %d labels from %s", task.name, len(labels), path)
    return tuple(labels), descriptions


def _label_string(value, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise glue.GlueDataError(f"{where}: label {value!r} is neither a string nor an integer")
    return str(value)


def _text(row: dict, field: str, where: str, task: ClueDataSet) -> str:
    if field not in row:
        raise glue.GlueDataError(f"{where}: no field {field!r} (task {task.name}; the line has "
                                 f"{', '.join(sorted(row))})")
    value = row[field]
    if task.keywords_a and field == task.text_a:
        if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
            raise glue.GlueDataError(f"{where}: {field!r} must be a list of strings "
                                     f"(task {task.name})")
        return " ".join(value)
    if not isinstance(value, str):
        raise glue.GlueDataError(f"{where}: {field!r} must be a string, found "
                                 f"{type(value).__name__} (task {task.name})")
    return value


def read_examples(task: ClueDataSet, directory: str, split: str,
                  labels: Optional[Sequence[str]] = None) -> List[glue.InputExample]:
    """The examples of `split` of a CLUE task from the files in `directory` (`task_dir`).

    guid: "{split}-{index}" for train/dev (the baseline's), the `id` (else the
    record index) for test; `example_id` keeps the id's JSON value for the
    submission. `labels` defaults to the task's fixed list; the test split's
    labels, if any, are not read.
    """
    labels = tuple(labels or task.labels)
    allowed = set(labels)
    path = split_file(task, directory, split)
    examples, skipped = [], 0
    for index, (number, row) in enumerate(read_json_lines(path)):
        where = f"{path}:{number}"
        text_a = _text(row, task.text_a, where, task)
        text_b = _text(row, task.text_b, where, task) if task.text_b else None
        if split == "test":
            example_id = row.get("id", index)
            examples.append(glue.InputExample(str(example_id), text_a, text_b, None, where,
                                              example_id))
            continue
        if "label" not in row:
            raise glue.GlueDataError(f"{where}: no field 'label' (task {task.name}, {split} "
                                     "split)")
        label = _label_string(row["label"], where)
        if label == NO_LABEL and task.skip_unlabelled:
            skipped += 1
            continue
        if label not in allowed:
            raise glue.GlueDataError(f"{where}: label {label!r} is not one of "
                                     f"{', '.join(labels)} (task {task.name})")
        examples.append(glue.InputExample(f"{split}-{index}", text_a, text_b, label, where,
                                          row.get("id")))
    if skipped:
        logging.warning("%s: skipped %d rows labelled %r (no majority label), as CLUE's "
                        "baseline does", path, skipped, NO_LABEL)
    logging.info("read %d %s examples from %s", len(examples), split, path)
    return examples


def spec(task: ClueDataSet, labels: Sequence[str]) -> glue.TaskSpec:
    """The GLUE TaskSpec of a CLUE task: classification over `labels`, best by accuracy."""
    layout = {split: glue.SplitLayout(task.files(split)[0], False, 0,
                                      1 if task.text_b else None, 0) for split in glue.SPLITS}
    return glue.TaskSpec(task.name, "", layout, tuple(labels), "eval_accuracy")


def write_submission(output_dir: str, task: ClueDataSet, examples: Sequence[glue.InputExample],
                     predicted: Sequence[str]) -> str:
    """Writes `<task>_predict.json` atomically: one `{"id": id, "label": "label"}` per test
    example, in file order, the id as the test file has it. Returns the file name."""
    if len(examples) != len(predicted):
        raise ValueError(f"{len(examples)} examples but {len(predicted)} predictions")
    lines = [json.dumps({"id": e.example_id if e.example_id is not None else e.guid,
                         "label": str(label)}, ensure_ascii=False) + "\n"
             for e, label in zip(examples, predicted)]
    fileio.atomic_write_text(os.path.join(output_dir, task.submission_file), "".join(lines))
    return task.submission_file


ClueTask = ClueDataSet  # the old name, for old imports
