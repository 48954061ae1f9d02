"""Feature caches: one policy for every task family.

A cache is a TFRecord of features plus its description, `<cache>.json`: the settings
that built it (sequence lengths, lower-casing, the vocabulary's fingerprint, a digest
of the examples, ...) and counts that are only reported. The task supplies `identity`,
the settings a reuse must match.

  * description matches `identity`  -> the cache is reused (one log line)
  * description differs             -> the cache is rebuilt in place, with one warning
                                       naming the settings that changed
  * records without a description   -> an interrupted write (albert_tf writes the
                                       description right after the records) at a path
                                       albert_tf chose (`owned`): rebuilt; at a path the
                                       user gave: refused with one line, since the file
                                       may be another program's (e.g. the original's
                                       scripts' cache) and is never overwritten silently
  * no file                         -> built

Both files are written atomically, the records first. TensorFlow is imported only when
a cache is read or written, so the task modules stay light to import.
"""
from __future__ import annotations

import json
import os
from typing import Callable, Dict, List, Mapping, Optional

from absl import logging

from albert_tf import fileio
from albert_tf.errors import UserError

DESCRIPTION_SUFFIX = ".json"


class FeatureCacheError(UserError, ValueError):
    """A file stands where a feature cache goes but albert_tf cannot tell what it holds."""


def description_path(cache_path: str) -> str:
    """`<cache>.json`, the description of the cache at `cache_path`."""
    return cache_path + DESCRIPTION_SUFFIX


def read_description(cache_path: str, owned: bool = False) -> Optional[Dict]:
    """The description of an existing cache; None when there is no cache (or, at an
    `owned` path, records without a description: an interrupted write, to rebuild).

    Raises FeatureCacheError for records without a description at a path the user gave.
    """
    import tensorflow as tf

    described = description_path(cache_path)
    if not tf.io.gfile.exists(cache_path):
        return None
    if not tf.io.gfile.exists(described):
        if owned:
            logging.warning("rebuilding the feature cache %s: it has no %s (an interrupted "
                            "write)", cache_path, os.path.basename(described))
            return None
        raise FeatureCacheError(
            f"{cache_path} exists without {os.path.basename(described)}: it was not written by "
            "albert_tf (or its writing was interrupted), so what it holds is unknown; delete "
            "it to rebuild it, or choose another cache file")
    with tf.io.gfile.GFile(described) as handle:
        return json.load(handle)


def changed_settings(description: Mapping, identity: Mapping) -> List[str]:
    """The names of the identity's settings that the description records otherwise."""
    return sorted(key for key in identity if description.get(key) != identity[key])


def prepare(cache_path: str, identity: Mapping, write_records: Callable[[Callable[[bytes], None]],
                                                                       Optional[Mapping]],
            what: str, owned: bool = False) -> Dict:
    """Reuses the cache at `cache_path` when its description matches `identity`, else
    (re)builds it; returns its description. `owned`: albert_tf chose the path (not a
    user's flag), see the module docstring.

    write_records(write) writes every serialized record through `write` and returns the
    counts to record beside the identity (or None). `what` names the cache in the log
    ("RTE train", "SQuAD prediction", ...).
    """
    description = read_description(cache_path, owned)
    if description is not None:
        changed = changed_settings(description, identity)
        if not changed:
            logging.info("reusing cached features %s (%s)", cache_path, what)
            return description
        logging.warning("rebuilding %s feature cache %s: %s changed", what, cache_path,
                        ", ".join(changed))
    with fileio.atomic_tfrecord_writer(cache_path) as writer:
        counts = write_records(writer.write) or {}
    description = dict(counts, **identity)
    fileio.atomic_write_text(description_path(cache_path),
                             json.dumps(description, indent=2, sort_keys=True) + "\n")
    return description


def cached_dataset(path, parse: Callable, batch_size: int, is_training: bool,
                   num_examples: int, padding_row: Callable[[], Mapping],
                   seed: Optional[int] = None, input_context=None):
    """tf.data over a feature cache (or a list of them, read as one) of `num_examples`
    records, each `parse`d to a dict.

    Training: sharded per input pipeline under distribution (`input_context`), shuffled
    (buffer min(num_examples, 100000), seeded), repeated, whole batches of `batch_size`.
    Evaluation: in file order, padded up to a multiple of `batch_size` with copies of
    `padding_row()` (a dict of tensors shaped as one parsed record, `is_real_example`
    0), as the original pads for TPUs; whole batches.
    """
    import tensorflow as tf

    data = tf.data.TFRecordDataset(path)
    if is_training:
        if input_context and input_context.num_input_pipelines > 1:
            data = data.shard(input_context.num_input_pipelines,
                              input_context.input_pipeline_id)
        data = data.shuffle(max(1, min(num_examples, 100000)), seed=seed,
                            reshuffle_each_iteration=True).repeat()
        return data.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(
            batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    data = data.map(parse)
    padding = (-num_examples) % batch_size
    if padding:
        data = data.concatenate(tf.data.Dataset.from_tensors(padding_row()).repeat(padding))
    return data.batch(batch_size, drop_remainder=True)
