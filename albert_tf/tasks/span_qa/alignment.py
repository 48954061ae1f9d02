"""Paragraph alignment: every token of a paragraph mapped to a character range of the
original text, so that a token span maps back to exact original text.

SentencePiece (`align_paragraph`): the paragraph is normalised as the original does
(`preprocess_text`: whitespace collapse, NFKD accent stripping, optional
lower-casing) and split into pieces (with the original's digit-comma
post-processing).
* Fast path (used for almost every paragraph): the normalisation is applied
  character by character, which gives a map from each normalised character to
  the original one; SentencePiece's own offsets (`EncodeAsOffsetMapping`)
  map each piece to normalised characters. The fast path is used only when the
  per-character normalisation concatenates to exactly `preprocess_text` of the
  whole paragraph (it can differ, e.g. Python's final-sigma lower-casing).
* Fallback: the original's banded longest-common-subsequence alignment between
  the paragraph and the concatenated pieces (written from its definition;
  SentencePiece offsets cannot be used there because the normalised text is not
  a per-character image of the original).

WordPiece (the Chinese models): `wordpiece.align_paragraph`, which returns the same
`ParagraphTokens`.
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

import numpy as np

from albert_tf.tokenization import SPIECE_UNDERLINE, SentencePieceTokenizer, preprocess_text


@dataclasses.dataclass
class ParagraphTokens:
    """A paragraph's pieces with their original character ranges (inclusive)."""

    pieces: List[str]
    ids: List[int]
    tok_start_to_orig: List[int]
    tok_end_to_orig: List[int]
    aligned: bool = True  # False: the fallback alignment failed (the original's MISMATCH)

    def char_span_to_tokens(self, start: int, end: int) -> Optional[Tuple[int, int]]:
        """Tokens covering original characters [start, end] (inclusive), or None."""
        first = next((t for t, e in enumerate(self.tok_end_to_orig) if e >= start), None)
        last = next((t for t in range(len(self.tok_start_to_orig) - 1, -1, -1)
                     if self.tok_start_to_orig[t] <= end), None)
        if first is None or last is None or first > last:
            return None
        return first, last


def normalize_with_char_map(text: str, lower: bool) -> Tuple[str, List[int]]:
    """Per-character `preprocess_text`: (normalised text, original index of each char).

    Whitespace runs become one space (none at the ends), other characters are
    NFKD'ed, stripped of combining marks and lower-cased one at a time.
    """
    out: List[str] = []
    origin: List[int] = []
    non_space = [i for i, ch in enumerate(text) if not ch.isspace()]
    if not non_space:
        return "", []
    first, last = non_space[0], non_space[-1]
    previous_space = False
    for index in range(first, last + 1):
        ch = text[index]
        if ch.isspace():
            if not previous_space:
                out.append(" ")
                origin.append(index)
            previous_space = True
            continue
        previous_space = False
        piece = preprocess_text(ch, remove_space=False, lower=lower)
        out.append(piece)
        origin.extend([index] * len(piece))
    return "".join(out), origin


def _split_offsets(tokenizer: SentencePieceTokenizer, piece: str, begin: int, end: int
                   ) -> List[Tuple[str, int, int]]:
    """The original's digit-comma split of one piece, with char offsets [begin, end)."""
    subs = tokenizer._split_digit_comma(piece)  # pylint: disable=protected-access
    result = [(subs[-1], end - 1, end)]
    cursor = end - 1
    for index in range(len(subs) - 2, -1, -1):
        length = len(subs[index].replace(SPIECE_UNDERLINE, ""))
        start = begin if index == 0 else max(begin, cursor - length)
        result.append((subs[index], start, max(start + 1, cursor)))
        cursor = start
    return result[::-1]


def _pieces_with_offsets(tokenizer: SentencePieceTokenizer, text: str
                         ) -> List[Tuple[str, int, int]]:
    mapping = tokenizer.sp_model.EncodeAsOffsetMapping(text)
    out = []
    for piece, (begin, end) in zip(mapping["pieces"], mapping["offsets"]):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            out.extend(_split_offsets(tokenizer, piece, begin, end))
        else:
            out.append((piece, begin, end))
    return out


