"""Per-layer exits in Keras' fit: PABEE's depth-weighted loss for the task models whose
network has exits (`from_pretrained(..., exit_heads="shared" | "per_layer")`).

A training call keeps the network's exit logits [L, ...] beside the answer it returns;
`compute_loss` then weighs the task's loss (its compiled one, or its own) of each exit by
depth (`modeling.early_exit.weighted_exit_loss`): what run_classifier.py, run_ner.py and
run_race.py train with --exit_heads. Evaluation and prediction read the answer layer (or
exit early, with `network.early_exit` set).
"""
from __future__ import annotations

import threading

import tensorflow as tf

from albert_tf.modeling import early_exit


class ExitTraining:
    """Mixin for a `Task` whose network is a `modeling.exiting.ExitingModel` (first base)."""

    def exit_outputs(self, features, training=False):
        """The network's outputs on `features`; a training call with exits also keeps the
        exit logits for `compute_loss` (per thread: each replica's own)."""
        outputs = self.network(features, training=training)
        if training and self.network.exit_heads != "none":
            self._exit_store().logits = outputs["exit_logits"]
        return outputs

    def _exit_store(self) -> threading.local:
        store = self.__dict__.get("_exit_logits_store")
        if store is None:
            store = threading.local()
            object.__setattr__(self, "_exit_logits_store", store)  # not a tracked attribute
        return store

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        store = self._exit_store()
        exits, store.logits = getattr(store, "logits", None), None
        if exits is None or not training:
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        per_exit = [super(ExitTraining, self).compute_loss(
            x, y, tf.cast(exits[index], tf.float32), sample_weight, training)
            for index in range(exits.shape[0])]
        return early_exit.weighted_exit_loss(tf.stack(per_exit))
