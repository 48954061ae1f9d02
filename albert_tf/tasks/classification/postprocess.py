"""Classifier outputs -> predictions, the prediction files, and reading them back.

The job's prediction files (in output_dir):

  test_results.tsv     class probabilities per test example (the regression score for STS-B)
  submit_results.tsv   `index<TAB>prediction` with a header row, as the original
  {TASK}.tsv           the same, under the GLUE leaderboard's file name (e.g. MNLI-m.tsv)
  {task}_predict.json  CLUE tasks: the CLUE submission file (`clue.write_submission`)

`read_predictions` / `predicted_values` read a submit_results.tsv back for
`python -m albert_tf.tasks.classification evaluate`.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf import fileio
from albert_tf.errors import UserValueError
from albert_tf.tasks.classification import glue

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


def predicted_values(spec: glue.TaskSpec, examples: Sequence[glue.InputExample],
                     predictions: Dict[str, Tuple[int, str]], path: str) -> np.ndarray:
    """The predictions (`read_predictions`) in the examples' order, as the metrics take
    them: label indices [N] int64 (float64 scores, regression). UserValueError when the
    indices are not the examples' guids, or a prediction is not a label (a number)."""
    guids = [e.guid for e in examples]
    known = set(guids)
    unknown = [index for index in predictions if index not in known]
    missing = [guid for guid in guids if guid not in predictions]
    if unknown or missing:
        raise UserValueError(
            f"{path}: its indices do not match the {len(guids)} examples of {spec.name}: "
            f"{len(unknown)} unknown (first {unknown[:1]}), {len(missing)} without a "
            f"prediction (first {missing[:1]})")
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
