"""What every pipeline shares: inputs one, many or streamed, rows batched through the model.

A task subclasses `Pipeline` with two methods:

  rows(item, options)  -> the model rows (`encoding.Packed`) one input needs (a text: one
                          row; a long text: its windows; zero-shot: one row per label)
  answer(item, rows, outputs, options) -> the result for that input, from its rows' outputs
                          (a dict of numpy arrays, the rows in order)

`Pipeline.__call__(inputs, **options)` takes one input, a list (results in a list, in order)
or any other iterable (results yielded lazily, `batch_size` rows in the model at a time).
"""
from __future__ import annotations

import itertools
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.pipelines.encoding import Packed, TextEncoder


def pad_rows(rows: Sequence[Packed], pad_id: int) -> Dict[str, np.ndarray]:
    """int32 `input_ids`, `input_mask`, `segment_ids` [len(rows), longest row]."""
    length = max(len(row.input_ids) for row in rows)
    ids = np.full((len(rows), length), pad_id, np.int32)
    mask = np.zeros((len(rows), length), np.int32)
    segments = np.zeros((len(rows), length), np.int32)
    for index, row in enumerate(rows):
        n = len(row.input_ids)
        ids[index, :n] = row.input_ids
        mask[index, :n] = 1
        segments[index, :n] = row.segment_ids
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


