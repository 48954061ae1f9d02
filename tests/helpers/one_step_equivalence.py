"""Run as a script (it must split the CPU before TensorFlow starts): one training step of
the same model on the same global batch of 8 under
  (a) one device, (b) MirroredStrategy over 2 logical CPUs, (c) one device with
  2 accumulation micro-batches, (d) MirroredStrategy with 2 micro-batches per replica;
prints a JSON object with the losses and the largest weight difference to (a).
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.training import distribute  # noqa: E402

distribute.split_cpu(2)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig, AlbertPretrainer, training  # noqa: E402
from albert_tf.training import optimization  # noqa: E402
from albert_tf.pretraining import PretrainingObjective  # noqa: E402
from tests.helpers.pretraining_data import make_examples  # noqa: E402

CONFIG = AlbertConfig(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=16)
EXAMPLES = make_examples(8, seq_len=16, max_pred=4, seed=3)
BATCH = {k: np.stack([e[k] for e in EXAMPLES]).astype(
    np.float32 if k == "masked_lm_weights" else np.int32) for k in EXAMPLES[0]}


def one_step(strategy, accumulation):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = AlbertPretrainer(CONFIG)
        model.build()
        initial = [v.numpy() for v in model.weights]
        optimizer = optimization.create_optimizer(1e-2, 10, 0, clip_norm=None)
    task = PretrainingObjective()
    config = training.TrainingConfig(output_dir=tempfile.mkdtemp(), num_train_steps=1,
                                     steps_per_loop=1, save_checkpoints_steps=100,
                                     gradient_accumulation_steps=accumulation)
    trainer = training.Trainer(strategy, model, optimizer, task, config, task.metric_names)
    replicas = strategy.num_replicas_in_sync

    def dataset_fn(ctx):
        return tf.data.Dataset.from_tensor_slices(BATCH).batch(8 // replicas).repeat()

    metrics = trainer.train(dataset_fn)
    return metrics["loss"], [v.numpy() for v in model.weights], initial


def main():
    one = distribute.get_strategy("one_device")
    mirrored = distribute.get_strategy("mirrored")
    assert mirrored.num_replicas_in_sync == 2, mirrored.num_replicas_in_sync
    base_loss, base, initial = one_step(one, 1)
    out = {"one_device_loss": base_loss,
           "max_update": float(max(np.max(np.abs(a - b)) for a, b in zip(base, initial)))}
    for name, strategy, k in (("mirrored", mirrored, 1), ("accumulated", one, 2),
                              ("mirrored_accumulated", mirrored, 2)):
        loss, weights, _ = one_step(strategy, k)
        out[f"{name}_loss"] = loss
        out[f"{name}_max_weight_diff"] = float(max(np.max(np.abs(a - b))
                                                   for a, b in zip(weights, base)))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
