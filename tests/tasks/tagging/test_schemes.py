"""Tag schemes: detection, conversion, repair, label lists and transition constraints.

Validity is checked against definitions written here from each scheme's description
(independently of the library's transition rules): the allowed-transition matrices
must allow exactly the bigrams that occur in some valid sentence, found by brute force.
The real files (CoNLL-2003 in IOB1, MSRA in BIO) come from ../shared/data.
"""
import itertools
import random

import numpy as np
import pytest

from albert_tf.tasks.tagging import schemes
from albert_tf.tasks.tagging.schemes import (
    Entity, allowed_transitions, bioes_to_iob2, convert, detect_scheme, entities,
    from_entities, iob2_to_bioes, iob2_to_iob1, is_valid, labels_from, repair, to_iob2)


# ---------------------------------------------------------------------------------------
# Readers for the two shared files
# ---------------------------------------------------------------------------------------

def read_sentences(path, separator=None):
    """Tag sentences of a column file: the tag is the last column, blank lines separate
    sentences, CoNLL's -DOCSTART- lines are skipped."""
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split(separator) if line.strip() else []
        if fields and fields[0] == "-DOCSTART-":
            continue
        if fields:
            current.append(fields[-1])
        elif current:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


def shared_sentences(shared_data, relative_path, separator=None):
    """The tag sentences of a file under ../shared/data; skips when it is missing."""
    path = shared_data / relative_path
    if not path.exists():
        pytest.skip(f"{path} not found")
    return read_sentences(path, separator)


@pytest.fixture(scope="module")
def conll_sentences(shared_data):
    return shared_sentences(shared_data, "ner/conll2003/eng.train")


@pytest.fixture(scope="module")
def msra_sentences(shared_data):
    return shared_sentences(shared_data, "ner/msra/train.txt", separator="\t")


# ---------------------------------------------------------------------------------------
# Validity from the schemes' definitions
# ---------------------------------------------------------------------------------------

def parts(tag):
    return ("O", None) if tag == "O" else tuple(tag.split("-", 1))


def valid_iob(tags, restricted_prefix):
    """IOB1/IOB2: prefixes O, B, I only, and a tag with `restricted_prefix` (B- in IOB1,
    I- in IOB2) only right after B-X or I-X of its own type X."""
    previous = ("O", None)
    for prefix, type_ in map(parts, tags):
        if prefix not in ("O", "B", "I"):
            return False
        if prefix == restricted_prefix and not (previous[0] in ("B", "I")
                                                and previous[1] == type_):
            return False
        previous = (prefix, type_)
    return True


def valid_iob1(tags):
    """I-X anywhere; B-X only as the first token of a chunk that directly follows
    another chunk of type X, i.e. right after B-X or I-X."""
    return valid_iob(tags, "B")


def valid_iob2(tags):
    """Every chunk is B-X I-X*: an I-X only inside a chunk of type X."""
    return valid_iob(tags, "I")


def valid_bioes(tags):
    """The sentence is a string of O | S-X | B-X I-X* E-X (read by a small automaton)."""
    open_type = None  # type of the B-X I-X* chunk being read, None between chunks
    for prefix, type_ in map(parts, tags):
        if prefix in ("O", "S", "B"):
            if open_type is not None:
                return False
            open_type = type_ if prefix == "B" else None
        elif prefix in ("I", "E"):
            if open_type != type_:
                return False
            open_type = type_ if prefix == "I" else None
        else:
            return False
    return open_type is None


VALID = {"iob1": valid_iob1, "iob2": valid_iob2, "bioes": valid_bioes}


def test_definitions_on_examples():
    assert valid_iob1(["I-X", "I-X", "B-X", "O", "I-Y"]) and not valid_iob1(["B-X"])
    assert valid_iob2(["B-X", "I-X", "B-X", "O", "B-Y"]) and not valid_iob2(["O", "I-X"])
    assert valid_bioes(["B-X", "I-X", "E-X", "S-X", "O"])
    assert not valid_bioes(["B-X", "O"]) and not valid_bioes(["B-X"])
    assert not valid_bioes(["B-X", "E-Y"]) and not valid_bioes(["E-X"])


# ---------------------------------------------------------------------------------------
# Tags and chunks
# ---------------------------------------------------------------------------------------

def test_split_tag_takes_the_prefix_up_to_the_first_hyphen():
    assert schemes.split_tag("O") == ("O", None)
    assert schemes.split_tag("B-ORG-GOV") == ("B", "ORG-GOV")
    assert schemes.split_tag("S-X") == ("S", "X")
    for bad in ("B", "B-", "X-PER", "o", "O-X", "-PER", "", 3):
        with pytest.raises(ValueError, match="not a named-entity tag"):
            schemes.split_tag(bad)


