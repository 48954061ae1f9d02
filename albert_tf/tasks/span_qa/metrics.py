"""SQuAD metrics as defined by the official evaluation scripts (v1.1 and v2.0).

Normalisation (both versions): lower-case, drop every `string.punctuation`
character, replace the whole words a / an / the by a space, collapse
whitespace. Exact match compares normalised strings; F1 is the harmonic mean
of token precision and recall with multiset (Counter) overlap; each question
takes the max over its gold answers.

v1.1 (`evaluate_v1`): `exact_match`, `f1` in percent over every question.
v2.0 (`evaluate_v2`): unanswerable questions have the single gold answer "";
F1 of an empty prediction or gold is 1 if both are empty, else 0. With
no-answer probabilities (`na_probs`, e.g. the `null_odds.json` written by
prediction) a question is predicted unanswerable when its value is
> `na_prob_thresh` (default 1.0, as the official script). Reported: `exact`,
`f1`, `total`, `HasAns_*` / `NoAns_*` splits, and with na_probs `best_exact`,
`best_exact_thresh`, `best_f1`, `best_f1_thresh`: the best score over all
thresholds, swept as the official script does (questions sorted by na_prob,
threshold = the na_prob of the last question kept as answered).

Missing predictions (a choice of this project, documented): every question
of the data set counts; a question without a prediction scores 0 (the official
v1.1 script does this; the official v2.0 script would drop it from the total
or crash on the HasAns/NoAns split). They are listed in `missing` and counted
in `missing_predictions`. With every prediction present the numbers are
exactly the official ones.
"""
from __future__ import annotations

import collections
import re
import string
from typing import Dict, List, Mapping, Optional, Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> List[str]:
    return normalize_answer(text).split() if text else []


def exact_score(gold: str, prediction: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score_v1(gold: str, prediction: str) -> float:
    """v1.1: 0 when nothing overlaps (including when either side is empty)."""
    gold_tokens, pred_tokens = normalize_answer(gold).split(), normalize_answer(prediction).split()
    common = collections.Counter(gold_tokens) & collections.Counter(pred_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score_v2(gold: str, prediction: str) -> float:
    """v2.0: as v1.1, except that empty vs empty scores 1 (and empty vs not 0)."""
    gold_tokens, pred_tokens = answer_tokens(gold), answer_tokens(prediction)
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)
    return f1_score_v1(gold, prediction)


def _questions(dataset: Sequence[Mapping]):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset: Sequence[Mapping], predictions: Mapping[str, str]) -> Dict:
    """The official v1.1 numbers: {exact_match, f1} (+ missing_predictions, missing)."""
    total = exact = f1 = 0.0
    missing = []
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            missing.append(qa["id"])
            continue
        prediction = predictions[qa["id"]]
        golds = [answer["text"] for answer in qa["answers"]] or [""]  # v2 data scored as v1
        exact += max(exact_score(g, prediction) for g in golds)
        f1 += max(f1_score_v1(g, prediction) for g in golds)
    return {"exact_match": 100.0 * exact / max(total, 1), "f1": 100.0 * f1 / max(total, 1),
            "total": int(total), "missing_predictions": len(missing), "missing": missing}


def raw_scores_v2(dataset: Sequence[Mapping], predictions: Mapping[str, str]):
    """Per-question exact and F1 (missing predictions are absent), has-answer map."""
    exact, f1, has_answer = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
        has_answer[qid] = bool(qa["answers"])
        if not golds:
            golds = [""]
        if qid not in predictions:
            continue
        exact[qid] = max(exact_score(g, predictions[qid]) for g in golds)
        f1[qid] = max(f1_score_v2(g, predictions[qid]) for g in golds)
    return exact, f1, has_answer


def apply_no_answer_threshold(scores: Mapping[str, float], na_probs: Mapping[str, float],
                              has_answer: Mapping[str, bool], threshold: float) -> Dict:
    """Scores after predicting "no answer" wherever na_prob > threshold."""
    return {qid: (float(not has_answer[qid]) if na_probs.get(qid, 0.0) > threshold else s)
            for qid, s in scores.items()}


def best_threshold(predictions: Mapping[str, str], scores: Mapping[str, float],
                   na_probs: Mapping[str, float], has_answer: Mapping[str, bool],
                   total: int):
    """The official sweep: (best score in percent of `total`, its threshold).

    Start with every question predicted unanswerable, then keep answers in
    increasing na_prob order; the threshold is the na_prob of the last kept
    question of the best prefix (0.0 when answering nothing is best). Questions
    without a prediction score 0 and take no part in the sweep.
    """
    score = sum(1 for qid in scores if not has_answer[qid])
    best, best_thresh = score, 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        score += diff
        if score > best:
            best, best_thresh = score, na_probs[qid]
    return 100.0 * best / max(total, 1), best_thresh


def _split(exact: Mapping, f1: Mapping, qids: Sequence[str]) -> Dict:
    total = len(qids)
    return {"exact": 100.0 * sum(exact.get(q, 0) for q in qids) / total,
            "f1": 100.0 * sum(f1.get(q, 0) for q in qids) / total, "total": total}


def evaluate_v2(dataset: Sequence[Mapping], predictions: Mapping[str, str],
                na_probs: Optional[Mapping[str, float]] = None,
                na_prob_thresh: float = 1.0) -> Dict:
    """The official v2.0 numbers (see the module docstring)."""
    exact_raw, f1_raw, has_answer = raw_scores_v2(dataset, predictions)
    missing = [qid for qid in has_answer if qid not in predictions]
    probs = dict(na_probs) if na_probs is not None else {k: 0.0 for k in predictions}
    exact = apply_no_answer_threshold(exact_raw, probs, has_answer, na_prob_thresh)
    f1 = apply_no_answer_threshold(f1_raw, probs, has_answer, na_prob_thresh)
    qids = list(has_answer)
    out = _split(exact, f1, qids) if qids else {"exact": 0.0, "f1": 0.0, "total": 0}
    has = [q for q in qids if has_answer[q]]
    no = [q for q in qids if not has_answer[q]]
    for prefix, subset in (("HasAns", has), ("NoAns", no)):
        if subset:
            for key, value in _split(exact, f1, subset).items():
                out[f"{prefix}_{key}"] = value
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = best_threshold(
            predictions, exact_raw, probs, has_answer, len(qids))
        out["best_f1"], out["best_f1_thresh"] = best_threshold(
            predictions, f1_raw, probs, has_answer, len(qids))
    out["missing_predictions"] = len(missing)
    out["missing"] = missing
    return out


def is_v2_dataset(dataset: Sequence[Mapping]) -> bool:
    """True when any question carries `is_impossible` (a SQuAD v2.0 file)."""
    return any("is_impossible" in qa for qa in _questions(dataset))
