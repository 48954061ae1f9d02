"""Run as a script: a few training steps of a tiny ALBERT, written to an .npz.

  multi_worker_step.py OUT.npz            one process, one device, global batch 8
  TF_CONFIG=... multi_worker_step.py OUT  one worker of a MultiWorkerMirroredStrategy
                                          cluster; each of the 2 workers reads half
                                          of the same global batch of 8
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf import AlbertPretrainer, training  # noqa: E402
from albert_tf.training import distribute, optimization  # noqa: E402
from albert_tf.pretraining import PretrainingObjective  # noqa: E402
from tests.helpers.one_step_equivalence import BATCH, CONFIG  # noqa: E402

STEPS = 3


def build_trainer(strategy, output_dir, decay_steps, num_train_steps, save_every):
    """A Trainer of the tiny pretrainer (seed 0, lr 1e-2 decaying over `decay_steps`, one
    step per window) under `strategy`, and its model."""
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = AlbertPretrainer(CONFIG)
        model.build()
        optimizer = optimization.create_optimizer(1e-2, decay_steps, 0, clip_norm=None)
    task = PretrainingObjective()
    config = training.TrainingConfig(output_dir=output_dir, num_train_steps=num_train_steps,
                                     steps_per_loop=1, save_checkpoints_steps=save_every)
    return training.Trainer(strategy, model, optimizer, task, config, task.metric_names), model


def main(out_path):
    multi = "TF_CONFIG" in os.environ
    strategy = distribute.get_strategy("multi_worker_mirrored" if multi else "one_device")
    output_dir = os.environ.get("ALBERT_TF_TEST_OUTPUT", tempfile.mkdtemp())
    trainer, model = build_trainer(strategy, output_dir, 10, STEPS, 2)

    def dataset_fn(ctx):
        data = tf.data.Dataset.from_tensor_slices(BATCH)
        if ctx.num_input_pipelines > 1:
            data = data.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return data.batch(ctx.get_per_replica_batch_size(8)).repeat()

    trainer.train(dataset_fn)
    if distribute.is_chief(strategy):
        np.savez(out_path, *[v.numpy() for v in model.weights])


if __name__ == "__main__":
    main(sys.argv[1])
