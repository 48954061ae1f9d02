"""GLUE metrics against hand-computed values (definitions worked out in the comments)."""
import math

import numpy as np
import pytest

from albert_tf.tasks.classification import metrics as m

# labels / predictions: TP = 2 (0, 4), FN = 1 (1), FP = 1 (3), TN = 2 (2, 5).
LABELS = [1, 1, 0, 0, 1, 0]
PREDICTIONS = [1, 0, 0, 1, 1, 0]


def test_binary_classification_metrics():
    assert m.accuracy(LABELS, PREDICTIONS) == pytest.approx(4 / 6)
    assert m.f1_score(LABELS, PREDICTIONS) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    # (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (4 - 1) / sqrt(81)
    assert m.matthews_corrcoef(LABELS, PREDICTIONS) == pytest.approx(3 / 9)
    assert m.matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)


def test_degenerate_cases():
    assert m.matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0  # a zero marginal: div_no_nan
    assert m.f1_score([0, 0], [0, 0]) == 0.0
    assert math.isnan(m.pearson([1, 1, 1], [1, 2, 3]))


def test_pearson_and_spearman():
    # x - mean = [-1, 0, 1], y - mean = [-7/3, -1/3, 8/3]: r = 5 / sqrt(2 * 114 / 9)
    assert m.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 114 / 9))
    # ranks with ties: [1, 2.5, 2.5, 4] vs [1, 2, 3, 4]: r = 4.5 / sqrt(4.5 * 5)
    assert m.average_ranks([1, 2, 2, 3]).tolist() == [1, 2.5, 2.5, 4]
    assert m.average_ranks([3.0, 1.0, 3.0, 3.0]).tolist() == [3, 1, 3, 3]
    assert m.spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(4.5 / math.sqrt(22.5))
    # Spearman is invariant to monotone transforms; Pearson is not.
    x = np.array([0.1, 0.5, 0.9, 2.0, 3.5])
    assert m.spearman(x, np.exp(x)) == pytest.approx(1.0)
    assert m.pearson(x, np.exp(x)) < 0.99


def test_task_metric_dicts():
    loss = np.array([0.5, 1.5])
    got = m.classification_metrics([1, 0], [1, 1], loss, extra=("f1", "matthew_corr"))
    assert got == {"eval_accuracy": 0.5, "eval_loss": 1.0, "f1": pytest.approx(2 / 3),
                   "matthew_corr": 0.0}
    assert set(m.classification_metrics([1], [1], [0.0])) == {"eval_accuracy", "eval_loss"}
    reg = m.regression_metrics([1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    assert reg["MSE"] == pytest.approx(1 / 3) and reg["eval_loss"] == pytest.approx(1 / 3)
    assert reg["spearman"] == pytest.approx(1.0)
    assert reg["pearson"] == pytest.approx(m.pearson([1, 2, 4], [1, 2, 3]))
