"""CMRC 2018 metrics, to the definitions of the official evaluation script.

The official script (`cmrc2018_evaluate.py`, "v5 - special", Python 2 with
NLTK) defines, for a gold answer and a prediction:

- Text preparation: lower-case, strip surrounding whitespace.
- Punctuation: exactly the characters of its list `- : _ * ^ / \\ ~ ` + =`
  and `，。：？！“”；’《》·、「」（）－～『』`. (Its list also has the two-character
  string "……", which never equals a single character, so "…" is kept; so are
  "‘", ASCII quotes, brackets, "." "," "?" "!" and full-width spaces.)
- Segments (for F1): punctuation characters are dropped; each character in
  U+4E00..U+9FA5 is a segment; every maximal run of the other characters
  (English, digits, spaces, other scripts) is split by NLTK's `word_tokenize`
  (`albert_tf.tasks.span_qa.cmrc_tokenize`). Dropped punctuation joins the text
  around it: "a-b" is the single segment "ab".
- F1: L = length of the longest common *contiguous* run of segments (longest
  common substring over segment lists); 0 when L = 0, else
  2PR/(P+R) with P = L / len(prediction segments), R = L / len(gold segments).
- Exact match: the prepared texts with the punctuation characters removed are
  equal (no other normalisation: inner spaces count).
- Each question takes the maximum over its gold answers; `exact_match` and
  `f1` are 100 x the mean over all questions of the data set, and a question
  without a prediction scores 0 and is counted in `skip` (the script's SKIP;
  the question id is looked up with surrounding whitespace stripped, as the
  script does). `average` is the script's AVERAGE, (EM + F1) / 2.

The script prints its figures rounded to 3 decimals; `evaluate` returns
them unrounded.
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Sequence

from albert_tf.tasks.span_qa import cmrc_tokenize

PUNCTUATION = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")
_CHINESE = re.compile("[\u4e00-\u9fa5]")


def _prepare(text: str) -> str:
    # Python 2's unicode.lower() (the script's) maps each character on its own: no
    # final-sigma rule, and U+0130 (İ) -> "i", where Python 3 gives "i̇".
    return "".join("i" if char == "\u0130" else char.lower() for char in text).strip()


def segment(text: str) -> List[str]:
    """The script's mixed Chinese/English segments of `text`, punctuation removed."""
    segments: List[str] = []
    run: List[str] = []
    for char in _prepare(text):
        if char in PUNCTUATION:
            continue
        if _CHINESE.match(char):
            if run:
                segments.extend(cmrc_tokenize.word_tokenize("".join(run)))
                run = []
            segments.append(char)
        else:
            run.append(char)
    if run:
        segments.extend(cmrc_tokenize.word_tokenize("".join(run)))
    return segments


def remove_punctuation(text: str) -> str:
    """The script's exact-match normal form: prepared text without punctuation."""
    return "".join(char for char in _prepare(text) if char not in PUNCTUATION)


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest contiguous sub-sequence common to `a` and `b`."""
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def f1_score(gold: str, prediction: str) -> float:
    """F1 in [0, 1] of one prediction against one gold answer."""
    gold_segments, pred_segments = segment(gold), segment(prediction)
    common = longest_common_run(gold_segments, pred_segments)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_segments), common / len(gold_segments)
    return 2 * precision * recall / (precision + recall)


def exact_score(gold: str, prediction: str) -> int:
    return int(remove_punctuation(gold) == remove_punctuation(prediction))


def evaluate(dataset: Sequence[Mapping], predictions: Mapping[str, str]) -> Dict:
    """The official CMRC 2018 figures.

    Args:
      dataset: the `data` list of a SQuAD-format JSON file (articles with
        `paragraphs` -> `qas` -> `id`, `answers` [{`text`}, ...]).
      predictions: {question id: predicted text}.

    Returns:
      JSON-able dict: `exact_match`, `f1`, `average` (percent, 0-100),
      `total` (questions in `dataset`), `skip` (questions without a
      prediction, scored 0), `missing_predictions` (the same count, under the
      name the SQuAD metrics use) and `missing` (their ids, file order).

    Raises:
      ValueError: a predicted question without gold answers (the script would
        crash; unpredicted, it is a skip as there), or a prediction that is not a string.
    """
    total, exact, f1 = 0, 0, 0.0
    missing = []
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qid = qa["id"].strip()
                total += 1
                golds = [answer["text"] for answer in qa.get("answers") or []]
                if qid not in predictions:
                    missing.append(qid)
                    continue
                if not golds:
                    raise ValueError(f"question id {qid}: no gold answers (the CMRC 2018 "
                                     "metric needs at least one per question)")
                prediction = predictions[qid]
                if not isinstance(prediction, str):
                    raise ValueError(f"question id {qid}: the prediction must be a string, "
                                     f"got {prediction!r}")
                f1 += max(f1_score(gold, prediction) for gold in golds)
                exact += max(exact_score(gold, prediction) for gold in golds)
    em_percent = 100.0 * exact / total if total else 0.0
    f1_percent = 100.0 * f1 / total if total else 0.0
    return {"exact_match": em_percent, "f1": f1_percent,
            "average": (em_percent + f1_percent) / 2, "total": total, "skip": len(missing),
            "missing_predictions": len(missing), "missing": missing}
