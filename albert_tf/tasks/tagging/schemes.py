"""Named-entity tag schemes: IOB1, IOB2 (BIO) and BIOES.

A tag is ``O`` (outside any entity) or ``P-TYPE``: a one-letter prefix ``P`` from
``B`` (begin), ``I`` (inside), ``E`` (end), ``S`` (single), a hyphen, and a non-empty
type name. The prefix is what stands before the *first* hyphen, so ``B-ORG-GOV`` is
prefix ``B`` of type ``ORG-GOV``. Anything else (``B``, ``B-``, ``X-PER``, ``o``) is
refused with a ValueError naming the tag.

The three schemes spell the same chunks differently:

* IOB1 (CoNLL-2003's files): every token of a chunk is ``I-X``, except that the first
  token of a chunk that directly follows another chunk of the same type X is ``B-X``.
  ``B-X`` is therefore valid only right after ``B-X`` or ``I-X``.
* IOB2, also called BIO: the first token of every chunk is ``B-X``, the rest ``I-X``.
  ``I-X`` is valid only right after ``B-X`` or ``I-X``.
* BIOES: a one-token chunk is ``S-X``; a longer one is ``B-X``, then ``I-X`` for the
  middle tokens, and ``E-X`` for the last. ``I-X`` and ``E-X`` are valid only right
  after ``B-X`` or ``I-X``; ``O``, ``B-`` and ``S-`` only where no chunk is left open
  (after ``O``, ``E-`` or ``S-``, or at the start); a sentence may not end on ``B-``/``I-``.

Reading chunks (`entities`) follows conlleval's lenient rules, which seqeval 1.2.2
applies in its default mode and which accept any sequence, valid or not:

    a token tagged ``I-X`` or ``E-X`` continues the chunk of the previous token when
    that token is ``B-X`` or ``I-X`` (same type X); every other non-``O`` tag starts a
    new chunk; a chunk ends before ``O``, before a tag that starts a new chunk, and at
    the end of the sentence.

So ``I-X`` after ``O`` (or after another type) starts a chunk, a type change ends one,
``S-X`` and ``E-X`` close theirs (an ``I-X`` or ``E-X`` after them starts a new one),
and ``B-X`` followed by ``O`` is a one-token chunk. Every conversion below goes through
this reading: it spells the chunks that `entities` reads in the target scheme, so the
chunks are unchanged by any conversion, and a valid sequence comes back unchanged from
a round trip (each scheme has exactly one valid spelling of a given set of chunks).

Scheme names are case-insensitive; ``bio`` is taken for ``iob2`` and ``iobes`` for
``bioes``.
"""
from __future__ import annotations

import functools
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

OUTSIDE = "O"
SCHEMES = ("iob1", "iob2", "bioes")

_ALIASES = {"iob1": "iob1", "iob2": "iob2", "bio": "iob2", "bioes": "bioes", "iobes": "bioes"}
# The prefixes each scheme uses, in the order `labels_from` lists them.
_PREFIXES = {"iob1": ("B", "I"), "iob2": ("B", "I"), "bioes": ("B", "I", "E", "S")}
_ALL_PREFIXES = frozenset("BIES")
# A token with one of these prefixes leaves its chunk open for an I-/E- of its type.
_OPEN = frozenset("BI")


class Entity(NamedTuple):
    """One chunk: its type and the token span [start, end) (end exclusive)."""
    type: str
    start: int
    end: int


def normalize_scheme(scheme: str) -> str:
    """The canonical name ("iob1", "iob2" or "bioes") of `scheme` or one of its aliases."""
    name = _ALIASES.get(str(scheme).lower())
    if name is None:
        raise ValueError(f"unknown tag scheme {scheme!r}: expected one of "
                         f"{', '.join(sorted(_ALIASES))}")
    return name