def test_entities_read_as_conlleval_does():
    assert entities([]) == []
    assert entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
    assert entities(["O", "I-PER", "I-PER"]) == [("PER", 1, 3)]        # I- after O starts
    assert entities(["B-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 1), ("LOC", 1, 3)]
    assert entities(["B-X", "B-X", "I-X"]) == [("X", 0, 1), ("X", 1, 3)]
    assert entities(["B-X", "E-X", "I-X", "E-X"]) == [("X", 0, 2), ("X", 2, 4)]
    assert entities(["S-X", "I-X", "E-X", "S-X"]) == [("X", 0, 1), ("X", 1, 3), ("X", 3, 4)]
    assert entities(["E-X", "E-X"]) == [("X", 0, 1), ("X", 1, 2)]
    assert entities(["B-ORG-GOV", "I-ORG-GOV"]) == [Entity("ORG-GOV", 0, 2)]
    with pytest.raises(TypeError):
        entities("B-X")


def test_from_entities_spells_each_scheme():
    chunks = [("X", 0, 2), ("X", 2, 3), ("Y", 4, 5)]
    assert from_entities(chunks, 6, "iob1") == ["I-X", "I-X", "B-X", "O", "I-Y", "O"]
    assert from_entities(chunks, 6, "bio") == ["B-X", "I-X", "B-X", "O", "B-Y", "O"]
    assert from_entities(chunks, 6, "IOBES") == ["B-X", "E-X", "S-X", "O", "S-Y", "O"]
    for bad in ([("X", 0, 2), ("X", 1, 3)], [("X", 2, 2)], [("X", 0, 7)]):
        with pytest.raises(ValueError, match="overlaps"):
            from_entities(bad, 6, "iob2")
    with pytest.raises(ValueError, match="unknown tag scheme"):
        from_entities([], 1, "ioe2")


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------

def test_conversions_on_examples():
    iob1 = ["I-X", "I-X", "B-X", "O", "I-Y", "I-ORG-GOV", "I-ORG-GOV"]
    iob2 = ["B-X", "I-X", "B-X", "O", "B-Y", "B-ORG-GOV", "I-ORG-GOV"]
    bioes = ["B-X", "E-X", "S-X", "O", "S-Y", "B-ORG-GOV", "E-ORG-GOV"]
    assert to_iob2(iob1, "iob1") == iob2
    assert iob2_to_bioes(iob2) == bioes
    assert bioes_to_iob2(bioes) == iob2
    assert iob2_to_iob1(iob2) == iob1
    assert to_iob2(bioes, "bioes") == iob2 and to_iob2(iob2, "iob2") == iob2
    assert convert(bioes, "bioes", "iob1") == iob1
    with pytest.raises(ValueError, match="not a tag of the iob2 scheme"):
        iob2_to_bioes(["S-X"])


def round_trip_and_check(sentences, scheme):
    """Convert every sentence through the three schemes; chunks never change, valid
    sentences come back unchanged. Returns the number of valid sentences."""
    n_valid = 0
    for tags in sentences:
        chunks = entities(tags)
        iob2 = to_iob2(tags, scheme)
        bioes = iob2_to_bioes(iob2)
        iob2_again = bioes_to_iob2(bioes)
        iob1 = iob2_to_iob1(iob2_again)
        for converted, target in ((iob2, "iob2"), (bioes, "bioes"), (iob2_again, "iob2"),
                                  (iob1, "iob1")):
            assert entities(converted) == chunks, (tags, converted)
            assert VALID[target](converted), (tags, converted)
        assert iob2_again == iob2
        assert convert(iob1, "iob1", "iob2") == iob2
        if VALID[scheme](tags):
            n_valid += 1
            assert convert(iob2, "iob2", scheme) == tags
    return n_valid


def test_conll2003_is_iob1_and_round_trips(conll_sentences):
    assert len(conll_sentences) > 500
    assert detect_scheme(conll_sentences) == "iob1"
    # All of the file is valid IOB1 (its few B- tags separate adjacent chunks of one type).
    assert round_trip_and_check(conll_sentences, "iob1") == len(conll_sentences)
    assert any(tag.startswith("B-") for tags in conll_sentences for tag in tags)
    assert detect_scheme([to_iob2(tags, "iob1") for tags in conll_sentences]) == "iob2"
    assert detect_scheme([convert(tags, "iob1", "bioes") for tags in conll_sentences]) == "bioes"


def test_msra_is_bio_and_round_trips(msra_sentences):
    assert len(msra_sentences) > 100
    assert detect_scheme(msra_sentences) == "iob2"
    assert round_trip_and_check(msra_sentences, "iob2") == len(msra_sentences)
    assert detect_scheme([iob2_to_iob1(tags) for tags in msra_sentences]) == "iob1"


def test_labels_from_the_files(conll_sentences, msra_sentences):
    types = ["LOC", "MISC", "ORG", "PER"]
    assert labels_from(conll_sentences, "iob1") == ["O"] + [
        f"{p}-{t}" for t in types for p in "BI"]
    bioes = [convert(tags, "iob1", "bioes") for tags in conll_sentences]
    assert labels_from(bioes, "bioes") == ["O"] + [f"{p}-{t}" for t in types for p in "BIES"]
    assert labels_from(msra_sentences, "bio") == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG",
                                                  "B-PER", "I-PER"]


# ---------------------------------------------------------------------------------------
# Detection
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sentences,expected", [
    ([], "iob2"),
    ([[], ["O", "O"]], "iob2"),
    ([["B-X", "I-X"], ["O", "B-Y", "I-Y"]], "iob2"),
    ([["B-X", "I-X"], ["I-Y"]], "iob1"),                 # I- at the sentence start
    ([["O", "I-X"]], "iob1"),                            # I- after O
    ([["B-X", "I-Y"]], "iob1"),                          # I- after another type
    ([["I-X", "I-X", "B-X"]], "iob1"),
    ([["B-X", "I-X"], ["O", "S-Y"]], "bioes"),
    ([["I-X", "E-X"]], "bioes"),                         # E-/S- win over I- starts
])
def test_detect_scheme(sentences, expected):
    assert detect_scheme(sentences) == expected


