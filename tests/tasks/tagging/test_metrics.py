"""Entity chunks and scores against seqeval 1.2.2, the test-only reference.

`schemes.entities` must give the chunks of seqeval's default-mode ``get_entities``
(whose ends are inclusive: seqeval's (type, start, last) is (type, start, last + 1)
here), and `metrics.entity_scores` the very floats of ``precision_score``,
``recall_score``, ``f1_score`` (average="micro"), ``classification_report`` per type and
``accuracy_score``: on hand-made adversarial cases and on seeded random ones.
"""
import random
import warnings

import pytest

from albert_tf.tasks.tagging.metrics import entity_scores, precision_recall_f1
from albert_tf.tasks.tagging.schemes import entities

seqeval_metrics = pytest.importorskip("seqeval.metrics", reason="seqeval is the test reference")
from seqeval.metrics.sequence_labeling import get_entities  # noqa: E402

# A small tag set over which random sequences hit every lenient-reading rule: all four
# prefixes, two types, and a hyphenated type.
FUZZ_TAGS = ["O", "O", "B-A", "I-A", "E-A", "S-A", "B-B", "I-B", "E-B", "S-B",
             "B-ORG-GOV", "I-ORG-GOV"]


def seqeval_entities(tags):
    """seqeval's chunks with the end made exclusive."""
    return [(type_, start, last + 1) for type_, start, last in get_entities(list(tags))]


def seqeval_figures(gold, predicted):
    """What seqeval's default mode reports, in the shape `entity_scores` returns."""
    gold, predicted = [list(s) for s in gold], [list(s) for s in predicted]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # UndefinedMetricWarning on zero divisions
        report = seqeval_metrics.classification_report(gold, predicted, output_dict=True)
        figures = {
            "precision": seqeval_metrics.precision_score(gold, predicted),
            "recall": seqeval_metrics.recall_score(gold, predicted),
            "f1": seqeval_metrics.f1_score(gold, predicted),
            "support": int(report["micro avg"]["support"]),
        }
    figures["per_type"] = {
        name: {"precision": row["precision"], "recall": row["recall"],
               "f1": row["f1-score"], "support": int(row["support"])}
        for name, row in report.items() if not name.endswith(" avg")}
    if any(gold):  # seqeval divides by zero on no token at all
        figures["token_accuracy"] = seqeval_metrics.accuracy_score(gold, predicted)
    return figures


def assert_matches_seqeval(gold, predicted):
    """Exact equality (same float operations), and plain Python numbers on our side."""
    ours = entity_scores(gold, predicted)
    reference = seqeval_figures(gold, predicted)
    for key in ("precision", "recall", "f1", "support", "token_accuracy"):
        if key in reference:
            assert ours[key] == reference[key], (key, ours[key], reference[key])
    assert ours["per_type"] == reference["per_type"]
    assert list(ours["per_type"]) == list(reference["per_type"])  # same (sorted) order
    for value in (ours["precision"], ours["recall"], ours["f1"], ours["token_accuracy"]):
        assert type(value) is float
    return ours


