"""A batched tf.data.Dataset read into the in-memory forms of the tasks whose inputs are
made in Python (the tagger's windows, the span reader's windows, the multiple-choice rows,
the embedder's packed texts, the masked LM's instances), as run_ner.py, run_squad.py,
run_race.py, run_embeddings.py and create_pretraining_data.py make them.

A dataset is batched, as Keras reads one: each element is a batch of x, or of (x, y).
  x   a batch of texts (string [B]), of word lists (string [B, W], ragged or padded with
      ""), a dict of columns ({"question": [B], "context": [B]}, {"article": [B],
      "question": [B], "options": [B, 4]}) or a tuple of text columns ((texts_a, texts_b))
  y   class ids or scores [B], tag lists [B, W] (ragged, or padded with "" / -1), answer
      texts [B], or a dict of columns ({"text": [B], "answer_start": [B]})
The batches are concatenated: dict columns become a list of row dicts, tuples stay
columns, everything else a list; strings are decoded as UTF-8. The whole dataset is read
before the first step (a finite one: `take(n)` a repeated one).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError


def read_batches(dataset: tf.data.Dataset, y, task_name: str, text_columns: bool = False
                 ) -> Tuple[object, Optional[object]]:
    """(x, y) of `dataset` in memory (see the module docstring); one line when y is also
    given beside it, or the dataset is infinite or unbatched. `text_columns`: x may be a
    tuple of text columns (the embedder's pairs), so a tuple of strings alone is x."""
    if y is not None:
        raise UserValueError("y is given inside a tf.data.Dataset of (x, y), not beside it")
    if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
        raise UserValueError(f"{task_name}: the dataset repeats forever; its inputs are made "
                             "in Python before the first step: take(n) a finite part")
    spec = dataset.element_spec
    labelled = isinstance(spec, tuple) and len(spec) == 2 and not (
        text_columns and _is_text_columns(spec))
    x_spec = spec[0] if labelled else spec
    if _batch_rank(x_spec) == 0:
        raise UserValueError(f"{task_name}: a dataset of single examples: batch it first "
                             "(dataset.batch(n)), as Keras reads datasets")
    xs, ys = [], []
    for element in dataset.as_numpy_iterator():
        x_batch, y_batch = element if labelled else (element, None)
        xs.append(_python(x_batch))
        ys.append(None if y_batch is None else _python(y_batch))
    return _concatenate(xs, x_spec), (_concatenate(ys, spec[1]) if labelled else None)


def _is_text_columns(spec) -> bool:
    """A tuple of string columns is x's text columns ((texts_a, texts_b)), not (x, y)."""
    return all(isinstance(s, (tf.TensorSpec, tf.RaggedTensorSpec)) and s.dtype == tf.string
               for s in spec)


def _batch_rank(spec) -> int:
    """The rank of x's first column (a batch of texts has rank 1)."""
    while isinstance(spec, (tuple, list, dict)):
        spec = list(spec.values())[0] if isinstance(spec, dict) else spec[0]
    return len(spec.shape) if spec.shape.rank is not None else 1


def _python(value):
    """A batch as Python values: strings decoded, ragged rows as lists, "" / -1 padding of
    word and tag lists dropped."""
    if isinstance(value, dict):
        return {name: _python(column) for name, column in value.items()}
    if isinstance(value, tuple):
        return tuple(_python(column) for column in value)
    if isinstance(value, tf.compat.v1.ragged.RaggedTensorValue):
        value = value.to_list()
    return _decoded(value.tolist() if isinstance(value, np.ndarray) else value)


def _decoded(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value


def _concatenate(batches: List, spec):
    """The batches as one in-memory x or y: a list of row dicts for dict columns, a tuple of
    columns for a tuple, else a list; padded word / tag rows lose their padding."""
    if isinstance(spec, dict):
        rows = []
        for batch in batches:
            count = len(next(iter(batch.values())))
            rows.extend({name: column[i] for name, column in batch.items()}
                        for i in range(count))
        return rows
    if isinstance(spec, tuple):
        return tuple(_concatenate([batch[i] for batch in batches], part)
                     for i, part in enumerate(spec))
    rows = [row for batch in batches for row in batch]
    if _batch_rank(spec) == 2 and isinstance(spec, tf.TensorSpec):  # padded rows
        rows = [[item for item in row if item not in ("", -1)] for row in rows]
    return rows
