"""Keras metrics the tasks' `compile()` defaults use where Keras has none that fits.

`WordAccuracy`: a tagger's accuracy over labelled words only (Keras' accuracies count every
position, padding and later sub-tokens included).

`PearsonCorrelation`: Pearson's r of predictions and labels over everything seen since the
last reset (a whole evaluation set, as run_classifier.py's STS-B metric computes it), from
running float64 sums. Keras' own `PearsonCorrelation` correlates along the last axis of
each sample, which for a regression head's [B, 1] output is one value: 0 / 0.
"""
from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class PearsonCorrelation(keras.metrics.Metric):
    """Pearson's r over all (label, prediction) pairs seen: labels [B] or [B, 1],
    predictions [B] or [B, 1] (a regression head's score). 0 until two distinct values of
    each have been seen."""

    def __init__(self, name: str = "pearson", **kwargs):
        super().__init__(name=name, **kwargs)
        self._sums = {key: self.add_variable((), initializer="zeros", dtype="float64",
                                             name=key)
                      for key in ("n", "x", "y", "xx", "yy", "xy")}

    def update_state(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("PearsonCorrelation takes no sample weights")
        x = ops.reshape(ops.cast(y_pred, "float64"), (-1,))
        y = ops.reshape(ops.cast(y_true, "float64"), (-1,))
        values = {"n": ops.cast(ops.shape(x)[0], "float64"), "x": ops.sum(x), "y": ops.sum(y),
                  "xx": ops.sum(x * x), "yy": ops.sum(y * y), "xy": ops.sum(x * y)}
        for key, value in values.items():
            self._sums[key].assign_add(value)

    def result(self):
        s = self._sums
        n = ops.maximum(s["n"], 1.0)
        cov = s["xy"] - s["x"] * s["y"] / n
        var_x = s["xx"] - s["x"] * s["x"] / n
        var_y = s["yy"] - s["y"] * s["y"] / n
        denominator = ops.sqrt(ops.maximum(var_x * var_y, 0.0))
        return ops.cast(ops.where(denominator > 0, cov / ops.maximum(denominator, 1e-300),
                                  0.0), "float32")

    def reset_state(self):
        for variable in self._sums.values():
            variable.assign(0.0)


@keras.saving.register_keras_serializable(package="albert_tf")
class WordAccuracy(keras.metrics.Metric):
    """The share of labelled words whose highest logit is the gold label: labels int
    [B, S] (-1 at positions without a label: sub-tokens after a word's first, padding),
    logits [B, S, K]. Per word, not decoded (the tagger's `score` reads the decoded tags
    into entities)."""

    def __init__(self, name: str = "word_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_variable((), initializer="zeros", dtype="float64",
                                         name="correct")
        self.total = self.add_variable((), initializer="zeros", dtype="float64", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("WordAccuracy takes no sample weights")
        labels = ops.cast(y_true, "int32")
        labelled = ops.cast(labels >= 0, "float64")
        hits = ops.cast(ops.cast(ops.argmax(y_pred, axis=-1), "int32") == labels, "float64")
        self.correct.assign_add(ops.sum(hits * labelled))
        self.total.assign_add(ops.sum(labelled))

    def result(self):
        return ops.cast(self.correct / ops.maximum(self.total, 1.0), "float32")

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)