# (name, gold sentences, predicted sentences)
ADVERSARIAL = [
    ("nested-looking tags",
     [["B-PER", "I-PER", "B-LOC", "I-LOC", "I-PER", "O"]],
     [["B-PER", "I-PER", "I-LOC", "I-LOC", "I-PER", "O"]]),
    ("IOB1 starts against IOB2 starts",
     [["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]],
     [["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC"]]),
    ("I- without B-",
     [["O", "B-PER", "I-PER", "O", "B-ORG"]],
     [["O", "I-PER", "I-PER", "O", "I-ORG"]]),
    ("I- after another type",
     [["B-PER", "I-PER", "I-PER"]],
     [["B-LOC", "I-PER", "I-PER"]]),
    ("single-token entities",
     [["B-X", "O", "B-Y", "B-Y", "S-X"]],
     [["S-X", "O", "B-Y", "I-Y", "B-X"]]),
    ("entities at sentence end",
     [["O", "O", "B-X", "I-X"], ["O", "B-Y"]],
     [["O", "O", "O", "B-X"], ["O", "I-Y"]]),
    ("type change mid-chunk",
     [["B-PER", "I-PER", "I-PER", "O"]],
     [["B-PER", "I-LOC", "I-PER", "O"]]),
    ("BIOES oddities: E after O, I after E, S then E, B then O",
     [["B-X", "E-X", "S-X", "B-X", "I-X", "E-X", "O"]],
     [["E-X", "I-X", "S-X", "E-X", "I-X", "E-X", "B-X"]]),
    ("empty gold",
     [["O", "O"], ["O"]],
     [["B-X", "O"], ["I-Y"]]),
    ("empty prediction",
     [["B-X", "O"], ["I-Y"]],
     [["O", "O"], ["O"]]),
    ("all O", [["O", "O", "O"]], [["O", "O", "O"]]),
    ("a type only in the prediction, another only in gold",
     [["B-PER", "I-PER", "O"]],
     [["B-LOC", "I-LOC", "O"]]),
    ("multi-sentence: chunks never cross a sentence boundary",
     [["O", "B-X"], ["I-X", "O"], ["B-X", "I-X"]],
     [["O", "B-X"], ["B-X", "O"], ["B-X", "I-X"]]),
    ("hyphenated types",
     [["B-ORG-GOV", "I-ORG-GOV", "O", "B-ORG", "I-ORG-GOV"]],
     [["B-ORG-GOV", "I-ORG-GOV", "O", "B-ORG", "I-ORG"]]),
    ("empty sentences among others",
     [[], ["B-X"], []],
     [[], ["B-X"], []]),
    ("perfect", [["B-X", "I-X", "O", "S-Y"]], [["B-X", "I-X", "O", "S-Y"]]),
]


@pytest.mark.parametrize("gold,predicted", [case[1:] for case in ADVERSARIAL],
                         ids=[case[0] for case in ADVERSARIAL])
def test_adversarial_cases_match_seqeval(gold, predicted):
    assert_matches_seqeval(gold, predicted)
    for sentence in gold + predicted:
        assert entities(sentence) == seqeval_entities(sentence)


def test_zero_division_cases_are_zero_like_seqeval_default():
    # No gold chunk and no prediction: every figure 0.0 (seqeval's zero_division="warn").
    scores = assert_matches_seqeval([["O", "O"]], [["O", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["per_type"] == {} and scores["token_accuracy"] == 1.0
    # Predictions but no gold: precision 0/1, recall 0/0 -> 0.0.
    scores = assert_matches_seqeval([["O", "O"]], [["B-X", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["per_type"] == {"X": {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                        "support": 0}}
    # Gold but no prediction: precision 0/0 -> 0.0, recall 0/1.
    scores = assert_matches_seqeval([["B-X", "O"]], [["O", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["per_type"]["X"]["support"] == 1
    # A list of empty sentences: seqeval gives 0.0 (and cannot compute token accuracy).
    scores = entity_scores([[]], [[]])
    assert scores["f1"] == seqeval_figures([[]], [[]])["f1"] == 0.0
    assert scores["token_accuracy"] == 0.0
    assert entity_scores([], [])["f1"] == 0.0


def test_hand_computed_example():
    # gold: PER[0,2) LOC[3,4) MISC[5,6); predicted: PER[0,2) LOC[3,5) MISC[5,6) ORG[6,7)
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-MISC", "O"]]
    predicted = [["I-PER", "I-PER", "O", "B-LOC", "I-LOC", "B-MISC", "B-ORG"]]
    scores = assert_matches_seqeval(gold, predicted)
    assert (scores["support"], scores["predicted"], scores["correct"]) == (3, 4, 2)
    assert scores["precision"] == 2 / 4 and scores["recall"] == 2 / 3
    assert scores["f1"] == pytest.approx(2 * 2 / (3 + 4))
    assert scores["token_accuracy"] == 4 / 7
    assert scores["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                         "support": 1}


def test_precision_recall_f1_from_counts():
    assert precision_recall_f1(0, 0, 0) == (0.0, 0.0, 0.0)
    assert precision_recall_f1(1, 2, 4) == (0.5, 0.25, 2 * 0.5 * 0.25 / 0.75)


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="2 gold sentences but 1"):
        entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1: 2 gold tags but 1"):
        entity_scores([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="not a named-entity tag"):
        entity_scores([["B-X", "PER"]], [["B-X", "O"]])


def random_sentence(rng, max_length=8):
    return [rng.choice(FUZZ_TAGS) for _ in range(rng.randint(0, max_length))]


def test_entities_fuzz_against_seqeval_get_entities():
    rng = random.Random(20240601)
    for _ in range(4000):
        tags = random_sentence(rng)
        assert entities(tags) == seqeval_entities(tags), tags


def test_scores_fuzz_against_seqeval():
    rng = random.Random(7)
    for _ in range(250):
        gold = [random_sentence(rng, 6) for _ in range(rng.randint(1, 4))]
        # Mostly-correct predictions, so that some chunks match and some do not.
        predicted = [[tag if rng.random() < 0.7 else rng.choice(FUZZ_TAGS) for tag in s]
                     for s in gold]
        assert_matches_seqeval(gold, predicted)