def test_detect_scheme_wants_sentences_not_a_sentence():
    with pytest.raises(TypeError, match="sequence of tags"):
        detect_scheme(["B-X", "I-X"])


# ---------------------------------------------------------------------------------------
# Repair
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("tags,scheme,expected,count", [
    (["O", "I-PER", "I-PER"], "iob2", ["O", "B-PER", "I-PER"], 1),
    (["B-LOC", "I-PER", "O"], "iob2", ["B-LOC", "B-PER", "O"], 1),
    (["I-PER", "O", "I-LOC", "I-LOC", "B-X"], "iob2", ["B-PER", "O", "B-LOC", "I-LOC", "B-X"], 2),
    (["B-X", "I-X", "B-X"], "iob2", ["B-X", "I-X", "B-X"], 0),
    (["B-X", "O", "B-X", "I-X", "B-X"], "iob1", ["I-X", "O", "I-X", "I-X", "B-X"], 2),
    (["B-X", "O"], "bioes", ["S-X", "O"], 1),
    (["B-X", "I-X"], "bioes", ["B-X", "E-X"], 1),
    (["O", "I-X", "E-X"], "bioes", ["O", "B-X", "E-X"], 1),
    (["B-X", "I-X", "B-X"], "bioes", ["B-X", "E-X", "S-X"], 2),
    (["E-X", "I-X"], "bioes", ["S-X", "S-X"], 2),
    (["S-X", "E-X"], "bioes", ["S-X", "S-X"], 1),
    (["B-X", "I-Y", "E-Y"], "bioes", ["S-X", "B-Y", "E-Y"], 2),
    (["B-X", "I-X", "E-X", "O", "S-Y"], "bioes", ["B-X", "I-X", "E-X", "O", "S-Y"], 0),
])
def test_repair_examples(tags, scheme, expected, count):
    assert repair(tags, scheme) == (expected, count)
    assert entities(expected) == entities(tags)


def test_repair_refuses_tags_outside_the_scheme():
    with pytest.raises(ValueError, match="not a tag of the iob2 scheme"):
        repair(["B-X", "E-X"], "iob2")


@pytest.mark.parametrize("scheme", ["iob1", "iob2", "bioes"])
def test_repair_fuzz(scheme):
    rng = random.Random(len(scheme))
    tag_set = ["O", "O"] + [f"{p}-{t}" for t in ("A", "B-C") for p in schemes._PREFIXES[scheme]]
    for _ in range(1500):
        tags = [rng.choice(tag_set) for _ in range(rng.randint(0, 7))]
        repaired, count = repair(tags, scheme)
        assert VALID[scheme](repaired) and is_valid(repaired, scheme)
        assert entities(repaired) == entities(tags)                 # how seqeval reads both
        assert count == sum(a != b for a, b in zip(tags, repaired))
        assert (count == 0) == VALID[scheme](tags)                  # valid: untouched
        assert repair(repaired, scheme) == (repaired, 0)


