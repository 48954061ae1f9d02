"""Collapse warnings: an evaluation whose model gives (almost) one output everywhere.

A fine-tuning run that does not learn often ends in a model that predicts the same
thing for every example: one label (classification, multiple choice), "no answer"
(or always an answer) for SQuAD 2.0, no entity at all for NER. Its metric looks like
a number like any other (e.g. the majority label's share as accuracy), so each
evaluation checks for it here: the detectors below return a one-phrase symptom, or
None, and `mark` adds `collapsed` (True / False) to the evaluation's metrics and logs
one warning line naming the symptom and the usual remedies.

The rule (`COLLAPSE_SHARE`, `GOLD_MAJORITY_LIMIT`):
  * labels (classification, multiple choice): one label is predicted for at least 95%
    of the evaluated examples while the gold labels' most common one is below 80% of
    them (a data set that is itself 80% one label is never flagged);
  * SQuAD 2.0: "no answer" predicted for at least 95% of the questions while less than
    80% of the gold questions are unanswerable, or an answer predicted for at least
    95% while less than 80% of them are answerable (without gold: the 95% alone);
  * NER: no entity predicted at all while the gold has entities.

Pure functions on NumPy arrays and counts: the task families collect the predictions.
May import the foundation (config, errors, fileio), NumPy and absl logging only.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
from absl import logging

COLLAPSE_SHARE = 0.95  # one output for at least this share of the evaluated examples
GOLD_MAJORITY_LIMIT = 0.80  # ... while the gold's share of its most common output is below
KEY = "collapsed"  # the metrics key (eval_results.txt: `collapsed = true` / `false`)


def _percent(share: float) -> str:
    return f"{100.0 * share:.1f}%"


def label_collapse_from_counts(predicted_counts: Sequence[float],
                               gold_counts: Sequence[float],
                               labels: Optional[Sequence[str]] = None,
                               share: float = COLLAPSE_SHARE,
                               gold_majority_limit: float = GOLD_MAJORITY_LIMIT,
                               what: str = "dev examples") -> Optional[str]:
    """`label_collapse` on counts: predicted_counts[i] / gold_counts[i] examples predicted /
    labelled i (the two may differ in length; both count the same examples)."""
    predicted_counts = np.asarray(predicted_counts, np.float64).reshape(-1)
    gold_counts = np.asarray(gold_counts, np.float64).reshape(-1)
    total = float(predicted_counts.sum())
    gold_total = float(gold_counts.sum())
    if total <= 0 or gold_total <= 0:
        return None
    top = int(np.argmax(predicted_counts))
    predicted_share = float(predicted_counts[top]) / total
    gold_majority = float(gold_counts.max()) / gold_total
    if predicted_share < share or gold_majority >= gold_majority_limit:
        return None
    name = f"'{labels[top]}'" if labels is not None and top < len(labels) else f"label {top}"
    return (f"predicts {name} for {_percent(predicted_share)} of {int(round(total))} {what} "
            f"(gold majority {_percent(gold_majority)})")


def label_collapse(predicted, gold, share: float = COLLAPSE_SHARE,
                   gold_majority_limit: float = GOLD_MAJORITY_LIMIT,
                   labels: Optional[Sequence[str]] = None,
                   what: str = "dev examples") -> Optional[str]:
    """Classification / multiple choice: the symptom when one label is predicted for at
    least `share` of the examples while the gold's most common label is below
    `gold_majority_limit` of them, else None.

    predicted, gold: integer label ids, one per evaluated example (equal lengths).
    labels: the label names (the symptom names the label; else its id).
    Returns e.g. "predicts 'not_entailment' for 100.0% of 277 dev examples (gold
    majority 52.7%)".
    """
    predicted = np.asarray(predicted, np.int64).reshape(-1)
    gold = np.asarray(gold, np.int64).reshape(-1)
    if predicted.shape != gold.shape:
        raise ValueError(f"{predicted.size} predictions but {gold.size} gold labels")
    if not predicted.size:
        return None
    if predicted.min() < 0 or gold.min() < 0:
        raise ValueError("label ids must be non-negative")
    size = int(max(predicted.max(), gold.max())) + 1
    return label_collapse_from_counts(np.bincount(predicted, minlength=size),
                                      np.bincount(gold, minlength=size), labels, share,
                                      gold_majority_limit, what)


def answerability_collapse(predicted_no_answer, gold_no_answer=None,
                           share: float = COLLAPSE_SHARE,
                           gold_majority_limit: float = GOLD_MAJORITY_LIMIT,
                           what: str = "dev questions") -> Optional[str]:
    """SQuAD 2.0: the symptom when "no answer" (or an answer) is predicted for at least
    `share` of the questions while the gold share of that same outcome is below
    `gold_majority_limit` (without gold, `gold_no_answer` None: the share alone), else None.

    predicted_no_answer: bool per question, True where the written answer is "" (after
        the null threshold the run uses); gold_no_answer: bool per question, True where
        the question is unanswerable.
    """
    predicted = np.asarray(predicted_no_answer, bool).reshape(-1)
    if not predicted.size:
        return None
    gold = None if gold_no_answer is None else np.asarray(gold_no_answer, bool).reshape(-1)
    if gold is not None and gold.shape != predicted.shape:
        raise ValueError(f"{predicted.size} predictions but {gold.size} gold questions")
    no_answer = float(predicted.mean())
    for outcome, predicted_share, gold_mask, gold_name in (
            ("no answer", no_answer, gold, "unanswerable"),
            ("an answer", 1.0 - no_answer, None if gold is None else ~gold, "answerable")):
        if predicted_share < share:
            continue
        if gold_mask is None:
            return f"predicts {outcome} for {_percent(predicted_share)} of {predicted.size} {what}"
        gold_share = float(gold_mask.mean())
        if gold_share < gold_majority_limit:
            return (f"predicts {outcome} for {_percent(predicted_share)} of {predicted.size} "
                    f"{what} (gold: {_percent(gold_share)} {gold_name})")
    return None


def entity_collapse(num_predicted_entities: int, num_gold_entities: int,
                    what: str = "dev sentences", num_sentences: Optional[int] = None
                    ) -> Optional[str]:
    """NER: the symptom when no entity at all is predicted while the gold has entities,
    else None. `num_sentences`: how many sentences were tagged (named in the symptom)."""
    if num_predicted_entities or not num_gold_entities:
        return None
    where = f"in {num_sentences} {what}" if num_sentences is not None else f"in the {what}"
    return f"predicts no entity {where} (the gold has {num_gold_entities} entities)"


def remedies(warmup_flag: str = "--warmup_step") -> str:
    """The usual remedies, as flags."""
    return (f"the paper's learning rate for the task (--hparams=paper, or a lower "
            f"--learning_rate), more warmup ({warmup_flag}), another seed (--seed)")


def warning_line(symptom: str, task: str, step: Optional[int] = None,
                 warmup_flag: str = "--warmup_step") -> str:
    """The one warning line of a collapsed evaluation."""
    at = f" at step {step}" if step is not None else ""
    return (f"{task}: the evaluation{at} looks collapsed: the model {symptom}. "
            f"Usual remedies: {remedies(warmup_flag)}")


def warn(symptom: str, task: str, step: Optional[int] = None,
         warmup_flag: str = "--warmup_step") -> None:
    """Logs `warning_line` (one line)."""
    logging.warning("%s", warning_line(symptom, task, step, warmup_flag))


def mark(metrics: Dict, symptom: Optional[str], task: str, step: Optional[int] = None,
         warmup_flag: str = "--warmup_step") -> Dict:
    """Adds `collapsed` (a Python bool) to an evaluation's metrics, warning when the
    detector found a symptom; returns the metrics (the same dict)."""
    metrics[KEY] = symptom is not None
    if symptom is not None:
        warn(symptom, task, step, warmup_flag)
    return metrics
