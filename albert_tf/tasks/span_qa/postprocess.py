"""SQuAD post-processing: model outputs per window -> answers per question.

The original's rules (squad_utils write_predictions_v1 / v2):
* v1: per window the `n_best_size` best start and end logits; a pair is kept
  when both are document tokens of the window, the start is in its max-context
  window, end >= start and the span has at most `max_answer_length` tokens;
  score = start + end logit.
* v2: the pairs of the beam (start_n_top x end_n_top) with the same filters;
  score = start + end log-probability; the null score of a question is the
  minimum `cls_logits` over its windows (written to null_odds.json).
* Then over all windows of a question: sort by score (stable), turn spans into
  original text (`paragraph[orig_start:orig_end + 1].strip()`), drop repeated
  texts, keep `n_best_size`, softmax the scores into probabilities.
* With nothing valid, v1 answers the original's nonce "empty", v2 "".
* v2 thresholding: the answer is "" when null_score > threshold (the official
  evaluation's `na_prob > thresh`; the original writes "" already at equality,
  which can disagree with the threshold's own best_f1 by one question).

Inputs are NumPy arrays keyed by name, one row per window (feature):
features from `squad_features.read_feature_arrays` / `features_to_arrays`,
results with `unique_ids` and the model's outputs.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from albert_tf.tasks.span_qa.data import SquadExample

V1_EMPTY_TEXT = "empty"  # the original's answer when no span is valid (v1)


@dataclasses.dataclass
class PostprocessOptions:
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: Optional[float] = None


@dataclasses.dataclass
class SquadPredictions:
    """answers {qid: text}, nbest {qid: [..]}, null_odds {qid: score} (v2 only)."""

    answers: "collections.OrderedDict[str, str]"
    nbest: "collections.OrderedDict[str, list]"
    null_odds: "collections.OrderedDict[str, float]"

    def with_threshold(self, threshold: Optional[float]) -> "collections.OrderedDict":
        """v2 answers after predicting "" wherever null_odds > threshold."""
        out = collections.OrderedDict()
        for qid, entries in self.nbest.items():
            best = entries[0]["text"]
            out[qid] = "" if threshold is not None and self.null_odds[qid] > threshold else best
        return out


def _top_indexes(values: np.ndarray, n: int) -> List[int]:
    """Indexes of the n largest values, larger first, lower index first on ties."""
    order = np.argsort(-values, kind="stable")
    return [int(i) for i in order[:n]]


def _softmax(scores: Sequence[float]) -> List[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _valid(start: int, end: int, orig_start: np.ndarray, max_context: np.ndarray,
           max_answer_length: int) -> bool:
    if start < 0 or end < 0 or start >= len(orig_start) or end >= len(orig_start):
        return False
    if orig_start[start] < 0 or orig_start[end] < 0:
        return False
    if not max_context[start] or end < start:
        return False
    return end - start + 1 <= max_answer_length


def _candidates_v1(row: Mapping[str, np.ndarray], result: Mapping[str, np.ndarray],
                   options: PostprocessOptions):
    starts = _top_indexes(result["start_logits"], options.n_best_size)
    ends = _top_indexes(result["end_logits"], options.n_best_size)
    for s in starts:
        for e in ends:
            if _valid(s, e, row["orig_start"], row["max_context"], options.max_answer_length):
                yield s, e, float(result["start_logits"][s]), float(result["end_logits"][e])


def _candidates_v2(row, result, options: PostprocessOptions):
    start_n = len(result["start_top_index"])
    end_n = len(result["end_top_index"]) // max(start_n, 1)
    for i in range(start_n):
        s = int(result["start_top_index"][i])
        for j in range(end_n):
            e = int(result["end_top_index"][i * end_n + j])
            if _valid(s, e, row["orig_start"], row["max_context"], options.max_answer_length):
                yield (s, e, float(result["start_top_log_probs"][i]),
                       float(result["end_top_log_probs"][i * end_n + j]))


def postprocess(examples: Sequence[SquadExample], features: Mapping[str, np.ndarray],
                results: Mapping[str, np.ndarray], options: PostprocessOptions
                ) -> SquadPredictions:
    """Answers, n-best lists and (v2) null odds for every example.

    features: arrays with `unique_ids`, `example_index` [F], `orig_start`,
      `orig_end`, `max_context` [F, S].
    results: arrays with `unique_ids` [F] and, for v1, `start_logits`,
      `end_logits` [F, S]; for v2, `start_top_log_probs`, `start_top_index`
      [F, k1], `end_top_log_probs`, `end_top_index` [F, k1 * k2], `cls_logits` [F].
    A feature without a result raises (naming its unique id).
    """
    v2 = options.version_2_with_negative
    row_of_result = {int(uid): i for i, uid in enumerate(results["unique_ids"])}
    by_example = collections.defaultdict(list)
    for i, example_index in enumerate(features["example_index"]):
        by_example[int(example_index)].append(i)
    answers, nbest_json, null_odds = (collections.OrderedDict() for _ in range(3))
    for example_index, example in enumerate(examples):
        prelim = []
        score_null = 1000000.0  # the original's "large and positive" start
        for feature_row in by_example.get(example_index, []):
            uid = int(features["unique_ids"][feature_row])
            if uid not in row_of_result:
                raise KeyError(f"no model output for feature {uid} (question id "
                               f"{example.qas_id})")
            r = row_of_result[uid]
            row = {name: features[name][feature_row]
                   for name in ("orig_start", "orig_end", "max_context")}
            result = {name: value[r] for name, value in results.items()}
            if v2:
                score_null = min(score_null, float(result["cls_logits"]))
                candidates = _candidates_v2(row, result, options)
            else:
                candidates = _candidates_v1(row, result, options)
            for s, e, start_score, end_score in candidates:
                prelim.append((start_score + end_score, int(row["orig_start"][s]),
                               int(row["orig_end"][e]), start_score, end_score))
        prelim.sort(key=lambda p: p[0], reverse=True)  # stable: window, start, end order
        seen, nbest = set(), []
        for _, orig_start, orig_end, start_score, end_score in prelim:
            if len(nbest) >= options.n_best_size:
                break
            text = example.paragraph_text[orig_start:orig_end + 1].strip()
            if text in seen:
                continue
            seen.add(text)
            nbest.append((text, start_score, end_score))
        if not nbest:
            nbest = [("", -1e6, -1e6)] if v2 else [(V1_EMPTY_TEXT, 0.0, 0.0)]
        probs = _softmax([s + e for _, s, e in nbest])
        entries = [collections.OrderedDict(text=t, probability=p, start_log_prob=s,
                                           end_log_prob=e)
                   for (t, s, e), p in zip(nbest, probs)]
        nbest_json[example.qas_id] = entries
        answers[example.qas_id] = entries[0]["text"]
        if v2:
            null_odds[example.qas_id] = score_null
    predictions = SquadPredictions(answers, nbest_json, null_odds)
    if v2:
        predictions.answers = predictions.with_threshold(options.null_score_diff_threshold)
    return predictions


def write_predictions(output_dir: str, predictions: SquadPredictions,
                      answers: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Writes predictions.json, nbest_predictions.json and (v2) null_odds.json atomically."""
    import os

    from albert_tf import fileio

    paths = {"predictions": os.path.join(output_dir, "predictions.json"),
             "nbest": os.path.join(output_dir, "nbest_predictions.json")}
    fileio.atomic_write_text(paths["predictions"],
                             json.dumps(answers or predictions.answers, indent=4) + "\n")
    fileio.atomic_write_text(paths["nbest"], json.dumps(predictions.nbest, indent=4) + "\n")
    if predictions.null_odds:
        paths["null_odds"] = os.path.join(output_dir, "null_odds.json")
        fileio.atomic_write_text(paths["null_odds"],
                                 json.dumps(predictions.null_odds, indent=4) + "\n")
    return paths
