"""Whole-word n-gram masking for the masked-LM objective (the original's algorithm, seeded).

For a sequence `[CLS] A [SEP] B [SEP]`:
  1. Candidates are all non-special positions. With whole-word masking a
     position whose piece is not a word start joins the previous word (even
     across the middle [SEP], as in the original); the first candidate always
     starts a word. `token_boundary` is 1 for [CLS]/[SEP] and for word-start
     pieces, 0 otherwise.
  2. `num_to_predict = min(max_predictions, max(1, round(len(tokens) * masked_lm_prob)))`.
  3. Word starts are visited in random order. For each, n is drawn from
     1..ngram with p(n) proportional to 1/n (reversed without
     `favor_shorter_ngram`); the span is the n words from that start (fewer
     at the end). If the span would exceed the budget, n-1, ..., 1 are tried;
     a span that still does not fit, or that touches an already masked
     position, is skipped.
  4. Each masked token: 80% [MASK], 10% kept, 10% a uniformly random id in
     [0, vocab_size) (as the original, which samples its whole vocabulary).
  5. Predictions are sorted by position.

Differences from the original, on purpose (see REFERENCE.md "Decisions"): n is
drawn from the seeded generator (`rng.random()` against the cumulative
probabilities) instead of numpy's unseeded global generator, and the visiting
order is a Fisher-Yates shuffle consumed lazily (the same swaps as
`random.shuffle`, stopped once the budget is reached) instead of a full
shuffle; both give the same distributions.
"""
from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Iterator, List, Sequence, Tuple


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    """Masking parameters (the original's flags of the same names)."""
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True

    def ngram_cumulative(self) -> Tuple[float, ...]:
        """Cumulative p(n) for n = 1..ngram."""
        weights = [1.0 / n for n in range(1, self.ngram + 1)]
        if not self.favor_shorter_ngram:
            weights = weights[::-1]
        total = sum(weights)
        cumulative = list(itertools.accumulate(w / total for w in weights))
        cumulative[-1] = 1.0
        return tuple(cumulative)


class MaskStats:
    """Counters over many instances (all ints)."""

    __slots__ = ("masked", "to_predict", "replaced_mask", "kept", "replaced_random",
                 "ngram_drawn", "ngram_used")

    def __init__(self, ngram: int):
        self.masked = 0
        self.to_predict = 0
        self.replaced_mask = 0
        self.kept = 0
        self.replaced_random = 0
        self.ngram_drawn = [0] * (ngram + 1)  # index n = count of spans drawn with n words
        self.ngram_used = [0] * (ngram + 1)   # words actually masked per accepted span


def mask_pair(a_ids: Sequence[int], a_flags: Sequence[bool], b_ids: Sequence[int],
              b_flags: Sequence[bool], cls_id: int, sep_id: int, mask_id: int, vocab_size: int,
              options: MaskingOptions, cumulative: Sequence[float], rng: random.Random,
              stats: MaskStats) -> Tuple[List[int], List[int], List[int], List[int]]:
    """Masks one pair.

    Returns (input_ids, token_boundary, masked_lm_positions, masked_lm_ids),
    Python lists; the first two have length len(A) + len(B) + 3, the last two
    the number of masked positions (sorted by position).
    """
    tokens = [cls_id, *a_ids, sep_id, *b_ids, sep_id]
    boundary = [1, *a_flags, 1, *b_flags, 1]
    starts = _word_starts([*a_flags, *b_flags], options.do_whole_word_mask)
    if options.masked_lm_prob == 0 or len(starts) == 1:
        return tokens, boundary, [], []

    num_to_predict = min(options.max_predictions_per_seq,
                         max(1, int(round(len(tokens) * options.masked_lm_prob))))
    stats.to_predict += num_to_predict
    output = list(tokens)
    masked: List[Tuple[int, int]] = []  # (position, original id)
    len_a = len(a_ids)
    randrange = rng.randrange
    uniform = rng.random
    # Each span's tokens are replaced before the next span is drawn: both use `rng`.
    for lo, hi in _spans_to_mask(starts, num_to_predict, options.ngram, cumulative, rng, stats):
        for cand in range(lo, hi):
            # Candidates number A's tokens then B's; B's also sit after the middle [SEP].
            position = cand + 1 if cand < len_a else cand + 2
            masked.append((position, tokens[position]))
            # 80% [MASK], 10% kept, 10% a random id.
            if uniform() < 0.8:
                output[position] = mask_id
                stats.replaced_mask += 1
            elif uniform() < 0.5:
                stats.kept += 1
            else:
                output[position] = randrange(vocab_size)
                stats.replaced_random += 1
    masked.sort()
    stats.masked += len(masked)
    return output, boundary, [p for p, _ in masked], [label for _, label in masked]


def _word_starts(flags: Sequence[bool], whole_word: bool) -> List[int]:
    """Where each word starts among the candidates, then len(flags) as an end marker.

    `flags` holds one word-start flag per candidate (the non-special positions);
    word w covers candidates [starts[w], starts[w + 1]), so the result has
    num_words + 1 entries. Without `whole_word` every candidate is a word.
    """
    num_cand = len(flags)
    if whole_word:
        starts = list(itertools.compress(range(num_cand), flags))
        if num_cand and (not starts or starts[0] != 0):
            starts.insert(0, 0)  # a leading continuation piece still starts a word
    else:
        starts = list(range(num_cand))
    starts.append(num_cand)
    return starts


def _spans_to_mask(starts: Sequence[int], num_to_predict: int, ngram: int,
                   cumulative: Sequence[float], rng: random.Random,
                   stats: MaskStats) -> Iterator[Tuple[int, int]]:
    """Yields the candidate ranges [lo, hi) to mask, in the order they are chosen.

    `starts` as from `_word_starts`; `num_to_predict` is the budget in
    candidates. Step 3 of the module docstring: words are visited in random
    order, each starting an n-word span; a span over the budget or over a
    masked candidate is skipped. The generator is lazy, so the caller's draws
    for a yielded span come before the next span's draws, as in the original.
    """
    num_words = len(starts) - 1
    covered = bytearray(starts[-1])
    num_masked = 0
    order = list(range(num_words))
    randrange = rng.randrange
    uniform = rng.random
    ngram_drawn, ngram_used = stats.ngram_drawn, stats.ngram_used
    # Lazy Fisher-Yates: step k fixes order[k] (same swaps as random.shuffle's).
    for k in range(num_words - 1, -1, -1):
        if num_masked >= num_to_predict:
            return
        if k:
            j = randrange(k + 1)
            order[k], order[j] = order[j], order[k]
        word = order[k]
        u = uniform()  # n ~ p(n), from the cumulative probabilities
        n = 1
        while n < ngram and u >= cumulative[n - 1]:
            n += 1
        ngram_drawn[n] += 1
        budget = num_to_predict - num_masked
        lo = starts[word]
        while True:  # shorten the span to the budget, down to one word
            hi = starts[min(word + n, num_words)]
            if hi - lo <= budget or n == 1:
                break
            n -= 1
        if hi - lo > budget or covered.find(1, lo, hi) != -1:
            continue
        ngram_used[min(n, num_words - word)] += 1
        for cand in range(lo, hi):
            covered[cand] = 1
        num_masked += hi - lo
        yield lo, hi