@functools.lru_cache(maxsize=4096)
def split_tag(tag: str) -> Tuple[str, Optional[str]]:
    """(prefix, type) of a tag: ("O", None) for ``O``, ("B", "ORG-GOV") for ``B-ORG-GOV``."""
    if tag == OUTSIDE:
        return OUTSIDE, None
    prefix, hyphen, type_ = tag.partition("-") if isinstance(tag, str) else ("", "", "")
    if not hyphen or prefix not in _ALL_PREFIXES or not type_:
        raise ValueError(f"{tag!r} is not a named-entity tag: expected 'O' or one of "
                         "B-, I-, E-, S- followed by a type name")
    return prefix, type_


def _check_sentence(tags) -> List[str]:
    """`tags` as a list, refusing a bare string (a sentence is a sequence of tags)."""
    if isinstance(tags, str):
        raise TypeError(f"expected a sequence of tags, got the string {tags!r}")
    return list(tags)


def _check_prefixes(tags: Sequence[str], scheme: str) -> None:
    """Raise ValueError when a tag's prefix is not one that `scheme` uses."""
    prefixes = _PREFIXES[scheme]
    for position, tag in enumerate(tags):
        prefix, _ = split_tag(tag)
        if prefix != OUTSIDE and prefix not in prefixes:
            raise ValueError(f"tag {tag!r} at position {position} is not a tag of the "
                             f"{scheme} scheme (its prefixes are {', '.join(prefixes)})")


def _continues(previous: Tuple[str, Optional[str]], current: Tuple[str, Optional[str]]) -> bool:
    """True when the `current` (prefix, type) continues the chunk of `previous`."""
    return current[0] in ("I", "E") and previous[0] in _OPEN and previous[1] == current[1]


# ---------------------------------------------------------------------------------------
# Reading and writing chunks
# ---------------------------------------------------------------------------------------

def entities(tags: Sequence[str]) -> List[Entity]:
    """The chunks of one sentence as (type, start, end_exclusive), in order.

    The conlleval reading described in the module docstring; it gives the same chunks
    as seqeval 1.2.2's ``get_entities`` (default mode), whose ends are inclusive:
    seqeval's ``(type, start, last)`` is ``Entity(type, start, last + 1)`` here.
    Any sequence of well-formed tags is read; there is no scheme to name.
    """
    found: List[Entity] = []
    previous: Tuple[str, Optional[str]] = (OUTSIDE, None)
    for position, tag in enumerate(_check_sentence(tags)):
        current = split_tag(tag)
        if current[0] != OUTSIDE:
            if _continues(previous, current):
                found[-1] = found[-1]._replace(end=position + 1)
            else:
                found.append(Entity(current[1], position, position + 1))
        previous = current
    return found


def from_entities(chunks: Iterable[Tuple[str, int, int]], length: int, scheme: str) -> List[str]:
    """The `length` tags that spell `chunks` ((type, start, end_exclusive)) in `scheme`.

    The chunks must lie in [0, length) and must not overlap; tokens outside every chunk
    are ``O``. The result is the one valid spelling of these chunks in the scheme.
    """
    scheme = normalize_scheme(scheme)
    tags = [OUTSIDE] * length
    previous_end, previous_type = 0, None
    for type_, start, end in sorted(chunks, key=lambda chunk: chunk[1]):
        if not (previous_end <= start < end <= length):
            raise ValueError(f"chunk {(type_, start, end)!r} is empty, overlaps another "
                             f"or lies outside the {length} tokens")
        split_tag(f"B-{type_}")  # the type must make well-formed tags
        if scheme == "bioes" and end - start == 1:
            tags[start] = f"S-{type_}"
        else:
            tags[start:end] = [f"I-{type_}"] * (end - start)
            adjacent_same_type = start == previous_end and type_ == previous_type
            if scheme != "iob1" or adjacent_same_type:
                tags[start] = f"B-{type_}"
            if scheme == "bioes":
                tags[end - 1] = f"E-{type_}"
        previous_end, previous_type = end, type_
    return tags


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------

def convert(tags: Sequence[str], from_scheme: str, to_scheme: str) -> List[str]:
    """`tags` (written in `from_scheme`) spelled in `to_scheme`, chunks unchanged.

    Raises ValueError for a tag whose prefix `from_scheme` does not use (an ``S-`` tag
    in IOB2, say). An invalid sequence is converted as conlleval reads it (see the
    module docstring), which for a target equal to the source is `repair`.
    """
    tags = _check_sentence(tags)
    _check_prefixes(tags, normalize_scheme(from_scheme))
    return from_entities(entities(tags), len(tags), to_scheme)


