"""Classification metrics on whole evaluation sets (NumPy): accuracy, F1, Matthews, Pearson,
Spearman, the multi-label set (micro/macro F1, Hamming loss, subset accuracy, ...), and a
task's metric set (`compute_metrics` on logits, as the job evaluates;
`prediction_metrics` on predicted labels, as `python -m albert_tf.tasks.classification
evaluate` scores a predictions file). `spec` is a `glue.TaskSpec` (its `labels`,
`is_regression`, `extra_metrics`) and `examples` `glue.InputExample`s: glue.py
re-exports names of this module, so it is not imported here.

Written by hand because the project does not depend on SciPy or scikit-learn;
each function follows the textbook definition (the tests check them against
hand-computed values). Degenerate inputs follow the usual conventions:
Matthews is 0 when any marginal is empty (the original's `div_no_nan`),
F1 is 0 when there is no true positive, correlations are NaN for a constant
input.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

# Pearson and Spearman moved to finetuning/correlation.py (the embeddings family reads them
# too); re-exported here for old imports.
from albert_tf.finetuning.correlation import average_ranks, pearson, spearman  # noqa: F401


def accuracy(labels, predictions) -> float:
    """Fraction of predictions equal to the labels."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def f1_score(labels, predictions, positive: int = 1) -> float:
    """Binary F1 of class `positive`: 2 TP / (2 TP + FP + FN)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


def matthews_corrcoef(labels, predictions, positive: int = 1) -> float:
    """Binary Matthews correlation (TP TN - FP FN) / sqrt(product of the four marginals)."""
    labels = np.asarray(labels) == positive
    predictions = np.asarray(predictions) == positive
    tp = float(np.sum(predictions & labels))
    tn = float(np.sum(~predictions & ~labels))
    fp = float(np.sum(predictions & ~labels))
    fn = float(np.sum(~predictions & labels))
    denominator = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return (tp * tn - fp * fn) / np.sqrt(denominator) if denominator else 0.0


def classification_metrics(labels, predictions, per_example_loss=None,
                           extra: Sequence[str] = ()) -> Dict[str, float]:
    """eval_accuracy and eval_loss (not without `per_example_loss`), plus `f1` and/or
    `matthew_corr` when in `extra`."""
    metrics = {"eval_accuracy": accuracy(labels, predictions)}
    if per_example_loss is not None:
        metrics["eval_loss"] = float(np.mean(per_example_loss))
    if "f1" in extra:
        metrics["f1"] = f1_score(labels, predictions)
    if "matthew_corr" in extra:
        metrics["matthew_corr"] = matthews_corrcoef(labels, predictions)
    return metrics


def regression_metrics(labels, scores, per_example_loss: Optional[np.ndarray] = None
                       ) -> Dict[str, float]:
    """pearson, spearman, MSE (the original's key) and eval_loss (= mean squared error)."""
    labels = np.asarray(labels, np.float64)
    scores = np.asarray(scores, np.float64)
    mse = float(np.mean((scores - labels) ** 2))
    loss = mse if per_example_loss is None else float(np.mean(per_example_loss))
    return {"pearson": pearson(scores, labels), "spearman": spearman(scores, labels),
            "MSE": mse, "eval_loss": loss}


def multilabel_metrics(gold, predicted, labels: Sequence[str],
                       per_example_loss: Optional[np.ndarray] = None) -> Dict[str, float]:
    """Multi-label metrics of multi-hot [N, K] predictions against multi-hot gold, as
    scikit-learn computes them over the full label list with zero_division=0:
    micro_f1, macro_f1, micro_precision, micro_recall, hamming_loss, subset_accuracy,
    `f1/<label>` per label, eval_loss (with `per_example_loss`). A ratio whose
    denominator is 0 (no prediction, no gold, for that label or at all) is 0."""
    gold = np.asarray(gold).astype(bool).reshape(-1, len(labels))
    predicted = np.asarray(predicted).astype(bool).reshape(-1, len(labels))
    tp = np.sum(gold & predicted, axis=0)
    fp = np.sum(~gold & predicted, axis=0)
    fn = np.sum(gold & ~predicted, axis=0)
    per_label_f1 = [_ratio(2 * t, 2 * t + p + n) for t, p, n in zip(tp, fp, fn)]
    tp_all, fp_all, fn_all = int(tp.sum()), int(fp.sum()), int(fn.sum())
    results = {
        "micro_f1": _ratio(2 * tp_all, 2 * tp_all + fp_all + fn_all),
        "macro_f1": float(np.mean(per_label_f1)) if labels else 0.0,
        "micro_precision": _ratio(tp_all, tp_all + fp_all),
        "micro_recall": _ratio(tp_all, tp_all + fn_all),
        "hamming_loss": float(np.mean(gold != predicted)) if gold.size else 0.0,
        "subset_accuracy": float(np.mean(np.all(gold == predicted, axis=1))) if len(gold)
        else 0.0,
    }
    if per_example_loss is not None:
        results["eval_loss"] = float(np.mean(per_example_loss))
    results.update({f"f1/{label}": f1 for label, f1 in zip(labels, per_label_f1)})
    return results


def logit_thresholds(thresholds) -> np.ndarray:
    """float32 [K]: the logit of each probability threshold, log(t / (1 - t))."""
    thresholds = np.asarray(thresholds, np.float64)
    return np.log(thresholds / (1.0 - thresholds)).astype(np.float32)


def above_thresholds(logits, thresholds) -> np.ndarray:
    """int32 [N, K]: 1 where a label is predicted, its probability above its threshold.

    Compared as float32 logits against `logit_thresholds`: the rule every path uses (the
    job, the SavedModel, ONNX, LiteRT), so that they agree at the boundary too."""
    return (np.asarray(logits, np.float32) > logit_thresholds(thresholds)[None, :]
            ).astype(np.int32)


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator else 0.0


def per_example_loss(logits: np.ndarray, labels: np.ndarray, regression: bool) -> np.ndarray:
    """The model's loss per example (float64): squared error, softmax cross-entropy, or
    for multi-hot `labels` [N, K] the mean over the labels of each sigmoid's binary
    cross-entropy."""
    logits = np.asarray(logits, np.float64)
    labels = np.asarray(labels)
    if labels.ndim == 2:
        terms = np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))
        return terms.mean(axis=-1)
    if regression:
        return (logits[:, 0] - np.asarray(labels, np.float64)) ** 2
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -log_probs[np.arange(len(labels)), np.asarray(labels, np.int64)]


