"""Pretraining: the TFRecord inputs, the masked-LM + sentence-order task and its job.

inputs.py (the pretraining TFRecord schema, defined once, and tf.data pipelines),
job.py (PretrainingOptions, PretrainingObjective, run_pretraining).

May import everything below it: training, checkpoints, export, modeling, kernels,
tokenization, and the foundation (config, errors, fileio).
"""
# The public names of the former module albert_tf.pretraining, which this package replaced.
from albert_tf.pretraining.job import (  # noqa: F401
    BEST_PREFIX, CHECKPOINT_SUBDIR, METRIC_SUMS, PretrainingObjective,
    PretrainingOptions, PretrainingTask, run_pretraining)
