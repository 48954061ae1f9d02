"""The one fine-tuning job that every task family runs.

options.py        FinetuningOptions (the run: steps, batch, learning rate, checkpoints,
                  precision) and TaskOptions (what every task adds: config, vocabulary,
                  lengths, export)
job.py            run_finetuning (train, evaluate every checkpoint, keep the best,
                  predict) and FinetuningJob, the base class of the task families' jobs
                  (tokenizer, run directory, best weights, export)
predict.py        the distributed prediction loop
feature_cache.py  the one feature-cache policy (reuse, rebuild, refuse)
collapse.py       collapse warnings: an evaluation predicting one label, no answer or no
                  entity almost everywhere (`collapsed` in its metrics, one warning)
hparams.py        the paper's (and the CLUE baselines') hyperparameters per task
                  (--hparams=paper)
seeds.py          run_seeds: N fine-tunings with different seeds, their median and best
correlation.py    Pearson and Spearman (STS-B, sentence embeddings)

The names below are loaded on first use (PEP 562), so that a task module importing
`feature_cache` does not load TensorFlow and Keras with the job.

May import everything below it: training, checkpoints, export, modeling, kernels,
tokenization, and the foundation (config, errors, fileio).
"""
from albert_tf import _lazy

# Public name -> the module of this package that defines it.
_EXPORTS = {
    "BEST_PREFIX": "job", "CHECKPOINT_SUBDIR": "job", "BestCheckpointTracker": "job",
    "ExampleMeanObjective": "job", "ExampleMeanTask": "job", "example_weights": "job", "FinetuningJob": "job", "evaluate_unrecorded_checkpoint": "job",
    "load_best_weights": "job", "run_finetuning": "job", "real_features": "job",
    "FinetuningOptions": "options", "TaskOptions": "options",
    "predict_outputs": "predict", "run_seeds": "seeds",
}
__all__ = list(_EXPORTS)


__getattr__, __dir__ = _lazy.lazy_attributes(__name__, _EXPORTS, globals())
