"""The divergence guard under a 2-replica MirroredStrategy (run by
tests/training/test_divergence.py in a subprocess: the logical devices must exist before
TensorFlow starts): an injected NaN rolls back to the last checkpoint and the run finishes
with finite weights. Prints one JSON line."""
import json
import pathlib
import sys
import tempfile

import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
import keras
from albert_tf import training
from albert_tf.training import optimization
from albert_tf.training.divergence import DivergenceOptions
from tests.training.test_divergence import InjectingTask, dataset_fn, FEATURES

out = tempfile.mkdtemp()
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    optimizer = optimization.create_optimizer(1e-2, 12, 0, "adamw", clip_norm=None)
task = InjectingTask(optimizer, at_step=7)
config = training.TrainingConfig(output_dir=out, num_train_steps=12, steps_per_loop=2,
                                 save_checkpoints_steps=4, divergence=DivergenceOptions())
trainer = training.Trainer(strategy, model, optimizer, task, config, task.metric_names,
                           optimizer.learning_rate_schedule)
trainer.train(lambda ctx: dataset_fn(ctx))
print(json.dumps({"step": trainer.step, "rollbacks": trainer.rollbacks,
                  "scale": trainer.learning_rate_scale,
                  "finite": all(bool(tf.reduce_all(tf.math.is_finite(w))) for w in model.weights)}))
