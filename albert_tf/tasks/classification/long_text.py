"""Texts longer than the model (`--long_text`): which tokens of a text the classifier reads.

`budget` is the number of a text's tokens one model input holds (max_seq_length - 2 for
a single text: [CLS] and [SEP] take the rest).

  truncate   the first `budget` tokens (the original's rule; the rest is dropped)
  head_tail  the first `head` and the last `budget - head` tokens, head = round(budget *
             128 / 510): Sun et al. 2019's best setting ("How to fine-tune BERT for text
             classification?": 128 + 382 tokens of a 512-token input)
  windows    windows of `budget` tokens starting every `doc_stride` tokens (default
             budget // 2), the last one reaching the text's end: window starts 0, s, 2s, ...
             while start + budget < length, so 1 + ceil(max(length - budget, 0) / s)
             windows. Each window is one model input; a text's logits are the mean (or max)
             of its windows' logits.

A text of at most `budget` tokens is one unchanged input under every rule. Training reads
each window as an example with its text's label; evaluation and prediction aggregate. The
serving graph (`export.py`) and the pipeline apply the same rules.

Pure Python and NumPy (no TensorFlow at import).
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

import numpy as np

MODES = ("truncate", "head_tail", "windows")
AGGREGATIONS = ("mean", "max")
# Sun et al. 2019: the head's share of a 510-token budget (128 + 382).
HEAD_TOKENS, HEAD_OF_BUDGET = 128, 510


@dataclasses.dataclass(frozen=True)
class LongText:
    """How a text longer than `budget` tokens is read (see the module docstring)."""

    mode: str = "truncate"
    doc_stride: Optional[int] = None      # windows: step between window starts
    aggregation: str = "mean"             # windows: mean or max of the windows' logits

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"--long_text must be one of {', '.join(MODES)}, got "
                             f"{self.mode!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"--window_aggregation must be one of {', '.join(AGGREGATIONS)}, "
                             f"got {self.aggregation!r}")
        if self.doc_stride is not None and self.doc_stride < 1:
            raise ValueError(f"--doc_stride must be positive, got {self.doc_stride}")

    def stride(self, budget: int) -> int:
        """The step between window starts; ValueError when it would skip tokens."""
        stride = self.doc_stride if self.doc_stride is not None else max(budget // 2, 1)
        if stride > budget:
            raise ValueError(f"--doc_stride {stride} exceeds the {budget} text tokens a window "
                             "holds (max_seq_length - 2): tokens between windows would be "
                             "skipped")
        return stride

    def describe(self, budget: int) -> dict:
        """The settings as exports record them (JSON-ready)."""
        record = {"long_text": self.mode}
        if self.mode == "windows":
            record.update(doc_stride=self.stride(budget), window_aggregation=self.aggregation)
        return record


def head_tokens(budget: int) -> int:
    """The head's share of `budget` under head_tail (128 of 510)."""
    return int(round(budget * HEAD_TOKENS / HEAD_OF_BUDGET))


def head_tail(ids: Sequence[int], budget: int) -> List[int]:
    """The first head_tokens(budget) and the last budget - head ids (all when they fit)."""
    ids = list(ids)
    if len(ids) <= budget:
        return ids
    head = head_tokens(budget)
    return ids[:head] + ids[len(ids) - (budget - head):]


def window_starts(length: int, budget: int, stride: int) -> List[int]:
    """Starts of the windows over `length` tokens (one window, at 0, when it fits)."""
    starts = [0]
    while starts[-1] + budget < length:
        starts.append(starts[-1] + stride)
    return starts


def pieces(ids: Sequence[int], budget: int, rule: LongText) -> List[List[int]]:
    """The token lists the model reads for one text: one for truncate and head_tail, the
    windows for windows."""
    ids = list(ids)
    if rule.mode == "truncate":
        return [ids[:budget]]
    if rule.mode == "head_tail":
        return [head_tail(ids, budget)]
    return [ids[start:start + budget]
            for start in window_starts(len(ids), budget, rule.stride(budget))]


def aggregate(logits: np.ndarray, example_index: np.ndarray, num_examples: int,
              how: str = "mean") -> np.ndarray:
    """float32 [num_examples, K]: the mean or max of each example's windows' logits
    (logits [F, K] in any order; example_index int [F]). Every example needs a window."""
    logits = np.asarray(logits, np.float64)
    example_index = np.asarray(example_index, np.int64)
    counts = np.bincount(example_index, minlength=num_examples)
    if len(counts) > num_examples or (counts == 0).any():
        raise ValueError(f"windows of {len(counts)} examples for {num_examples}, or an "
                         "example without a window")
    if how == "max":
        out = np.full([num_examples, logits.shape[1]], -np.inf)
        np.maximum.at(out, example_index, logits)
    else:
        out = np.zeros([num_examples, logits.shape[1]])
        np.add.at(out, example_index, logits)
        out /= counts[:, None]
    return out.astype(np.float32)