class Pipeline:
    """A task over a `sources.ModelSource` (see the module docstring).

    batch_size: model rows per call (padded to the longest row of the batch).
    Options given to the constructor are defaults for every call.
    """

    task = ""
    HEADS: Sequence[str] = ()  # the model heads the task reads
    OUTPUTS: Sequence[str] = ("logits",)  # the model outputs it reads
    OPTIONS: Mapping[str, Any] = {}  # option -> default

    def __init__(self, source, batch_size: int = 8, **options):
        if self.HEADS and source.head not in self.HEADS:
            raise UserValueError(
                f"{source.path} is a {source.head} model; {self.task} needs a "
                f"{' or '.join(self.HEADS)} model")
        if batch_size < 1:
            raise UserValueError(f"batch_size must be at least 1, got {batch_size}")
        self.source = source
        self.tokenizer = source.tokenizer
        self.encoder = TextEncoder(source.tokenizer)
        self.batch_size = batch_size
        self.defaults = self.check_options(options)

    # --- what a task defines ------------------------------------------------------------------

    def rows(self, item, options: Mapping) -> List[Packed]:
        raise NotImplementedError

    def answer(self, item, rows: List[Packed], outputs: Dict[str, np.ndarray],
               options: Mapping):
        raise NotImplementedError

    def is_single(self, inputs) -> bool:
        """Whether `inputs` is one input (a result, not a list of results)."""
        return isinstance(inputs, (str, dict))

    # --- options ------------------------------------------------------------------------------

    def check_options(self, options: Mapping) -> Dict:
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise UserValueError(f"{self.task}: unknown option {unknown[0]!r} (options: "
                                 f"{', '.join(sorted(self.OPTIONS)) or 'none'})")
        return dict(options)

    def resolve_options(self, options: Mapping) -> Dict:
        values = dict(self.OPTIONS)
        values.update(self.defaults)
        values.update(self.check_options(options))
        return values

    # --- running ------------------------------------------------------------------------------

    def __call__(self, inputs, **options):
        values = self.resolve_options(options)
        if self.is_single(inputs):
            return next(self._results([inputs], values))
        if isinstance(inputs, (list, tuple)):
            return list(self._results(inputs, values))
        if isinstance(inputs, Iterable):
            return self._results(inputs, values)
        raise UserValueError(f"{self.task}: inputs must be a string, a list or an iterable, "
                             f"not {type(inputs).__name__}")

    def _results(self, items: Iterable, options: Mapping) -> Iterator:
        """Results in input order; about `batch_size` rows go through the model at once."""
        for _, result in self.keyed(((None, item) for item in items), options):
            yield result

    def keyed(self, pairs: Iterable, options: Optional[Mapping] = None,
              skip_errors: bool = False) -> Iterator:
        """(key, result) for each (key, input) of `pairs`, in order, `batch_size` inputs at a
        time. With `skip_errors`, an input the task cannot read gives (key, UserValueError)
        instead of stopping the stream (batch prediction counts and skips them); an input
        that is a UserValueError comes back as it is, in its place.
        `options` are resolved ones (`resolve_options`); None: the defaults."""
        options = self.resolve_options({}) if options is None else options
        iterator = iter(pairs)
        while True:
            group = list(itertools.islice(iterator, self.batch_size))
            if not group:
                return
            prepared = []  # (key, item, rows or the error)
            self.encoder.prefetch(text for _, item in group for text in _strings(item))
            for key, item in group:
                if isinstance(item, UserValueError):  # the caller's marker, passed through
                    prepared.append((key, item, item))
                    continue
                try:
                    prepared.append((key, item, self.rows(item, options)))
                except UserValueError as error:
                    if not skip_errors:
                        raise
                    prepared.append((key, item, error))
            outputs = self.run_items([rows for _, _, rows in prepared
                                      if isinstance(rows, list)])
            at = 0
            for key, item, rows in prepared:
                if not isinstance(rows, list):
                    yield key, rows
                    continue
                part = {name: value[at:at + len(rows)] for name, value in outputs.items()}
                at += len(rows)
                yield key, self.answer(item, rows, part, options)

    def run_items(self, items_rows: Sequence[List[Packed]]) -> Dict[str, np.ndarray]:
        """The model's outputs for the rows of several inputs (one list per input), one
        entry per row in order; by default the rows run as one stream (`run_rows`)."""
        return self.run_rows([row for rows in items_rows for row in rows])

    def run_rows(self, rows: Sequence[Packed]) -> Dict[str, np.ndarray]:
        """The model's outputs for `rows`, `batch_size` at a time, concatenated."""
        if not rows:
            return {}
        parts = [self.source.run(pad_rows(rows[i:i + self.batch_size], self.encoder.pad_id),
                                 self.OUTPUTS)
                 for i in range(0, len(rows), self.batch_size)]
        out = {}
        for name in parts[0]:
            arrays = [p[name] for p in parts]
            if arrays[0].ndim >= 2 and any(a.shape[1] != arrays[0].shape[1] for a in arrays):
                width = max(a.shape[1] for a in arrays)  # per-token outputs of unequal rows
                arrays = [np.pad(a, [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2))
                          for a in arrays]
            out[name] = np.concatenate(arrays)
        return out

    # --- shared helpers -----------------------------------------------------------------------

    @property
    def max_length(self) -> int:
        return self.source.max_length

    def text_row(self, item, truncation: bool) -> Packed:
        """One text as one row, `[CLS] tokens [SEP]`: cut to the model's length with
        `truncation`, else a text too long is an error naming its length."""
        if not isinstance(item, str):
            raise UserValueError(f"{self.task}: an input is a string, not {type(item).__name__}")
        tokens = self.encoder.tokens(item, offsets=False)
        if len(tokens) + 2 > self.max_length:
            if not truncation:
                raise self.too_long(len(tokens) + 2)
            tokens = tokens.window(0, self.max_length - 2)
        return self.encoder.pack(tokens)

    def too_long(self, length: int, what: str = "the text",
                 remedy: str = "pass truncation=True (or split the text)") -> UserValueError:
        return UserValueError(
            f"{self.task}: {what} is {length} tokens with [CLS] and [SEP]; the model reads "
            f"{self.max_length}: {remedy}")


def int_option(values: Mapping, name: str, minimum: int, maximum: Optional[int] = None,
               default: Optional[int] = None) -> int:
    """An integer option checked (one line naming it); None gives `default`."""
    value = values.get(name)
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
            maximum is not None and value > maximum):
        bounds = f"at least {minimum}" + (f" and at most {maximum}" if maximum else "")
        raise UserValueError(f"{name}={value!r}: an integer {bounds}")
    return value


def _strings(item):
    """The strings of an input (a text, a dict's values, a list of choices)."""
    if isinstance(item, str):
        yield item
    elif isinstance(item, dict):
        for value in item.values():
            yield from _strings(value)
    elif isinstance(item, (list, tuple)):
        for value in item:
            if isinstance(value, str):
                yield value


def softmax(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Hugging Face's pipelines' softmax (max-shifted, in the input's dtype)."""
    shifted = np.exp(values - values.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def sigmoid(values: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-values))
