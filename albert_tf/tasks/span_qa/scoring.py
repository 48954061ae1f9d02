"""A predictions file scored against a SQuAD-format data file: what
`python -m albert_tf.tasks.span_qa evaluate` prints (its docstring describes the output).

`evaluate_files` reads both files (errors naming the flag and the file), then scores with
the official SQuAD v1.1 / v2.0 metrics (`metrics`) or the official CMRC 2018 metric
(`cmrc_metrics`).
"""
from __future__ import annotations

import json
from typing import Dict, Optional

from albert_tf.errors import UserError, UserFileNotFoundError, UserValueError
from albert_tf.tasks.span_qa import cmrc_metrics
from albert_tf.tasks.span_qa.data import SquadFormatError, load_squad_json
from albert_tf.tasks.span_qa.metrics import evaluate_v1, evaluate_v2, is_v2_dataset


def _load_json_object(path: str, flag: str) -> Dict:
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path) as handle:
            value = json.load(handle)
    except tf.errors.NotFoundError as err:
        raise UserFileNotFoundError(f"{flag} {path}: no such file") from err
    except tf.errors.FailedPreconditionError as err:  # e.g. a directory
        raise UserFileNotFoundError(f"{flag} {path}: not a readable file ({err.message})") \
            from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SquadFormatError(f"{flag} {path}: not valid JSON ({err})") from err
    if not isinstance(value, dict):
        raise SquadFormatError(f"{flag} {path}: expected a JSON object {{question id: ...}}")
    return value


METRICS = ("squad", "cmrc2018")


def evaluate_files(data_file: str, prediction_file: str, na_prob_file: Optional[str] = None,
                   na_prob_thresh: float = 1.0, version: Optional[int] = None,
                   metric: str = "squad") -> Dict:
    """Scores a predictions file against a SQuAD data file: the metrics' dict (see the
    module docstring), with `missing` (the ids of the questions without a prediction)."""
    if metric not in METRICS:
        raise UserValueError(f"--metric {metric!r}: expected one of {', '.join(METRICS)}")
    if metric == "cmrc2018" and (na_prob_file or version):
        raise UserValueError("--na_prob_file and --version are SQuAD options; --metric cmrc2018 "
                         "takes neither")
    try:
        dataset = load_squad_json(data_file)
    except UserError as err:  # its message names the file; say which flag gave it
        raise UserValueError(f"--data_file {err}") from err
    predictions = _load_json_object(prediction_file, "--prediction_file")
    for qid, text in predictions.items():
        if not isinstance(text, str):
            raise SquadFormatError(f"--prediction_file {prediction_file}: question id {qid}: "
                                   f"the prediction must be a string, got {text!r}")
    if metric == "cmrc2018":
        try:
            return cmrc_metrics.evaluate(dataset, predictions)
        except (KeyError, TypeError, AttributeError) as err:
            raise SquadFormatError(f"--data_file {data_file}: not SQuAD-format questions "
                                   f"({type(err).__name__}: {err})") from err
        except ValueError as err:
            raise SquadFormatError(f"--data_file {data_file}: {err}") from err
    version = version or (2 if is_v2_dataset(dataset) else 1)
    if version == 1:
        if na_prob_file:
            raise UserValueError("--na_prob_file is only meaningful for SQuAD v2.0 data "
                             f"({data_file} has no is_impossible questions; pass --version 2 "
                             "to score it as v2.0)")
        return evaluate_v1(dataset, predictions)
    na_probs = None
    if na_prob_file:
        na_probs = _load_json_object(na_prob_file, "--na_prob_file")
        for qid, value in na_probs.items():
            if not isinstance(value, (int, float)):
                raise SquadFormatError(f"--na_prob_file {na_prob_file}: question id {qid}: "
                                       f"expected a number, got {value!r}")
    return evaluate_v2(dataset, predictions, na_probs, na_prob_thresh)


# --- the job's scoring of its own predictions, one object per data set ----------------------------


class SquadV1Scoring:
    """SQuAD v1.1: the official v1.1 script; every question has an answer.

    `name`: the `--metric` value that picks this scoring (and that `evaluate --metric`
    takes). `answers(predictions, threshold)`: the answers written without gold answers;
    `score(dataset, predictions, threshold, data_file)`: (answers written, metrics), the
    metrics in percent without the lists of question ids.
    """

    name = "squad"

    def answers(self, predictions, threshold: Optional[float]) -> Dict[str, str]:
        return predictions.answers

    def score(self, dataset: list, predictions, threshold: Optional[float],
              data_file: str = "") -> tuple:
        metrics = evaluate_v1(dataset, predictions.answers)
        metrics.pop("missing", None)
        return predictions.answers, metrics


class SquadV2Scoring(SquadV1Scoring):
    """SQuAD v2.0: questions may have no answer ("" where null_odds > the threshold).

    With `threshold` None it is tuned on the scored set itself (the best-F1 threshold of
    null_odds.json, as the original: `null_threshold_source = "tuned_on_eval_set"`), else
    the given one is used (`"given"`); `best_*` come from null_odds.json."""

    def answers(self, predictions, threshold: Optional[float]) -> Dict[str, str]:
        return predictions.with_threshold(threshold)

    def score(self, dataset: list, predictions, threshold: Optional[float],
              data_file: str = "") -> tuple:
        best = evaluate_v2(dataset, predictions.with_threshold(None), predictions.null_odds)
        if threshold is None:
            threshold, source = best["best_f1_thresh"], "tuned_on_eval_set"
        else:
            source = "given"
        answers = predictions.with_threshold(threshold)
        metrics = evaluate_v2(dataset, answers)
        for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
            metrics[key] = best[key]
        metrics["null_score_diff_threshold"] = threshold
        metrics["null_threshold_source"] = source
        metrics.pop("missing", None)
        return answers, metrics


class Cmrc2018Scoring(SquadV1Scoring):
    """CMRC 2018: the official CMRC 2018 definitions (`cmrc_metrics`); the metrics say
    `metric = "cmrc2018"`."""

    name = "cmrc2018"

    def score(self, dataset: list, predictions, threshold: Optional[float],
              data_file: str = "") -> tuple:
        try:
            metrics = cmrc_metrics.evaluate(dataset, predictions.answers)
        except ValueError as err:  # e.g. a question without gold answers
            raise UserValueError(f"--predict_file {data_file}: {err}") from err
        metrics = {key: value for key, value in metrics.items()
                   if not isinstance(value, (list, tuple, set, dict))}
        metrics["metric"] = self.name
        return predictions.answers, metrics
