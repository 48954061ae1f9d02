"""Sentence-embedding evaluation (NumPy), as sentence-transformers' EmbeddingSimilarityEvaluator
computes it: the cosine similarity of each pair's two embeddings, and its Spearman and
Pearson correlation with the gold scores (SciPy's `spearmanr` / `pearsonr`, which the
tests compare with)."""
from __future__ import annotations

from typing import Dict

import numpy as np

from albert_tf.finetuning.correlation import pearson, spearman


def cosine_similarities(a, b) -> np.ndarray:
    """float64 [N]: cos(a_i, b_i) of float [N, D] embeddings (0 for a zero vector)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms > 0, (a * b).sum(axis=1) / np.maximum(norms, 1e-300), 0.0)


def similarity_metrics(similarities, scores) -> Dict[str, float]:
    """`spearman` (the best-checkpoint metric) and `pearson` of similarities [N] against
    gold scores [N], and `eval_examples`."""
    return {"spearman": spearman(similarities, scores),
            "pearson": pearson(similarities, scores), "eval_examples": len(scores)}