def align_paragraph(tokenizer: SentencePieceTokenizer, paragraph: str,
                    do_lower_case: bool) -> ParagraphTokens:
    """Pieces of `preprocess_text(paragraph)` aligned to original characters."""
    normalized = preprocess_text(paragraph, lower=do_lower_case)
    per_char, origin = normalize_with_char_map(paragraph, do_lower_case)
    if per_char != normalized:
        return _lcs_align(tokenizer, paragraph, normalized, do_lower_case)
    pieces, starts, ends = [], [], []
    for piece, begin, end in _pieces_with_offsets(tokenizer, normalized):
        pieces.append(piece)
        if end <= begin:  # a piece with no source text: point at its neighbour
            begin = min(begin, len(origin) - 1)
            end = begin + 1
        starts.append(origin[begin])
        ends.append(origin[end - 1])
    return ParagraphTokens(pieces, tokenizer.convert_tokens_to_ids(pieces), starts, ends)


def _convert_index(index: List[Optional[int]], pos: int, m: Optional[int] = None,
                   is_start: bool = True) -> int:
    """Nearest aligned position for an unaligned one (the original's rule)."""
    if index[pos] is not None:
        return index[pos]
    n = len(index)
    rear = pos
    while rear < n - 1 and index[rear] is None:
        rear += 1
    front = pos
    while front > 0 and index[front] is None:
        front -= 1
    if index[front] is None:
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] is None:
        if m is not None and index[front] < m - 1:
            return index[front] + 1 if is_start else m - 1
        return index[front]
    if is_start:
        return index[front] + 1 if index[rear] > index[front] + 1 else index[rear]
    return index[rear] - 1 if index[rear] > index[front] + 1 else index[front]


def _lcs_align(tokenizer: SentencePieceTokenizer, paragraph: str, normalized: str,
               do_lower_case: bool) -> ParagraphTokens:
    """The original's banded LCS alignment between the paragraph and its pieces."""
    pieces = tokenizer.tokenize(normalized)
    tok_text = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
    char_starts, char_ends, chartok_to_tok = [], [], []
    count = 0
    for index, piece in enumerate(pieces):
        length = len(piece.replace(SPIECE_UNDERLINE, " "))
        chartok_to_tok.extend([index] * length)
        char_starts.append(count)
        count += length
        char_ends.append(count - 1)
    n, m = len(paragraph), len(tok_text)
    chars = [preprocess_text(ch, lower=do_lower_case, remove_space=False) for ch in paragraph]
    f = g = None
    max_dist = abs(n - m) + 5
    for _ in range(2):
        f = np.zeros((n, m), dtype=np.float32)
        g = {}
        for i in range(n):
            for j in range(i - max_dist, i + max_dist):
                if j >= m or j < 0:
                    continue
                if i > 0:
                    g[(i, j)] = 0
                    f[i, j] = f[i - 1, j]
                if j > 0 and f[i, j - 1] > f[i, j]:
                    g[(i, j)] = 1
                    f[i, j] = f[i, j - 1]
                f_prev = f[i - 1, j - 1] if i > 0 and j > 0 else 0
                if chars[i] == tok_text[j] and f_prev + 1 > f[i, j]:
                    g[(i, j)] = 2
                    f[i, j] = f_prev + 1
        if n == 0 or m == 0 or f[n - 1, m - 1] > 0.8 * n:
            break
        max_dist *= 2
    orig_to_chartok: List[Optional[int]] = [None] * n
    chartok_to_orig: List[Optional[int]] = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and (i, j) in g:
        if g[(i, j)] == 2:
            orig_to_chartok[i], chartok_to_orig[j] = j, i
            i, j = i - 1, j - 1
        elif g[(i, j)] == 1:
            j -= 1
        else:
            i -= 1
    ids = tokenizer.convert_tokens_to_ids(pieces)
    if n == 0 or m == 0 or all(v is None for v in orig_to_chartok) or f[n - 1, m - 1] < 0.8 * n:
        return ParagraphTokens(pieces, ids, [], [], aligned=False)
    starts = [_convert_index(chartok_to_orig, s, n, True) for s in char_starts]
    ends = [_convert_index(chartok_to_orig, e, n, False) for e in char_ends]
    return ParagraphTokens(pieces, ids, starts, ends)
