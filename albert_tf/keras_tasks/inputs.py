"""What `fit`, `evaluate` and `predict` of a Keras task take, as a batched tf.data.Dataset.

The forms (x, with labels y beside it, or inside a dataset):
  a list / numpy array of texts                 ["a text", ...]
  pairs                                         (texts_a, texts_b), [(text_a, text_b),
                                                ...] or {"text": [...], "text_pair": [...]}
  token features (no preprocessing)             {"input_ids": [B, S], "input_mask", ...}
  a tf.data.Dataset of x or (x, y)              batched or not (a dataset of single
                                                texts is batched here, by batch_size)
In-memory labels are checked and converted by the task (`Task.prepare_labels`: one line
naming what is wrong) before any data reaches the model; a dataset's label spec is
checked the same way (`Task.check_label_spec`). Preprocessing runs inside the dataset
(`dataset.map`, in parallel with training), so the model's own graph holds no string op:
`jit_compile=True` and distribution strategies see only token features.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from albert_tf import export
from albert_tf.errors import UserValueError

DEFAULT_BATCH_SIZE = 32


def is_token_features(x) -> bool:
    return isinstance(x, dict) and "input_ids" in x


def _is_pair_columns(x) -> bool:
    """(texts_a, texts_b): two sequences of texts (not two texts, not rows of pairs)."""
    return isinstance(x, (tuple, list)) and len(x) == 2 and not isinstance(
        x[0], (str, bytes)) and not np.isscalar(x[0]) and not _is_pair_rows(x)


def _is_pair_rows(x) -> bool:
    """[(text_a, text_b), ...]: a list of 2-tuples of texts, one pair per row."""
    return isinstance(x, list) and len(x) > 0 and all(
        isinstance(row, tuple) and len(row) == 2
        and all(isinstance(text, (str, bytes)) for text in row) for row in x)


def num_examples(x) -> int:
    """Rows of in-memory texts (or pairs, or a dict of them, or token features)."""
    if isinstance(x, dict):
        return len(next(iter(x.values())))
    if _is_pair_columns(x):
        if len(x[0]) != len(x[1]):
            raise UserValueError(f"pairs: {len(x[0])} first texts but {len(x[1])} second ones")
        return len(x[0])
    return len(x)


def _texts_array(x):
    """In-memory x as numpy arrays of str (bytes decoded as UTF-8; a single str, or a value
    that is not a text, is refused in one line)."""
    if isinstance(x, (str, bytes)):
        raise UserValueError("x is one text: give a list of texts, e.g. [\"" + str(x)[:30] + "\"]")
    if isinstance(x, dict):
        return {key: np.asarray(value) for key, value in x.items()}
    if _is_pair_rows(x):
        x = ([a for a, _ in x], [b for _, b in x])
    if _is_pair_columns(x):
        return _strings(x[0], "the first texts"), _strings(x[1], "the second texts")
    return _strings(x, "x")


def _strings(values, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=object)
    if array.ndim != 1 or not all(isinstance(t, (str, bytes)) for t in array):
        bad = next((t for t in array.reshape(-1) if not isinstance(t, (str, bytes))), None)
        raise UserValueError(f"{what} must be texts (strings), got {bad!r}: give a list of "
                             "strings, (texts_a, texts_b), [(text_a, text_b), ...], a dict "
                             "{'text': [...], 'text_pair': [...]} or token features "
                             "{'input_ids': ...}")
    try:
        return np.array([t.decode("utf-8") if isinstance(t, bytes) else t for t in array],
                        dtype=str)
    except UnicodeDecodeError as error:
        raise UserValueError(f"{what}: a bytes text is not UTF-8 ({error})") from None


def _text_rank(spec) -> Optional[int]:
    """The rank of a dataset element's texts (0: single examples, 1: batches)."""
    first = spec
    while isinstance(first, (tuple, list, dict)):
        first = next(iter(first.values())) if isinstance(first, dict) else first[0]
    return first.shape.rank


def task_dataset(task, x, y=None, batch_size: Optional[int] = None,
                 needs_labels: bool = False, shuffle: bool = False) -> tf.data.Dataset:
    """x (and y) as a batched dataset of (token features, labels), or of features alone
    when there are no labels; preprocessed with the task's preprocessor. `shuffle`:
    in-memory examples are shuffled anew each epoch (a dataset is read as it is)."""
    if isinstance(x, tf.data.Dataset):
        if y is not None:
            raise UserValueError("y is given inside a tf.data.Dataset of (x, y), not beside it")
        dataset = x
        spec = dataset.element_spec
        labelled = isinstance(spec, tuple) and len(spec) == 2 and not (
            isinstance(spec[0], tf.TensorSpec) and isinstance(spec[1], tf.TensorSpec)
            and spec[0].dtype == tf.string and spec[1].dtype == tf.string)
        text_spec = spec[0] if labelled else spec
        if _text_rank(text_spec) == 0:
            dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
        if labelled:
            task.check_label_spec(dataset.element_spec[1])
    else:
        if x is None:
            raise UserValueError("x is missing: give texts (and labels y)")
        count = num_examples(x)
        x = _texts_array(x) if not is_token_features(x) else {
            k: np.asarray(v) for k, v in x.items()}
        labelled = y is not None
        if labelled:
            y = task.prepare_labels(y, count)
        dataset = tf.data.Dataset.from_tensor_slices((x, y) if labelled else x)
        if shuffle:
            dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
    if needs_labels and not labelled:
        if isinstance(x, tf.data.Dataset) and isinstance(spec, tuple) and len(spec) == 2:
            raise UserValueError(f"{task.task_name}: a dataset of two strings is read as "
                                 "(text_a, text_b) pairs without labels: give ((text_a, "
                                 "text_b), label), with labels as numbers (class ids, not "
                                 "names)")
        raise UserValueError(f"{task.task_name}: fit and evaluate need labels: fit(x=texts, "
                             "y=labels) or a dataset of (texts, labels)")
    preprocess = task.features
    if labelled:
        dataset = dataset.map(lambda inputs, labels: (preprocess(inputs),
                                                      task.labels_in_graph(labels)),
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        # A dataset of pairs yields two tensors per element.
        dataset = dataset.map(lambda *texts: preprocess(texts if len(texts) > 1 else texts[0]),
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def token_features(features) -> dict:
    """The token features of a dict (int32), the keys the encoder reads."""
    return {name: tf.cast(features[name], tf.int32)
            for name in export.TOKEN_FEATURES if name in features}
