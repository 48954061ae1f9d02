"""The one distributed prediction loop: a batched dataset in, numpy arrays out, in order."""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping

import numpy as np
import tensorflow as tf
from absl import logging


def predict_outputs(strategy: tf.distribute.Strategy, model, data: tf.data.Dataset,
                    outputs_of: Callable[[object, Mapping[str, tf.Tensor]],
                                         Dict[str, tf.Tensor]],
                    what: str = "examples", log_every: int = 100) -> Dict[str, np.ndarray]:
    """Runs `outputs_of(model, batch)` on every batch of `data`, on every replica.

    data: batched features (global batches; the strategy splits them).
    outputs_of: (model, features) -> {name: tensor [batch, ...]}, traced once.
    Returns {name: array [number of rows, ...]}: each replica's rows gathered in batch
    order, batches in dataset order. Logs progress every `log_every` batches.
    """
    distributed = strategy.experimental_distribute_dataset(data)

    @tf.function
    def step(features):
        values = strategy.run(lambda batch: outputs_of(model, batch), args=(features,))
        return {name: strategy.gather(value, axis=0) for name, value in values.items()}

    columns: Dict[str, List[np.ndarray]] = {}
    rows = 0
    for batches, features in enumerate(distributed, start=1):
        for name, value in step(features).items():
            columns.setdefault(name, []).append(value.numpy())
        rows += len(next(iter(columns.values()))[-1])
        if batches % log_every == 0:
            logging.info("predicted %d %s", rows, what)
    return {name: np.concatenate(parts, axis=0) for name, parts in columns.items()}
