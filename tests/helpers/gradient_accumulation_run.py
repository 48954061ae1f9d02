"""Gradient accumulation under a 2-replica MirroredStrategy over two logical CPUs (run by
tests/training/test_gradient_accumulation.py in a subprocess: the logical devices must exist
before TensorFlow starts). For each family given as an argument (default: all), trains its real
job with --deterministic --seed=3, every dropout 0, at the same global batch: two replicas
with k = 1 and k = 2, and one replica with k = 1. Prints one JSON line:
{family: {"k2_vs_k1": relative difference, "two_vs_one_replica": relative difference}}
(`relative_difference`: max |a - b| / max |b| over every weight of model.ckpt-best).

Two replicas and one see the same examples per step: a single worker's MirroredStrategy
reads one input pipeline (not sharded) and hands its consecutive per-replica batches to
the replicas, the same stream that one replica batches twice as large.
"""
import json
import pathlib
import sys
import tempfile

import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.training import test_gradient_accumulation as accumulation  # noqa: E402

root = pathlib.Path(tempfile.mkdtemp(prefix="albert_tf_accumulation_"))
data = accumulation.make_data(root)
mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
results = {}
for family in sys.argv[1:] or accumulation.FAMILIES:
    def train(name, k, strategy):
        return accumulation.train(family, data, root / f"{family}_{name}", k,
                                  strategy=strategy, deterministic=True)
    two_k1 = train("r2k1", 1, mirrored)
    two_k2 = train("r2k2", 2, mirrored)
    one_k1 = train("r1k1", 1, one_device)
    results[family] = {"k2_vs_k1": accumulation.relative_difference(two_k2, two_k1),
                       "two_vs_one_replica": accumulation.relative_difference(two_k1, one_k1)}
    print(family, results[family], file=sys.stderr, flush=True)
print(json.dumps(results))
