"""`restore_for_training`: a model initialised from a checkpoint in any supported format."""
from __future__ import annotations

import logging
import os

from albert_tf.checkpoints import hf
from albert_tf.checkpoints import names as tf1_names
from albert_tf.checkpoints.assign import CheckpointMismatchError, LoadReport
from albert_tf.checkpoints.tf1 import (
    OBJECT_GRAPH_KEY,
    load_tf1_checkpoint,
    open_reader,
    resolve_tf1_checkpoint,
)
from albert_tf.errors import UserValueError

logger = logging.getLogger(__name__)


def looks_like_hf_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")) and (
        os.path.exists(os.path.join(path, "model.safetensors"))
        or os.path.exists(os.path.join(path, "model.safetensors.index.json")))


def detect_format(path: str) -> str:
    """One of "keras_h5", "huggingface", "tf1", "tf_checkpoint" for a checkpoint path."""
    path = os.fspath(path)
    if path.endswith(".weights.h5") or path.endswith(".h5"):
        return "keras_h5"
    if looks_like_hf_dir(path):
        return "huggingface"
    prefix = resolve_tf1_checkpoint(path)
    names = open_reader(prefix).get_variable_to_shape_map()
    return "tf_checkpoint" if OBJECT_GRAPH_KEY in names else "tf1"


def _restore_object_checkpoint(model, path: str, key: str) -> LoadReport:
    """Restores a TF2 `tf.train.Checkpoint(<key>=model, ...)`; reports what matched.

    Restored variables are recognised by TensorFlow's restore bookkeeping
    (`_update_uid`), so a model variable the checkpoint does not cover is
    reported (and raises, for an encoder variable).
    """
    import tensorflow as tf

    prefix = resolve_tf1_checkpoint(path)
    names = tf1_names.variables_for(model)
    before = {name: getattr(var, "_update_uid", None) for name, var in names.items()}
    status = tf.train.Checkpoint(**{key: model}).read(prefix)
    status.expect_partial()
    report = LoadReport(source=prefix, format="tf.train.Checkpoint")
    for name, var in names.items():
        uid = getattr(var, "_update_uid", None)
        (report.loaded if uid is not None and uid != before[name] and uid >= 0
         else report.missing).append(name)
    missing_encoder = [n for n in report.missing if tf1_names.is_encoder_name(n)]
    if missing_encoder:
        raise CheckpointMismatchError(
            f"{prefix} restored no value for {len(missing_encoder)} encoder variable(s) "
            f"(e.g. {', '.join(missing_encoder[:5])}): it is not a checkpoint of this model "
            f"under the key {key!r}, or it was written without those variables")
    logger.info("%s", report.summary())
    return report


def restore_for_training(model, path: str, init_from_group0: bool = False,
                         checkpoint_key: str = "model") -> LoadReport:
    """Initialises `model` from a checkpoint in any supported format (for `--init_checkpoint`).

    Formats, detected from `path`:
      * TF1 name-based prefix or directory, or TF-Hub module directory -> `load_tf1_checkpoint`
      * Hugging Face directory (`config.json` + `model.safetensors`)
        -> `hf_weights.load_hf_checkpoint`
      * Keras `.weights.h5` (saved from the same model class) -> `model.load_weights`
      * TF2 `tf.train.Checkpoint` with the model under `checkpoint_key`
    `init_from_group0` (the original's flag) applies to the TF1 and Hugging Face formats.
    """
    fmt = detect_format(path)
    if init_from_group0 and fmt not in ("tf1", "huggingface"):
        raise UserValueError(f"init_from_group0 applies to TF1 and Hugging Face checkpoints; "
                             f"{path} is a {fmt} checkpoint")
    if fmt == "tf1":
        return load_tf1_checkpoint(model, path, init_from_group0=init_from_group0)
    if fmt == "huggingface":

        return hf.load_hf_checkpoint(model, path, init_from_group0=init_from_group0)
    if fmt == "keras_h5":
        if not model.built:
            model.build()
        try:
            model.load_weights(path)
        except (ValueError, KeyError) as err:
            raise UserValueError(
                f"{path}: cannot load these Keras weights into {type(model).__name__} ({err}); a "
                ".weights.h5 file only fits the model class and config that wrote it. To move "
                "weights between model classes, convert through the TF1 format "
                "(python -m albert_tf.convert --output_format=tf1)") from err
        names = list(tf1_names.variables_for(model))
        report = LoadReport(source=path, format="Keras .weights.h5", loaded=names)
        logger.info("%s", report.summary())
        return report
    return _restore_object_checkpoint(model, path, checkpoint_key)