# ---------------------------------------------------------------------------------------
# Label lists and transition constraints
# ---------------------------------------------------------------------------------------

def test_labels_from_is_deterministic_and_complete():
    sentences = [["B-PER", "O"], ["O", "B-ORG-GOV", "I-ORG-GOV"], ["B-LOC"]]
    expected = ["O", "B-LOC", "I-LOC", "B-ORG-GOV", "I-ORG-GOV", "B-PER", "I-PER"]
    assert labels_from(sentences, "iob2") == expected
    assert labels_from(list(reversed(sentences)), "iob2") == expected
    assert labels_from([["S-X", "O"], ["B-A", "E-A"]], "bioes") == [
        "O", "B-A", "I-A", "E-A", "S-A", "B-X", "I-X", "E-X", "S-X"]
    assert labels_from([], "iob2") == ["O"]
    with pytest.raises(ValueError, match="not a tag of the iob2 scheme"):
        labels_from([["S-X"]], "iob2")


def brute_force_transitions(labels, valid, max_length=4):
    """Bigrams, first tags and last tags of every valid sentence of up to max_length tags."""
    index = {label: i for i, label in enumerate(labels)}
    allowed = np.zeros((len(labels), len(labels)), bool)
    start, end = np.zeros(len(labels), bool), np.zeros(len(labels), bool)
    for length in range(1, max_length + 1):
        for tags in itertools.product(labels, repeat=length):
            if valid(tags):
                start[index[tags[0]]] = end[index[tags[-1]]] = True
                for a, b in zip(tags, tags[1:]):
                    allowed[index[a], index[b]] = True
    return allowed, start, end


@pytest.mark.parametrize("scheme", ["iob1", "iob2", "bioes"])
def test_allowed_transitions_reject_exactly_the_invalid_bigrams(scheme):
    labels = labels_from([["B-A", "O"], ["B-ORG-GOV"]], scheme)
    random.Random(3).shuffle(labels)  # tag ids in an arbitrary order
    allowed, start, end = allowed_transitions(labels, scheme)
    assert allowed.shape == (len(labels), len(labels)) and allowed.dtype == bool
    expected = brute_force_transitions(labels, VALID[scheme])
    np.testing.assert_array_equal(allowed, expected[0])
    np.testing.assert_array_equal(start, expected[1])
    np.testing.assert_array_equal(end, expected[2])
    # And the constraints characterise validity: a sentence is valid exactly when its
    # first tag, each bigram and its last tag are allowed.
    index = {label: i for i, label in enumerate(labels)}
    for length in range(1, 4):
        for tags in itertools.product(labels, repeat=length):
            ids = [index[tag] for tag in tags]
            by_matrices = bool(start[ids[0]] and end[ids[-1]]
                               and all(allowed[a, b] for a, b in zip(ids, ids[1:])))
            assert by_matrices == VALID[scheme](tags) == is_valid(tags, scheme), tags


def test_allowed_transitions_examples():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    allowed, start, end = allowed_transitions(labels, "iob2")
    assert not allowed[0, 2] and not allowed[3, 2] and not allowed[4, 2]   # I-PER after O, LOC
    assert allowed[1, 2] and allowed[2, 2] and allowed[2, 3] and allowed[0, 1]
    assert start.tolist() == [True, True, False, True, False] and end.all()
    labels = ["O", "B-X", "I-X", "E-X", "S-X"]
    allowed, start, end = allowed_transitions(labels, "bioes")
    assert start.tolist() == [True, True, False, False, True]
    assert end.tolist() == [True, False, False, True, True]
    assert allowed[1].tolist() == [False, False, True, True, False]        # after B-X
    assert allowed[3].tolist() == [True, True, False, False, True]         # after E-X


def test_allowed_transitions_checks_the_labels():
    with pytest.raises(ValueError, match="repeats"):
        allowed_transitions(["O", "B-X", "B-X"], "iob2")
    with pytest.raises(ValueError, match="not a tag of the iob2 scheme"):
        allowed_transitions(["O", "S-X"], "iob2")
    allowed, start, end = allowed_transitions([], "bioes")
    assert allowed.shape == (0, 0) and start.shape == end.shape == (0,)
