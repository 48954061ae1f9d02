"""Multiple-choice metrics (pure Python): accuracy overall and per level / subset.

Two places compute them and must agree: the dev evaluation of a training run sums
correct answers per level in the graph (`job.MultipleChoiceObjective`) and turns the sums
into metrics here (`metrics_from_sums`); a predicted split (predictions.jsonl,
predict_results.txt) and `python -m albert_tf.tasks.multiple_choice evaluate` score the
chosen options with `accuracy_by_level` (RACE) / `accuracy_by_subset` (C3).
"""
from __future__ import annotations

from typing import Dict, Mapping, Sequence

from albert_tf.finetuning import collapse
from albert_tf.tasks.multiple_choice.features import LEVELS, NUM_CHOICES, SUBSETS

METRIC = "eval_accuracy"  # the dev metric that picks the best checkpoint


def accuracy_by_level(examples: Sequence, predictions: Sequence[int],
                      levels: Sequence[str] = LEVELS) -> Dict[str, float]:
    """Accuracy over `all` and per level present (labelled examples only).

    examples: objects with `level` and `label` (the answer's index, or None);
    predictions: the chosen option's index per example.
    Keys: accuracy, accuracy_middle, accuracy_high, examples, examples_middle, ...
    (C3: `levels` ("m", "d") give accuracy_m, accuracy_d, ...)
    """
    results: Dict[str, float] = {}
    groups = {"": list(range(len(examples)))}
    for level in levels:
        groups["_" + level] = [i for i, e in enumerate(examples) if e.level == level]
    for suffix, indices in groups.items():
        indices = [i for i in indices if examples[i].label is not None]
        if not indices:
            continue
        correct = sum(int(predictions[i]) == examples[i].label for i in indices)
        results["accuracy" + suffix] = correct / len(indices)
        results["examples" + suffix] = len(indices)
    return results


def accuracy_by_subset(examples: Sequence, predictions: Sequence[int]) -> Dict[str, float]:
    """Accuracy over both C3 subsets and each one present (labelled examples only).
    Keys: accuracy, accuracy_m, accuracy_d, examples, examples_m, examples_d."""
    return accuracy_by_level(examples, predictions, SUBSETS)


def metrics_from_sums(sums: Mapping[str, float], levels: Sequence[str], name: str,
                      choice_labels: Sequence[str]) -> Dict[str, float]:
    """The dev metrics of an evaluation's summed counts.

    sums: `loss_total`, `examples`, `correct`, `examples_<level>`, `correct_<level>` and,
    in an evaluation, `predicted_<c>` / `gold_<c>` per choice c (questions predicted as /
    answered by choice c). Returns `eval_loss`, `eval_accuracy`, `eval_examples`,
    `eval_accuracy_<level>` / `eval_examples_<level>` for the levels with questions, and
    `collapsed` when the per-choice counts are there (`finetuning.collapse`; `name`
    names the data set in its warning, `choice_labels` the choices).
    """
    examples = max(sums["examples"], 1.0)
    metrics = {"eval_loss": sums["loss_total"] / examples,
               "eval_accuracy": sums["correct"] / examples,
               "eval_examples": int(sums["examples"])}
    for level in levels:
        if sums["examples_" + level] > 0:
            metrics["eval_accuracy_" + level] = (sums["correct_" + level]
                                                 / sums["examples_" + level])
            metrics["eval_examples_" + level] = int(sums["examples_" + level])
    names = {kind: [f"{kind}_{choice}" for choice in range(NUM_CHOICES)]
             for kind in ("predicted", "gold")}
    if all(key in sums for keys in names.values() for key in keys):  # an evaluation
        counts = {kind: [sums[key] for key in keys] for kind, keys in names.items()}
        collapse.mark(metrics, collapse.label_collapse_from_counts(
            counts["predicted"], counts["gold"], labels=tuple(choice_labels),
            what="dev questions"), name)
    return metrics
