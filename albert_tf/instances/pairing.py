"""Sentence-pair construction for SOP (and NSP), following the original's algorithm.

`create_pairs` walks one document exactly as the original
`create_instances_from_document` does and draws from the given
`random.Random` in the same order (`random()`, `randint()` calls are
one-to-one), so given the same generator state it returns the same pairs:

  * target length = max_seq_length - 3, or with probability `short_seq_prob`
    `randint(2, max_seq_length - 3)` (drawn once per document pass);
  * consecutive sentences accumulate into a chunk until the document ends or
    the chunk reaches the target; `a_end = randint(1, len(chunk) - 1)` when the
    chunk has at least two sentences, else 1;
  * a one-sentence chunk (or, with `random_next_sentence`, a coin flip) takes
    B from a random *other* document of the pool (10 tries, else the same
    document), starting at a random sentence; unused chunk sentences are put
    back; label 1;
  * otherwise (SOP) with p=0.5 A and B are swapped, label 1; else label 0;
  * `truncate_seq_pair` then trims the longer side, front or back with p=0.5,
    until len(A) + len(B) <= max_seq_length - 3.

Documents are given as a flat token list plus sentence boundaries, and A/B
are contiguous slices of those lists, so no per-token work happens here
except the truncation loop.
"""
from __future__ import annotations

import bisect
import random
from typing import Callable, List, NamedTuple, Sequence, Tuple


class DocView(NamedTuple):
    """A tokenized document: `ids` (token ids), `flags` (word-start flags, same
    length), `bounds` (sentence boundaries into ids: [0, e1, e2, ..., len])."""
    ids: List[int]
    flags: List[bool]
    bounds: List[int]


class Pair(NamedTuple):
    """One sentence pair, already truncated."""
    a_ids: List[int]
    a_flags: List[bool]
    b_ids: List[int]
    b_flags: List[bool]
    is_random_next: bool
    b_from_random_document: bool = False


def truncate_bounds(len_a: int, len_b: int, max_num_tokens: int,
                    rng: random.Random) -> Tuple[int, int, int, int]:
    """The original's truncate_seq_pair on lengths; returns (a0, a1, b0, b1) slice bounds.

    Repeatedly removes one token from the longer side (B on ties), from the
    front with probability 0.5 (one `rng.random()` per removed token).
    """
    a0, a1, b0, b1 = 0, len_a, 0, len_b
    while (a1 - a0) + (b1 - b0) > max_num_tokens:
        if a1 - a0 > b1 - b0:
            if rng.random() < 0.5:
                a0 += 1
            else:
                a1 -= 1
        else:
            if rng.random() < 0.5:
                b0 += 1
            else:
                b1 -= 1
    return a0, a1, b0, b1


def create_pairs(doc: DocView, doc_pos: int, pool_size: int,
                 get_doc: Callable[[int], DocView], max_seq_length: int,
                 short_seq_prob: float, random_next_sentence: bool,
                 rng: random.Random) -> List[Pair]:
    """All pairs of one pass over document `doc` (position `doc_pos` in a pool of `pool_size`).

    `get_doc(k)` returns pool document k (used for random-document B).
    """
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    bounds = doc.bounds
    num_sentences = len(bounds) - 1
    pairs: List[Pair] = []
    chunk_start = 0
    chunk_end = 1  # the chunk is sentences [chunk_start, chunk_end)
    while chunk_end <= num_sentences:
        # A chunk grows until it reaches the target length or the document ends.
        if (chunk_end < num_sentences
                and bounds[chunk_end] - bounds[chunk_start] < target_seq_length):
            chunk_end += 1
            continue
        chunk_len = chunk_end - chunk_start
        a_sentences = rng.randint(1, chunk_len - 1) if chunk_len >= 2 else 1
        a = _Span(doc, bounds[chunk_start], bounds[chunk_start + a_sentences])
        if chunk_len == 1 or (random_next_sentence and rng.random() < 0.5):
            b = _random_document_span(doc_pos, pool_size, get_doc,
                                      target_seq_length - (a.hi - a.lo), rng)
            is_random_next = from_random = True
            chunk_end = chunk_start + a_sentences  # put the unused sentences back
        else:
            b = _Span(doc, a.hi, bounds[chunk_end])
            is_random_next = from_random = False
            if not random_next_sentence and rng.random() < 0.5:
                is_random_next = True  # SOP: the swapped order is label 1
                a, b = b, a
        pairs.append(_truncated_pair(a, b, max_num_tokens, is_random_next, from_random, rng))
        chunk_start = chunk_end
        chunk_end += 1
    return pairs


class _Span(NamedTuple):
    """Tokens [lo, hi) of document `source` (sentence-aligned)."""
    source: DocView
    lo: int
    hi: int


def _random_document_span(doc_pos: int, pool_size: int, get_doc: Callable[[int], DocView],
                          target_b_length: int, rng: random.Random) -> _Span:
    """B from a random other pool document (10 tries, else `doc_pos` itself): whole
    sentences from a random one on, until `target_b_length` tokens or the document's end."""
    other = doc_pos
    for _ in range(10):
        other = rng.randint(0, pool_size - 1)
        if other != doc_pos:
            break
    source = get_doc(other)
    bounds = source.bounds
    num_sentences = len(bounds) - 1
    first = rng.randint(0, num_sentences - 1)
    stop = bisect.bisect_left(bounds, bounds[first] + target_b_length, first + 1)
    return _Span(source, bounds[first], bounds[min(stop, num_sentences)])


def _truncated_pair(a: _Span, b: _Span, max_num_tokens: int, is_random_next: bool,
                    from_random: bool, rng: random.Random) -> Pair:
    """The pair of spans A and B, trimmed by `truncate_bounds` to `max_num_tokens` in all."""
    a0, a1, b0, b1 = truncate_bounds(a.hi - a.lo, b.hi - b.lo, max_num_tokens, rng)
    a_lo, a_hi = a.lo + a0, a.lo + a1
    b_lo, b_hi = b.lo + b0, b.lo + b1
    return Pair(a.source.ids[a_lo:a_hi], a.source.flags[a_lo:a_hi],
                b.source.ids[b_lo:b_hi], b.source.flags[b_lo:b_hi], is_random_next, from_random)


def doc_view_from_sentences(sentences: Sequence[Sequence[int]],
                            flag_of: Callable[[int], bool]) -> DocView:
    """Builds a DocView from per-sentence id lists (used by tests and small callers)."""
    ids: List[int] = []
    bounds = [0]
    for sentence in sentences:
        ids.extend(sentence)
        bounds.append(len(ids))
    return DocView(ids, [flag_of(t) for t in ids], bounds)