def prediction_metrics(spec, predictions: np.ndarray, label_ids: np.ndarray,
                       losses: Optional[np.ndarray] = None) -> Dict[str, float]:
    """The task's metrics (keys as the original + GLUE) of predicted class indices [N]
    (or scores [N], regression; multi-hot [N, K], multi-label) against `label_ids` [N]
    ([N, K]); `eval_loss` of classification only with the per-example `losses`
    (regression's is the squared error)."""
    if spec.multi_label:
        return multilabel_metrics(label_ids, predictions, spec.labels, losses)
    if spec.is_regression:
        return regression_metrics(label_ids, predictions, losses)
    return classification_metrics(label_ids, predictions, losses, spec.extra_metrics)


def compute_metrics(spec, logits: np.ndarray, label_ids: np.ndarray,
                    thresholds: Optional[np.ndarray] = None) -> Dict[str, float]:
    """The task's metrics on a whole evaluation set from its logits [N, K] (K = 1:
    regression), `eval_loss` included. Multi-label: a label is predicted where its
    sigmoid is above its `thresholds` entry (default 0.5 for every label)."""
    losses = per_example_loss(logits, label_ids, spec.is_regression)
    if spec.multi_label:
        if thresholds is None:
            thresholds = np.full([np.shape(logits)[1]], 0.5)
        predictions = above_thresholds(logits, thresholds)
    elif spec.is_regression:
        predictions = logits[:, 0]
    else:
        predictions = np.argmax(logits, axis=-1)
    return prediction_metrics(spec, predictions, label_ids, losses)


def gold_label_ids(spec, examples: Sequence) -> np.ndarray:
    """The examples' labels as the metrics take them: float64 values (regression) or
    int64 indices into `spec.labels`."""
    if spec.is_regression:
        return np.array([e.label for e in examples], np.float64)
    if spec.multi_label:
        out = np.zeros([len(examples), len(spec.labels)], np.int64)
        index = {label: k for k, label in enumerate(spec.labels)}
        for n, example in enumerate(examples):
            out[n, [index[name] for name in example.label or ()]] = 1
        return out
    index = {label: i for i, label in enumerate(spec.labels)}
    return np.array([index[e.label] for e in examples], np.int64)
