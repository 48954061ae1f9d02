"""How a global training batch is split: over the replicas, then into micro-batches.

`--train_batch_size` B is the global batch of one optimizer step. With R replicas and
k = `--gradient_accumulation_steps`, each replica's training dataset yields B / R
examples per step (`per_replica_batch`), which the Trainer reshapes into k micro-batches
of B / (R * k) examples (in order) and whose summed gradients make one update: the
update of one step on the whole batch of B. Every job (each fine-tuning family and
pretraining) asks this module for its per-replica batch, so none divides by k itself.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf


def check_batch_split(global_batch: int, num_replicas: int, accumulation_steps: int,
                      flag: str = "--train_batch_size") -> None:
    """Raises ValueError (one line naming `flag`, the replicas and
    --gradient_accumulation_steps with their values) unless `global_batch` examples split
    evenly into `num_replicas` x `accumulation_steps` micro-batches (or either is not
    positive)."""
    for name, value in ((flag, global_batch),
                        ("--gradient_accumulation_steps", accumulation_steps)):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    parts = num_replicas * accumulation_steps
    if global_batch % parts:
        raise ValueError(
            f"{flag} {global_batch} must be divisible by replicas ({num_replicas}) x "
            f"--gradient_accumulation_steps ({accumulation_steps}) = {parts}: the global "
            f"batch is split over the replicas, then into micro-batches of equal size")


def per_replica_batch(global_batch: int,
                      input_context: Optional[tf.distribute.InputContext],
                      accumulation_steps: int = 1) -> int:
    """Examples one replica's training dataset yields per optimizer step: global_batch /
    replicas (the Trainer splits them into `accumulation_steps` micro-batches itself).

    input_context: the strategy's (None: one replica). Raises ValueError
    (`check_batch_split`) when the batch does not split evenly.
    """
    replicas = input_context.num_replicas_in_sync if input_context is not None else 1
    check_batch_split(global_batch, replicas, accumulation_steps)
    return global_batch // replicas
