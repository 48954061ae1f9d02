"""Entity-level precision, recall and F1, and token accuracy, as seqeval 1.2.2 computes them.

`entity_scores` gives the figures of seqeval's default (conlleval-compatible) mode:
``precision_score``, ``recall_score`` and ``f1_score`` with ``average="micro"``,
``classification_report(output_dict=True)``'s row per type, and ``accuracy_score``.
It is written from their definitions, in pure Python (seqeval is a test-only reference):

* Chunks are read from each sentence by `schemes.entities` (conlleval's lenient rules:
  ``I-X`` after ``O`` starts a chunk, a type change ends one, ...), so the scheme of
  the tags need not be named and invalid predictions are scored as conlleval would.
  A predicted chunk is correct when a gold chunk has the same type, start and end.
* precision = correct / predicted, recall = correct / gold, both over all types for the
  micro figures and over one type for its row; f1 = 2 · precision · recall /
  (precision + recall), computed from the two rounded ratios in that order, as seqeval
  does, so the floats are equal to seqeval's, not merely close.
* Zero divisions follow seqeval's default ``zero_division="warn"``, which sets the
  undefined figure to 0.0 (and warns; this module does not): precision is 0.0 when
  nothing is predicted, recall 0.0 when there is no gold chunk, f1 0.0 when precision +
  recall is 0. So with no gold chunks every figure is 0.0, even when the prediction is
  empty too (not 1.0); with gold chunks but no prediction, precision, recall and f1 are
  all 0.0.
* The per-type rows cover every type found in gold *or* prediction (sorted): a type
  only predicted has support 0 and precision = recall = f1 = 0.0; a type only in gold
  has precision 0.0 (nothing predicted) and recall 0.0.
* token_accuracy is the fraction of tokens whose predicted tag string equals the gold
  one (``O`` tokens included).

Where seqeval raises or warns instead, this module says so: tags that are not ``O`` or
``B-``/``I-``/``E-``/``S-`` plus a type are refused with a ValueError (seqeval warns and
guesses); sentences of different lengths raise ValueError (as in seqeval); an input with
no token at all scores 0.0 everywhere (there seqeval's ``accuracy_score`` raises
ZeroDivisionError, and its entity scores refuse an empty list of sentences with a
TypeError; a list of empty sentences gives them 0.0).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, Iterable, Sequence, Set, Tuple

from albert_tf.tasks.tagging.schemes import entities


def _ratio(numerator: int, denominator: int) -> float:
    """numerator / denominator, or 0.0 when the denominator is 0 (seqeval's default)."""
    return numerator / denominator if denominator else 0.0


def precision_recall_f1(correct: int, predicted: int, gold: int) -> Tuple[float, float, float]:
    """(precision, recall, f1) from the three counts, with seqeval's zero-division rule."""
    precision = _ratio(correct, predicted)
    recall = _ratio(correct, gold)
    denominator = precision + recall
    f1 = 2 * precision * recall / denominator if denominator else 0.0
    return precision, recall, f1


def entity_scores(gold_sentences: Iterable[Sequence[str]],
                  predicted_sentences: Iterable[Sequence[str]]) -> Dict[str, object]:
    """Entity-level scores of predicted tag sentences against gold ones (seqeval's figures).

    Both arguments are sequences of sentences, each a sequence of tags, sentence i of
    the prediction having as many tags as sentence i of the gold. Returns::

        {"precision": float, "recall": float, "f1": float,   # micro, over all types
         "support": int,        # gold chunks
         "predicted": int,      # predicted chunks
         "correct": int,        # predicted chunks equal to a gold chunk
         "token_accuracy": float,
         "per_type": {type: {"precision": float, "recall": float, "f1": float,
                             "support": int}}}   # types sorted by name

    See the module docstring for the zero-division cases.
    """
    gold_sentences = [list(sentence) for sentence in gold_sentences]
    predicted_sentences = [list(sentence) for sentence in predicted_sentences]
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError(f"{len(gold_sentences)} gold sentences but "
                         f"{len(predicted_sentences)} predicted ones")

    # Chunks of each type, identified by (sentence index, start, end).
    gold_chunks: Dict[str, Set[Tuple[int, int, int]]] = defaultdict(set)
    predicted_chunks: Dict[str, Set[Tuple[int, int, int]]] = defaultdict(set)
    equal_tokens = total_tokens = 0
    for index, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
        if len(gold) != len(predicted):
            raise ValueError(f"sentence {index}: {len(gold)} gold tags but "
                             f"{len(predicted)} predicted ones")
        for chunks, tags in ((gold_chunks, gold), (predicted_chunks, predicted)):
            for type_, start, end in entities(tags):
                chunks[type_].add((index, start, end))
        equal_tokens += sum(a == b for a, b in zip(gold, predicted))
        total_tokens += len(gold)

    per_type = {}
    correct = 0
    for type_ in sorted(gold_chunks.keys() | predicted_chunks.keys()):
        gold_set, predicted_set = gold_chunks[type_], predicted_chunks[type_]
        type_correct = len(gold_set & predicted_set)
        precision, recall, f1 = precision_recall_f1(type_correct, len(predicted_set),
                                                    len(gold_set))
        per_type[type_] = {"precision": precision, "recall": recall, "f1": f1,
                           "support": len(gold_set)}
        correct += type_correct

    support = sum(len(chunks) for chunks in gold_chunks.values())
    predicted = sum(len(chunks) for chunks in predicted_chunks.values())
    precision, recall, f1 = precision_recall_f1(correct, predicted, support)
    return {"precision": precision, "recall": recall, "f1": f1,
            "support": support, "predicted": predicted, "correct": correct,
            "token_accuracy": _ratio(equal_tokens, total_tokens),
            "per_type": per_type}
