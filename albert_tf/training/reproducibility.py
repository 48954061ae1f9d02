"""Seeds and TensorFlow's op determinism for a run."""
from __future__ import annotations

from typing import Optional

import keras
import tensorflow as tf
from absl import logging


def seed_run(seed: Optional[int], deterministic: bool = False) -> None:
    """Seeds Python, NumPy and TensorFlow with `seed` (None: unseeded) and, with
    `deterministic`, turns on TensorFlow's op determinism for this process: every op
    then picks a deterministic kernel (or raises when it has none), tf.data keeps its
    order, and a run with the same seed repeats bit for bit on one machine and
    TensorFlow build. It measured no slower on CPU (slower on GPUs: see
    docs/robust_runs.md) and cannot be turned off again in the process."""
    if deterministic:
        if seed is None:
            raise ValueError("--deterministic needs a seed")
        tf.config.experimental.enable_op_determinism()
        logging.info("--deterministic: TensorFlow op determinism on, seed %d (a rerun repeats "
                     "bit for bit on this machine)", seed)
    if seed is not None:
        keras.utils.set_random_seed(seed)
