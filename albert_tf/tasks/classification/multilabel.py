"""Multi-label data: GoEmotions, label sets in custom files, and the decision thresholds.

A multi-label example's `label` is a tuple of label names (in the order of the task's
label list; empty: none of them applies). Its features hold `label_ids` int64 [K],
multi-hot, the schema of google-research's GoEmotions classifier.

GoEmotions (`--task_name=goemotions`, Demszky et al. 2020): `<data_dir>/{train,dev,
test}.tsv`, each line `text<TAB>label ids<TAB>comment id` with no header; the label ids
are comma-separated 0-based indices into `<data_dir>/emotions.txt` (one name per line,
28 names, the last without a final newline). About one line in 40 wraps its text in CSV
quotes with inner quotes doubled: the files are read with CSV quoting on a tab delimiter,
as pandas reads them in the published code.

Custom files (`--task_name=custom --multi_label`): a label cell holds comma-separated
label names (an empty cell: no label), or, in JSON lines, a list of names.

Decision thresholds: a label is predicted when its sigmoid probability is above its
threshold (`metrics.above_thresholds`: float32 logits against the thresholds' logits).
`tune_thresholds` picks, per label, the threshold of a fixed grid that maximises that
label's F1 on dev (ties: the one nearest 0.5, then the lower), so the tuned macro-F1 on
dev is never below the 0.5 baseline's.

Pure Python and NumPy (no TensorFlow at import).
"""
from __future__ import annotations

import csv
import io
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf.tasks.classification import glue, metrics

GOEMOTIONS = "goemotions"
LABELS_FILE = "emotions.txt"
BASELINE_THRESHOLD = 0.5
# The grid searched per label: 0.01 .. 0.99.
THRESHOLD_GRID = np.round(np.arange(1, 100) / 100.0, 2)


def goemotions_spec(labels: Sequence[str]) -> glue.TaskSpec:
    """GoEmotions' TaskSpec: text in column 0, label ids in 1, the comment id (the guid)
    in 2, no header; best checkpoint by macro-F1 (the paper's measure)."""
    return glue.TaskSpec(GOEMOTIONS, "", {
        split: glue.SplitLayout(f"{split}.tsv", False, 0, None, 1, 2) for split in glue.SPLITS
    }, tuple(labels), "macro_f1", multi_label=True)


def read_label_names(path: str) -> Tuple[str, ...]:
    """The label names of a file with one per line (blank lines and surrounding spaces
    dropped); GlueDataError naming the file when it is missing, has fewer than 2 names
    or names one twice."""
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise glue.GlueDataError(f"{path}: file not found (the label names, one per line; "
                                 "check --data_dir)")
    names = [line.strip() for line in glue.read_utf8_text(path).split("\n") if line.strip()]
    if len(names) < 2:
        raise glue.GlueDataError(f"{path}: found {len(names)} label names, need at least 2")
    seen: Dict[str, int] = {}
    for number, name in enumerate(names, start=1):
        if name in seen:
            raise glue.GlueDataError(f"{path}: label {name!r} is named twice (names "
                                     f"{seen[name]} and {number})")
        seen[name] = number
    return tuple(names)


def goemotions_labels(data_dir: str) -> Tuple[str, ...]:
    return read_label_names(os.path.join(data_dir, LABELS_FILE))


def read_goemotions(data_dir: str, split: str,
                    labels: Sequence[str]) -> List[glue.InputExample]:
    """The examples of a GoEmotions split; the label ids become a tuple of names (the test
    file's ids are read when present: GoEmotions' test split is labelled)."""
    import tensorflow as tf

    path = os.path.join(data_dir, f"{split}.tsv")
    if not tf.io.gfile.exists(path):
        raise glue.GlueDataError(f"{path}: file not found (GoEmotions' {split} split; "
                                 "check --data_dir)")
    return read_goemotions_file(path, labels)


def read_goemotions_file(path: str, labels: Sequence[str]) -> List[glue.InputExample]:
    """The examples of one file in GoEmotions' format."""
    reader = csv.reader(io.StringIO(glue.read_utf8_text(path), newline=""), delimiter="\t")
    examples, previous_end = [], 0
    for row in reader:
        line, previous_end = previous_end + 1, reader.line_num
        if not row:
            continue
        where = f"{path}:{line}"
        if line != reader.line_num:  # a quote opened and not closed on its line
            raise glue.GlueDataError(f"{where}: a quoted text runs on to line "
                                     f"{reader.line_num} (an unclosed quote?)")
        if len(row) != 3:
            raise glue.GlueDataError(f"{where}: expected 3 tab-separated fields (text, label "
                                     f"ids, comment id), found {len(row)}")
        text, ids, comment_id = row
        examples.append(glue.InputExample(comment_id, text, None,
                                          label_ids_to_names(ids, labels, where), where))
    logging.info("read %d examples from %s", len(examples), path)
    return examples


def label_ids_to_names(text: str, labels: Sequence[str], where: str) -> Tuple[str, ...]:
    """'4,27' -> the names of labels 4 and 27, in label order; an id that is not a number
    in [0, K) is a GlueDataError naming `where`."""
    chosen = set()
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()) or int(part) >= len(labels):
            raise glue.GlueDataError(f"{where}: label id {part!r} is not a number from 0 to "
                                     f"{len(labels) - 1} (the lines of {LABELS_FILE})")
        chosen.add(int(part))
    return tuple(labels[i] for i in sorted(chosen))


def sigmoid(logits) -> np.ndarray:
    logits = np.asarray(logits, np.float64)
    return 1.0 / (1.0 + np.exp(-logits))


def _f1_per_threshold(logits: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """[len(THRESHOLD_GRID)]: the F1 of one label (float32 logits [N]) at each threshold of
    the grid."""
    predicted = logits[None, :] > metrics.logit_thresholds(THRESHOLD_GRID)[:, None]
    positive = gold[None, :] == 1
    tp = np.sum(predicted & positive, axis=1)
    fp = np.sum(predicted & ~positive, axis=1)
    fn = np.sum(~predicted & positive, axis=1)
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)


def tune_thresholds(logits, gold) -> np.ndarray:
    """float64 [K]: per label, the grid threshold with the best dev F1 for the dev logits
    [N, K] (ties: nearest to 0.5, then the lower); a label without a positive dev example
    keeps 0.5."""
    logits, gold = np.asarray(logits, np.float32), np.asarray(gold)
    thresholds = np.full([logits.shape[1]], BASELINE_THRESHOLD)
    # Distances in hundredths, exact: 0.3 and 0.7 tie, and the lower one wins.
    distance = np.abs(np.arange(1, 100) - 50)
    for k in range(logits.shape[1]):
        if not gold[:, k].any():
            continue
        scores = _f1_per_threshold(logits[:, k], gold[:, k])
        best = np.flatnonzero(scores == scores.max())
        thresholds[k] = THRESHOLD_GRID[best[np.argmin(distance[best])]]
    return thresholds