def to_iob2(tags: Sequence[str], from_scheme: str) -> List[str]:
    """`tags` written in `from_scheme` ("iob1", "iob2" or "bioes") spelled in IOB2."""
    return convert(tags, from_scheme, "iob2")


def iob2_to_bioes(tags: Sequence[str]) -> List[str]:
    """IOB2 tags spelled in BIOES: a one-token chunk becomes ``S-``, a last token ``E-``."""
    return convert(tags, "iob2", "bioes")


def bioes_to_iob2(tags: Sequence[str]) -> List[str]:
    """BIOES tags spelled in IOB2: ``S-`` becomes ``B-`` and ``E-`` becomes ``I-``."""
    return convert(tags, "bioes", "iob2")


def iob2_to_iob1(tags: Sequence[str]) -> List[str]:
    """IOB2 tags spelled in IOB1 (e.g. to write predictions back into a CoNLL-2003 file).

    A chunk's ``B-X`` stays only when the chunk directly follows another chunk of type
    X; otherwise it becomes ``I-X``.
    """
    return convert(tags, "iob2", "iob1")


# ---------------------------------------------------------------------------------------
# Validity and repair
# ---------------------------------------------------------------------------------------

def _may_follow(previous: str, current: str, scheme: str) -> bool:
    """Whether tag `current` may directly follow tag `previous` in `scheme`.

    A sentence is treated as padded with ``O`` on both sides, so "may start a sentence"
    is "may follow O" and "may end a sentence" is "may be followed by O".
    """
    before, now = split_tag(previous), split_tag(current)
    if scheme == "iob1":
        # B-X separates two adjacent chunks of type X, so it needs an X chunk before it.
        return now[0] != "B" or (before[0] in _OPEN and before[1] == now[1])
    if scheme == "iob2":
        return now[0] != "I" or _continues(before, now)
    # BIOES: I-/E- continue an open chunk of their type; O, B-, S- need no open chunk.
    if now[0] in ("I", "E"):
        return _continues(before, now)
    return before[0] not in _OPEN


def is_valid(tags: Sequence[str], scheme: str) -> bool:
    """Whether `tags` is a valid sentence in `scheme` (its prefixes and every transition)."""
    scheme = normalize_scheme(scheme)
    tags = _check_sentence(tags)
    try:
        _check_prefixes(tags, scheme)
    except ValueError:
        return False
    padded = [OUTSIDE] + tags + [OUTSIDE]
    return all(_may_follow(a, b, scheme) for a, b in zip(padded, padded[1:]))


def repair(tags: Sequence[str], scheme: str) -> Tuple[List[str], int]:
    """(`tags` made valid in `scheme`, the number of tags changed).

    The rule: keep the chunks exactly as conlleval and seqeval's default mode read them
    (`entities`) and spell them validly in `scheme`. A valid sequence is returned
    unchanged with 0 repairs, and the repaired sequence always scores the same as the
    original under seqeval's default mode. What it does to each kind of error:

    * IOB2: an ``I-X`` that does not follow ``B-X``/``I-X`` (after ``O``, after another
      type, or at the start) starts a new chunk, so it becomes ``B-X``: conlleval's rule.
      Nothing else can be invalid in IOB2.
    * IOB1: a ``B-X`` that does not follow ``B-X``/``I-X`` becomes ``I-X``.
    * BIOES: an ``I-X`` or ``E-X`` that does not follow ``B-X``/``I-X`` starts a new
      chunk (as in IOB2); a chunk not closed by ``E-X`` (followed by ``O``, by a tag
      starting a chunk, or by the sentence end) gets ``E-X`` on its last token; and
      every chunk is then spelled ``S-X`` (one token) or ``B-X I-X… E-X``. For example
      ``B-X O`` → ``S-X O``, ``O I-X E-X`` → ``O B-X E-X``, ``B-X I-X B-X`` →
      ``B-X E-X S-X``, ``E-X I-X`` → ``S-X S-X``.

    Raises ValueError for a tag whose prefix `scheme` does not use (``E-``/``S-`` in
    IOB1/IOB2): convert such data with `convert` first.
    """
    tags = _check_sentence(tags)
    repaired = convert(tags, scheme, scheme)
    return repaired, sum(old != new for old, new in zip(tags, repaired))


