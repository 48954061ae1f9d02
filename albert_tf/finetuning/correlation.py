"""Pearson and Spearman correlation (NumPy), as SciPy's `pearsonr` and `spearmanr` compute
them: what STS-B (classification) and the sentence-embedding evaluation report.

Written by hand because the project does not depend on SciPy; the tests check them
against SciPy. A constant input gives NaN (SciPy warns and returns NaN too).
"""
from __future__ import annotations

import numpy as np


def pearson(x, y) -> float:
    """Pearson correlation coefficient of two 1-D arrays."""
    x = np.asarray(x, np.float64) - np.mean(x)
    y = np.asarray(y, np.float64) - np.mean(y)
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator else float("nan")


def average_ranks(values) -> np.ndarray:
    """1-based ranks, ties sharing the mean of their positions (SciPy's 'average')."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # Group boundaries of equal values in sorted order.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks_sorted = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    ranks = np.empty(len(values), np.float64)
    ranks[order] = ranks_sorted
    return ranks


def spearman(x, y) -> float:
    """Spearman rank correlation: Pearson on average ranks."""
    return pearson(average_ranks(x), average_ranks(y))
