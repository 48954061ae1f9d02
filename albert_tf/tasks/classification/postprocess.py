"""Classifier outputs -> predictions, the prediction files, and reading them back.

The job's prediction files (in output_dir):

  test_results.tsv     class probabilities per test example (the regression score for STS-B)
  submit_results.tsv   `index<TAB>prediction` with a header row, as the original
  {TASK}.tsv           the same, under the GLUE leaderboard's file name (e.g. MNLI-m.tsv)
  {task}_predict.json  CLUE tasks: the CLUE submission file (`clue.write_submission`)

and for a multi-label task instead of the .tsv submissions:

  predictions.jsonl      one `{"id", "labels", "probabilities"}` line per test example: the
                         labels above their thresholds (in label order), each label's sigmoid
  label_thresholds.json  the decision thresholds (`write_thresholds`)
  test_metrics.json      the test metrics, when the test file is labelled (GoEmotions')

`read_predictions` / `predicted_values` read a submit_results.tsv back, and
`read_label_sets` a predictions.jsonl, for `python -m albert_tf.tasks.classification
evaluate`.
"""
from __future__ import annotations

import json
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf import fileio
from albert_tf.errors import UserValueError
from albert_tf.tasks.classification import clue, glue, metrics, multilabel

HEADER = ("index", "prediction")

# (output_dir, test examples, predicted labels) -> the file name written.
SubmissionWriter = Callable[[str, Sequence[glue.InputExample], Sequence[str]], str]


def probabilities_and_labels(spec: glue.TaskSpec, logits: np.ndarray
                             ) -> Tuple[np.ndarray, List[str]]:
    """(probabilities [N, K], softmax of the logits [N, K], or the score [N, 1] of a
    regression; predicted labels [N]: the argmax's label, or `str(float(score))`)."""
    if spec.is_regression:
        return logits[:, :1], [str(float(v)) for v in logits[:, 0]]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    return probabilities, [spec.labels[i] for i in np.argmax(logits, axis=-1)]


