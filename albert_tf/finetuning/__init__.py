"""The one fine-tuning job that every task family runs.

options.py   FinetuningOptions (the run: steps, batch, learning rate, checkpoints, precision)
             and TaskOptions (what every task adds: config, vocabulary, lengths, export)
job.py       run_finetuning (train, evaluate every checkpoint, keep the best, predict) and
             FinetuningJob, the base class of the task families' jobs (run directory,
             tokenizer, best weights, export)
predict.py   the distributed prediction loop

May import everything below it: training, checkpoints, export, modeling, kernels,
tokenization, and the foundation (config, errors, fileio).
"""
from albert_tf.finetuning.job import (  # noqa: F401
    BEST_PREFIX, CHECKPOINT_SUBDIR, BestCheckpointTracker, ExampleMeanTask, FinetuningJob,
    evaluate_unrecorded_checkpoint, load_best_weights, run_finetuning)
from albert_tf.finetuning.options import FinetuningOptions, TaskOptions  # noqa: F401
from albert_tf.finetuning.predict import predict_outputs  # noqa: F401
