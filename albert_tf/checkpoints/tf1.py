"""The official TF1 name-based checkpoint format, read and written.

Official downloads (`model.ckpt-best.*`), TF-Hub module variables and the original
scripts' fine-tuned checkpoints; `albert_tf.checkpoints.names` is the one table between
their names and our variables.
"""
from __future__ import annotations

import logging
import os
import re
import uuid
from typing import Optional

import numpy as np

from albert_tf.checkpoints import names as tf1_names
from albert_tf.checkpoints.assign import (
    LoadReport,
    assign_named_arrays,
    is_optimizer_state,
)
from albert_tf.errors import UserFileNotFoundError, UserValueError

logger = logging.getLogger(__name__)

TFHUB_PREFIX = "module/"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# Checkpoint prefixes a directory is searched for, in order: Google's downloads (English and
# albert_*_zh) and the community Chinese releases (brightmart/albert_zh).
PREFERRED_PREFIXES = ("model.ckpt-best", "albert_model.ckpt")


def resolve_tf1_checkpoint(path_or_dir: str) -> str:
    """The checkpoint prefix for a prefix, an `.index` file, or a directory.

    A directory is resolved through its `checkpoint` file when it names a
    prefix that exists, else through its `*.index` files: a single one,
    `model.ckpt-best` (official downloads and the original's best export),
    `albert_model.ckpt` (the community Chinese releases), or the highest
    `-<step>`. A TF-Hub module directory resolves to its `variables/variables`.
    """
    import tensorflow as tf

    path = os.fspath(path_or_dir)
    if path.endswith(".index"):
        path = path[:-len(".index")]
    if tf.io.gfile.isdir(path):
        hub_variables = os.path.join(path, "variables", "variables")
        if tf.io.gfile.exists(hub_variables + ".index"):
            return hub_variables
        # A `checkpoint` file naming a prefix that is not there (an absolute path of the
        # machine that wrote it, as some published archives carry) is ignored.
        latest = (tf.train.latest_checkpoint(path)
                  if tf.io.gfile.exists(os.path.join(path, "checkpoint")) else None)
        if latest:
            return latest
        prefixes = sorted(p[:-len(".index")] for p in tf.io.gfile.glob(os.path.join(path,
                                                                                    "*.index")))
        if not prefixes:
            raise UserFileNotFoundError(
                f"{path}: no checkpoint in this directory (looked for a `checkpoint` file and "
                f"*.index files such as {'.index, '.join(PREFERRED_PREFIXES)}.index)")
        if len(prefixes) == 1:
            return prefixes[0]
        for preferred in PREFERRED_PREFIXES:
            best = [p for p in prefixes if os.path.basename(p) == preferred]
            if best:
                return best[0]
        steps = {p: int(m.group(1)) for p in prefixes for m in [re.search(r"-(\d+)$", p)] if m}
        if steps:
            return max(steps, key=steps.get)
        listed = ", ".join(map(os.path.basename, prefixes))
        raise UserValueError(f"{path}: several checkpoints ({listed}); pass the prefix of the one "
                             "to load")
    if not tf.io.gfile.exists(path + ".index"):
        raise UserFileNotFoundError(f"{path}: no such checkpoint ({path}.index not found)")
    return path


def open_reader(prefix: str):
    import tensorflow as tf

    try:
        return tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as err:
        raise UserValueError(f"cannot read checkpoint {prefix} (truncated or corrupt? missing "
                             f".data file?): {getattr(err, 'message', err)}") from err