def write_predictions(output_dir: str, spec: glue.TaskSpec,
                      examples: List[glue.InputExample], logits: np.ndarray,
                      submission: Optional[SubmissionWriter] = None, *,
                      clue_task=None) -> Dict:
    """test_results.tsv, submit_results.tsv, the GLUE `{TASK}.tsv` (with
    `spec.submission_name`) and the data set's own `submission` file (CLUE's
    `{task}_predict.json`; a `clue.ClueDataSet`, the older argument, writes it too, also
    as the older keyword `clue_task`); returns {"probabilities", "labels", "files": the
    names written}."""
    submission = submission if submission is not None else clue_task
    probabilities, labels = probabilities_and_labels(spec, logits)
    fileio.atomic_write_text(os.path.join(output_dir, "test_results.tsv"), "".join(
        "\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
    text = "\t".join(HEADER) + "\n" + "".join(
        f"{e.guid}\t{label}\n" for e, label in zip(examples, labels))
    written = ["test_results.tsv", "submit_results.tsv"]
    fileio.atomic_write_text(os.path.join(output_dir, "submit_results.tsv"), text)
    if spec.submission_name:
        fileio.atomic_write_text(os.path.join(output_dir, f"{spec.submission_name}.tsv"), text)
        written.append(f"{spec.submission_name}.tsv")
    if submission is not None:
        written.append(getattr(submission, "write_submission", submission)(
            output_dir, examples, labels))
    logging.info("wrote predictions for %d test examples: %s", len(examples),
                 ", ".join(written))
    return {"probabilities": probabilities, "labels": labels, "files": written}


def read_predictions(path: str) -> Dict[str, Tuple[int, str]]:
    """{index: (line number, prediction)} of a submit_results.tsv (`index<TAB>prediction`,
    header first); UserValueError naming file:line for a bad header, a row without
    exactly two fields, or an index given twice."""
    predictions: Dict[str, Tuple[int, str]] = {}
    for position, (line, row) in enumerate(glue.read_rows(path)):
        if position == 0:
            if tuple(row) != HEADER:
                raise UserValueError(f"{path}:{line}: expected the header "
                                     f"'index<TAB>prediction', found {chr(9).join(row)!r}")
            continue
        if len(row) != 2:
            raise UserValueError(f"{path}:{line}: expected 2 tab-separated fields (index, "
                                 f"prediction), found {len(row)}")
        index, prediction = row
        if index in predictions:
            raise UserValueError(f"{path}:{line}: index {index!r} is given twice (first at "
                                 f"line {predictions[index][0]})")
        predictions[index] = (line, prediction)
    return predictions


def _matching_ids(path: str, what: str, spec: glue.TaskSpec,
                  examples: Sequence[glue.InputExample], given) -> List[str]:
    """The examples' guids, in order; UserValueError when the ids `given` by a predictions
    file (its `what`: "indices", "ids") are not exactly them."""
    guids = [e.guid for e in examples]
    known = set(guids)
    unknown = [guid for guid in given if guid not in known]
    missing = [guid for guid in guids if guid not in given]
    if unknown or missing:
        raise UserValueError(
            f"{path}: its {what} do not match the {len(guids)} examples of {spec.name}: "
            f"{len(unknown)} unknown (first {unknown[:1]}), {len(missing)} without a "
            f"prediction (first {missing[:1]})")
    return guids


def predicted_values(spec: glue.TaskSpec, examples: Sequence[glue.InputExample],
                     predictions: Dict[str, Tuple[int, str]], path: str) -> np.ndarray:
    """The predictions (`read_predictions`) in the examples' order, as the metrics take
    them: label indices [N] int64 (float64 scores, regression). UserValueError when the
    indices are not the examples' guids, or a prediction is not a label (a number)."""
    guids = _matching_ids(path, "indices", spec, examples, predictions)
    index = {label: i for i, label in enumerate(spec.labels or ())}
    values = []
    for guid in guids:
        line, prediction = predictions[guid]
        try:
            values.append(float(prediction) if spec.is_regression else index[prediction])
        except (KeyError, ValueError):
            expected = ("a number" if spec.is_regression
                        else f"one of {', '.join(spec.labels)}")
            raise UserValueError(f"{path}:{line}: prediction {prediction!r} is not {expected} "
                                 f"(task {spec.name})") from None
    return np.array(values, np.float64 if spec.is_regression else np.int64)


# --- multi-label --------------------------------------------------------------------------------

PREDICTIONS_FILE = "predictions.jsonl"
THRESHOLDS_FILE = "label_thresholds.json"
TEST_METRICS_FILE = "test_metrics.json"


def write_multilabel_predictions(output_dir: str, spec: glue.TaskSpec,
                                 examples: Sequence[glue.InputExample], logits: np.ndarray,
                                 thresholds: np.ndarray) -> Dict:
    """predictions.jsonl (one `{"id", "labels", "probabilities"}` line per example, in
    order; `probabilities` maps every label to its sigmoid) and test_results.tsv (the
    probabilities, a row per example); returns {"probabilities" [N, K], "labels": the
    label lists, "files"}. UserValueError when two examples share an id (the file could
    not be scored)."""
    seen: Dict[str, str] = {}
    for example in examples:
        if example.guid in seen:
            raise UserValueError(f"{example.source}: id {example.guid!r} is given twice "
                                 f"(first at {seen[example.guid]}); predictions.jsonl needs "
                                 "one id per example")
        seen[example.guid] = example.source
    probabilities = multilabel.sigmoid(logits)
    chosen = metrics.above_thresholds(logits, thresholds)
    label_lists = [[spec.labels[k] for k in np.flatnonzero(row)] for row in chosen]
    lines = [json.dumps({"id": e.guid, "labels": names,
                         "probabilities": {label: float(p)
                                           for label, p in zip(spec.labels, row)}},
                        ensure_ascii=False) + "\n"
             for e, names, row in zip(examples, label_lists, probabilities)]
    fileio.atomic_write_text(os.path.join(output_dir, PREDICTIONS_FILE), "".join(lines))
    fileio.atomic_write_text(os.path.join(output_dir, "test_results.tsv"), "".join(
        "\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
    logging.info("wrote predictions for %d test examples: %s, test_results.tsv",
                 len(examples), PREDICTIONS_FILE)
    return {"probabilities": probabilities, "labels": label_lists,
            "files": [PREDICTIONS_FILE, "test_results.tsv"]}


def write_thresholds(output_dir: str, labels: Sequence[str], thresholds: np.ndarray,
                     source: str, dev_examples: Optional[int] = None,
                     at_half: Optional[float] = None, tuned: Optional[float] = None) -> Dict:
    """label_thresholds.json: {"thresholds": {label: threshold}, "source": where they come
    from, and when known the dev macro-F1 at 0.5 and with them}; returns what it wrote."""
    record = {"thresholds": {label: float(t) for label, t in zip(labels, thresholds)},
              "source": source,
              "rule": "a label is predicted when its probability is above its threshold"}
    if dev_examples is not None:
        record["dev_examples"] = dev_examples
    if at_half is not None and tuned is not None:
        record.update({"dev_macro_f1_at_0.5": at_half, "dev_macro_f1_tuned": tuned})
    fileio.atomic_write_text(os.path.join(output_dir, THRESHOLDS_FILE),
                             json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return record


def write_test_metrics(output_dir: str, results: Dict[str, float], num_examples: int) -> Dict:
    """test_metrics.json: the metrics of the predictions on a labelled test split."""
    results = dict(results, eval_examples=num_examples)
    fileio.atomic_write_text(os.path.join(output_dir, TEST_METRICS_FILE),
                             json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    logging.info("test metrics (%d examples): %s (per label: %s)", num_examples, ", ".join(
        f"{key} {value:.4f}" for key, value in results.items()
        if "/" not in key and key != "eval_examples"), TEST_METRICS_FILE)
    return results


def remove_test_metrics(output_dir: str, why: str) -> None:
    """Removes an earlier run's test_metrics.json, which these predictions do not match."""
    path = os.path.join(output_dir, TEST_METRICS_FILE)
    if os.path.exists(path):
        os.remove(path)
        logging.info("removed the earlier %s: %s", TEST_METRICS_FILE, why)
    else:
        logging.info("no test metrics: %s", why)


def read_label_sets(path: str, spec: glue.TaskSpec,
                    examples: Sequence[glue.InputExample]) -> np.ndarray:
    """A predictions.jsonl as int64 multi-hot [N, K] in the examples' order. UserValueError
    naming file:line for a line that is not a JSON object with a string `id` and a
    `labels` list of the task's label names, an id given twice, or ids that are not the
    examples' guids."""
    index = {label: k for k, label in enumerate(spec.labels)}
    rows: Dict[str, np.ndarray] = {}
    lines: Dict[str, int] = {}
    try:
        objects = list(clue.read_json_lines(path))
    except glue.GlueDataError as err:
        raise UserValueError(str(err)) from None
    for line, value in objects:
        where = f"{path}:{line}"
        guid, names = value.get("id"), value.get("labels")
        if not isinstance(guid, (str, int)) or isinstance(guid, bool):
            raise UserValueError(f"{where}: expected an \"id\" (a string), found {guid!r}")
        guid = str(guid)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UserValueError(f"{where}: expected \"labels\": a list of label names, "
                                 f"found {names!r}")
        unknown = [name for name in names if name not in index]
        if unknown:
            raise UserValueError(f"{where}: label {unknown[0]!r} is not one of the "
                                 f"{len(index)} labels of {spec.name}")
        if guid in rows:
            raise UserValueError(f"{where}: id {guid!r} is given twice (first at line "
                                 f"{lines[guid]})")
        row = np.zeros([len(index)], np.int64)
        row[[index[name] for name in names]] = 1
        rows[guid], lines[guid] = row, line
    guids = _matching_ids(path, "ids", spec, examples, rows)
    return np.stack([rows[guid] for guid in guids]) if guids else \
        np.zeros([0, len(index)], np.int64)
