"""Similarities -> files, and back.

  similarities.tsv   `index<TAB>similarity` (header first): each predicted pair's cosine
                     similarity, in the file's order (the index: the example's id)
  test_metrics.json  Spearman and Pearson on the predicted split, when it is scored

`read_similarities` reads a similarities.tsv back for `python -m albert_tf.tasks.embeddings
evaluate`.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Sequence

import numpy as np
from absl import logging

from albert_tf import fileio
from albert_tf.errors import UserValueError

SIMILARITIES_FILE = "similarities.tsv"
TEST_METRICS_FILE = "test_metrics.json"
HEADER = "index\tsimilarity"


def write_similarities(output_dir: str, examples: Sequence, similarities: np.ndarray) -> str:
    text = HEADER + "\n" + "".join(f"{e.guid}\t{float(s)!r}\n"
                                   for e, s in zip(examples, similarities))
    path = os.path.join(output_dir, SIMILARITIES_FILE)
    fileio.atomic_write_text(path, text)
    logging.info("wrote the similarities of %d pairs to %s", len(examples), path)
    return SIMILARITIES_FILE


def write_test_metrics(output_dir: str, results: Dict[str, float]) -> Dict[str, float]:
    fileio.atomic_write_text(os.path.join(output_dir, TEST_METRICS_FILE),
                             json.dumps(results, indent=2) + "\n")
    logging.info("test: spearman %.4f, pearson %.4f (%d pairs)", results["spearman"],
                 results["pearson"], results["eval_examples"])
    return results


def read_similarities(path: str, examples: Sequence) -> np.ndarray:
    """float64 [N] in the examples' order; UserValueError naming file:line for a bad header,
    a row that is not `index<TAB>number`, an index given twice, or indices that are not the
    examples' ids."""
    values: Dict[str, float] = {}
    with open(path, encoding="utf-8-sig") as handle:
        lines = handle.read().splitlines()
    if not lines or lines[0] != HEADER:
        raise UserValueError(f"{path}:1: expected the header 'index<TAB>similarity'")
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split("\t")
        try:
            index, value = parts[0], float(parts[1])
            if len(parts) != 2:
                raise ValueError
        except (IndexError, ValueError):
            raise UserValueError(f"{path}:{number}: expected index<TAB>similarity (a number), "
                                 f"found {line!r}") from None
        if index in values:
            raise UserValueError(f"{path}:{number}: index {index!r} is given twice")
        values[index] = value
    missing = [e.guid for e in examples if e.guid not in values]
    unknown = sorted(set(values) - {e.guid for e in examples})
    if missing or unknown:
        raise UserValueError(f"{path}: its indices do not match the {len(examples)} pairs: "
                             f"{len(unknown)} unknown (first {unknown[:1]}), {len(missing)} "
                             f"without a similarity (first {missing[:1]})")
    return np.array([values[e.guid] for e in examples], np.float64)
