"""Run as a script: 6 steps of a tiny ALBERT under MirroredStrategy over 2 logical CPUs,
straight and as 3 + 3 (a second Trainer resuming from the first's checkpoint). A distributed
iterator is not checkpointed: the resumed run skips 3 steps x 2 replicas' elements of the
one input pipeline. Prints {"max_weight_diff": ...} (0 when the skip is right)."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.training import distribute  # noqa: E402

distribute.split_cpu(2)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests.helpers.multi_worker_step import build_trainer  # noqa: E402
from tests.helpers.pretraining_data import make_examples  # noqa: E402

EXAMPLES = make_examples(96, seed=4)
DATA = {k: np.stack([e[k] for e in EXAMPLES]).astype(
    np.float32 if k == "masked_lm_weights" else np.int32) for k in EXAMPLES[0]}


def dataset_fn(ctx):  # every element a different per-replica batch of 4
    return tf.data.Dataset.from_tensor_slices(DATA).repeat().batch(4)


def train(strategy, output_dir, steps):
    trainer, model = build_trainer(strategy, output_dir, 6, steps, 3)
    trainer.train(dataset_fn)
    return [v.numpy() for v in model.weights]


def main():
    strategy = tf.distribute.MirroredStrategy(
        [d.name for d in tf.config.list_logical_devices("CPU")])
    assert strategy.num_replicas_in_sync == 2
    root = tempfile.mkdtemp()
    straight = train(strategy, os.path.join(root, "straight"), 6)
    train(strategy, os.path.join(root, "resumed"), 3)
    resumed = train(strategy, os.path.join(root, "resumed"), 6)
    print(json.dumps({"max_weight_diff": max(float(np.abs(a - b).max())
                                             for a, b in zip(straight, resumed))}))


if __name__ == "__main__":
    main()