# ---------------------------------------------------------------------------------------
# Data sets: detection, label lists, transition constraints
# ---------------------------------------------------------------------------------------

def detect_scheme(sentences: Iterable[Sequence[str]]) -> str:
    """The scheme the tagged `sentences` (sequences of tags) are written in.

    "bioes" when any ``E-`` or ``S-`` tag appears; otherwise "iob1" when some ``I-X``
    begins a chunk (follows ``O``, a tag of another type, or the sentence start), as
    IOB1's ``I-X`` does and IOB2's never does; otherwise "iob2" (also for data with no
    entity at all, where the two agree).
    """
    inside_starts_chunk = False
    for tags in sentences:
        previous: Tuple[str, Optional[str]] = (OUTSIDE, None)
        for tag in _check_sentence(tags):
            current = split_tag(tag)
            if current[0] in ("E", "S"):
                return "bioes"
            if current[0] == "I" and not _continues(previous, current):
                inside_starts_chunk = True
            previous = current
    return "iob1" if inside_starts_chunk else "iob2"


def labels_from(sentences: Iterable[Sequence[str]], scheme: str) -> List[str]:
    """The label list (index = tag id) for training on `sentences` in `scheme`.

    ``O`` first, then for every entity type found in the data (sorted) every prefix of
    the scheme in the order B, I (, E, S): a type seen only as ``B-X`` still gets
    ``I-X``, so that any valid sequence can be written. The result depends only on
    the set of types. Raises ValueError for tags the scheme does not use.
    """
    scheme = normalize_scheme(scheme)
    types = set()
    for tags in sentences:
        tags = _check_sentence(tags)
        _check_prefixes(tags, scheme)
        types.update(split_tag(tag)[1] for tag in tags if tag != OUTSIDE)
    return [OUTSIDE] + [f"{prefix}-{type_}" for type_ in sorted(types)
                        for prefix in _PREFIXES[scheme]]


def allowed_transitions(labels: Sequence[str], scheme: str
                        ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hard constraints of `scheme` over a label list (index = tag id), e.g. for a CRF.

    Returns (allowed [T, T], allowed_start [T], allowed_end [T]), boolean arrays:
    allowed[i, j] says whether labels[j] may directly follow labels[i]; a sentence
    may start with labels[j] when it may follow ``O``, and end with labels[i] when
    ``O`` may follow it. A sequence is valid in the scheme exactly when its first tag,
    every consecutive pair and its last tag are allowed:

    * IOB2: ``I-X`` only after ``B-X`` or ``I-X`` (so not after ``O``, not after
      ``B-Y``/``I-Y`` with Y != X, not at the start); everything else anywhere.
    * BIOES: ``I-X``/``E-X`` only after ``B-X``/``I-X``; ``O``, ``B-``, ``S-`` only after
      ``O``, ``E-``, ``S-`` (or at the start); a sentence ends on ``O``, ``E-`` or ``S-``.
    * IOB1: ``B-X`` only after ``B-X`` or ``I-X`` (not at the start); everything else
      anywhere.

    Raises ValueError for repeated labels or labels whose prefix the scheme does not use.
    """
    scheme = normalize_scheme(scheme)
    labels = _check_sentence(labels)
    if len(set(labels)) != len(labels):
        raise ValueError(f"the label list repeats a label: {labels!r}")
    _check_prefixes(labels, scheme)
    allowed = np.array([[_may_follow(a, b, scheme) for b in labels] for a in labels],
                       dtype=bool).reshape(len(labels), len(labels))
    allowed_start = np.array([_may_follow(OUTSIDE, b, scheme) for b in labels], dtype=bool)
    allowed_end = np.array([_may_follow(a, OUTSIDE, scheme) for a in labels], dtype=bool)
    return allowed, allowed_start, allowed_end