def read_tf1_variables(path_or_dir: str):
    """(prefix, {name: shape}, read(name)) of a TF1 name-based checkpoint.

    A TF-Hub `module/` prefix is stripped (when every model name carries it).
    Raises ValueError for an object-based (TF2 `tf.train.Checkpoint`) checkpoint.
    """
    prefix = resolve_tf1_checkpoint(path_or_dir)
    reader = open_reader(prefix)
    raw = {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()}
    if OBJECT_GRAPH_KEY in raw:
        raise UserValueError(f"{prefix} is an object-based tf.train.Checkpoint (TF2), not a TF1 "
                             "name-based checkpoint; use checkpoints.restore_for_training")
    weights = [n for n in raw if not is_optimizer_state(n)]
    strip = bool(weights) and all(n.startswith(TFHUB_PREFIX) for n in weights)
    shapes, source_names = {}, {}
    for name, shape in raw.items():
        short = name[len(TFHUB_PREFIX):] if strip and name.startswith(TFHUB_PREFIX) else name
        shapes[short] = shape
        source_names[short] = name
    return prefix, shapes, lambda name: reader.get_tensor(source_names[name])


def load_tf1_checkpoint(model, path_or_dir: str, init_from_group0: bool = False) -> LoadReport:
    """Reads a TF1 name-based checkpoint into an encoder, pretrainer or task model.

    Args:
      model: `AlbertEncoder`, `AlbertPretrainer`, or a fine-tuning model of
        `albert_tf.modeling.models`.
      path_or_dir: a prefix such as `.../model.ckpt-best`, a directory (with or
        without a `checkpoint` file), or a TF-Hub module directory.
      init_from_group0: initialise every group from group 0 (the original's flag).
    Returns the LoadReport (also logged). Heads absent from the checkpoint are
    reported in `missing`; optimizer slots are skipped; unused variables are listed.
    Raises CheckpointMismatchError for a config that does not fit, a shape
    mismatch or a missing encoder variable; ValueError for unreadable files.
    """
    prefix, shapes, read = read_tf1_variables(path_or_dir)
    return assign_named_arrays(model, shapes, read, prefix, "TF1",
                               init_from_group0=init_from_group0)


def save_tf1_checkpoint(model, prefix: str, global_step: Optional[int] = None) -> str:
    """Writes `model` under the official TF1 names and 2-D shapes (`prefix.index`, `.data-*`).

    The result is read by the original's `init_from_checkpoint`, by
    `tf.train.list_variables` / `load_variable` (Hugging Face's and Model
    Garden's converters) and by `load_tf1_checkpoint`. No `.meta` graph is
    written (none of these readers needs one). `global_step` (int64) is added
    when given.

    Atomicity: the files are written under a temporary prefix in the same
    directory, then renamed: any old `prefix.index` is removed first, the data
    shard is renamed next and the index last, so a reader never finds an index
    whose data file is missing or stale.
    """
    import tensorflow as tf

    names = tf1_names.variables_for(model)
    directory = os.path.dirname(os.fspath(prefix))
    if directory:
        tf.io.gfile.makedirs(directory)
    tmp = os.path.join(directory, f".{os.path.basename(prefix)}.tmp-{uuid.uuid4().hex[:8]}")
    tensor_names = list(names)
    tensors = [tf.convert_to_tensor(np.asarray(var.numpy(), np.float32)) for var in
               names.values()]
    if global_step is not None:
        tensor_names.append("global_step")
        tensors.append(tf.constant(int(global_step), tf.int64))
    try:
        tf.raw_ops.SaveV2(prefix=tmp, tensor_names=tensor_names,
                          shape_and_slices=[""] * len(tensor_names), tensors=tensors)
        if tf.io.gfile.exists(prefix + ".index"):
            tf.io.gfile.remove(prefix + ".index")
        for data in tf.io.gfile.glob(tmp + ".data-*"):
            tf.io.gfile.rename(data, prefix + data[len(tmp):], overwrite=True)
        tf.io.gfile.rename(tmp + ".index", prefix + ".index", overwrite=True)
    finally:
        for leftover in tf.io.gfile.glob(tmp + ".*"):
            tf.io.gfile.remove(leftover)
    logger.info("Wrote %d variables to TF1 checkpoint %s", len(tensor_names), prefix)
    return prefix
