"""Distribution strategy from a name: one_device, mirrored, multi_worker_mirrored, tpu.

All scale-out goes through tf.distribute; nothing here is home-made.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf
from absl import logging

from albert_tf.kernels import tf_internals

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
# Seconds without a heartbeat after which a worker counts as lost (--worker_timeout_seconds).
DEFAULT_WORKER_TIMEOUT_SECONDS = 20.0


def get_strategy(name: str = "one_device", tpu_address: Optional[str] = None,
                 tpu_zone: Optional[str] = None, gcp_project: Optional[str] = None,
                 device: Optional[str] = None,
                 worker_timeout_seconds: float = DEFAULT_WORKER_TIMEOUT_SECONDS
                 ) -> tf.distribute.Strategy:
    """Builds the strategy `name`.

    one_device: the first GPU if any, else the CPU (or `device`).
    mirrored: every local GPU, or every local logical CPU device when there is no GPU.
    multi_worker_mirrored: the cluster described by the TF_CONFIG environment variable; a
        worker silent for `worker_timeout_seconds` is reported lost to the others, whose
        collectives then fail (the training loop stops them with one line).
    tpu: a TPU found by `tpu_address` (name, grpc:// address or "local").
    """
    if name == "one_device":
        if device is None:
            device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker_mirrored":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        cluster = resolver.cluster_spec()
        # (as the strategy itself does: only chief and worker tasks join the coordination)
        if (cluster.jobs and resolver.task_type in ("chief", "worker")
                and not tf_internals.configure_worker_heartbeat(cluster,
                                                                worker_timeout_seconds)):
            logging.warning("this TensorFlow cannot set the workers' heartbeat timeout: a lost "
                            "worker is noticed after TensorFlow's default (10 s)")
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu_address or "", zone=tpu_zone, project=gcp_project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")


def split_cpu(num_devices: int) -> None:
    """Splits the physical CPU into `num_devices` logical devices (tests, demos).

    Must run before TensorFlow initialises its devices.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes checkpoints, summaries and results.

    Only multi-worker strategies have non-chief workers: the "chief" task if the
    cluster has one, else worker 0.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None or task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief
