"""The one fine-tuning job that every task family runs.

job.py: options, the run directory, the best-checkpoint tracker, and
`run_finetuning` (train, evaluate every checkpoint, keep the best, predict).

May import everything below it: training, checkpoints, export, modeling, kernels,
tokenization, and the foundation (config, errors, fileio).
"""
# The public names of the former module albert_tf.finetuning, which this package replaced.
from albert_tf.finetuning.job import (  # noqa: F401
    BEST_PREFIX, BestCheckpointTracker, CHECKPOINT_SUBDIR, ExampleMeanTask, FinetuningOptions,
    evaluate_unrecorded_checkpoint, run_finetuning)
