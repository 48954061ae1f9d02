"""WordPiece paragraphs for SQuAD-format data (CMRC 2018, English SQuAD with vocab.txt).

The original BERT run_squad splits the paragraph on whitespace into
`doc_tokens` and maps answers through `orig_to_tok_index`; a Chinese
paragraph has no spaces, so it would be one "word". Here every WordPiece
token gets the inclusive range of *original* characters it comes from:

* The BasicTokenizer's steps are applied one original character at a time:
  a control character (`is_wordpiece_control`) is dropped and belongs to no
  token (it does not split words, as in the original's `_clean_text`); a
  whitespace character (Python `str.isspace`) separates words; a CJK ideograph
  is a word of its own; any other character is lower-cased, NFD'ed and
  stripped of category Mn (with `do_lower_case`), and each resulting
  character that is punctuation is a word of its own. Every normalised
  character keeps the index of the original character it came from; a
  character that normalises to nothing (a decomposed accent) extends the
  range of the character before it.
* Each word is split into pieces by the tokenizer's greedy WordPiece; a piece
  covers the normalised characters it spells (without "##"), an [UNK] covers
  its whole word.
* The concatenated pieces must equal `tokenizer.tokenize(paragraph)` (the
  whole-text BasicTokenizer). They differ only where whole-word lower-casing
  has context rules (Greek final sigma) or NFD reorders marks across
  characters; then, when the words pair up one to one, the whole-text pieces
  are used, each mapped to the original characters of the same relative
  position in its per-character word; otherwise the paragraph is unaligned
  (the original's MISMATCH: its questions are skipped and counted).

`export.WordPieceSquadServingModule` does the same steps as TensorFlow ops, except
the fallback: its lower-casing has no final-sigma rule (an upper-case word-final "Σ" can
tokenize differently there; docs/squad.md).
"""
from __future__ import annotations

from typing import List, Tuple

from albert_tf.tokenization import (UNK_TOKEN, WORDPIECE_PREFIX, WordPieceTokenizer,
                                    normalize_word,
                                    is_cjk_char, is_wordpiece_control,
                                    is_wordpiece_punctuation)
from albert_tf.tasks.span_qa.alignment import ParagraphTokens

# A word: its normalised characters and, for each, the inclusive range of original
# characters it stands for (one character, extended over following characters that
# normalise to nothing, such as a decomposed accent).
Word = Tuple[str, List[int], List[int]]


def basic_words_with_origin(text: str, do_lower_case: bool) -> List[Word]:
    """The BasicTokenizer's words of `text`, each normalised character with its origin.

    Word boundaries fall at whitespace, around every punctuation character
    (after normalisation) and around the characters of each CJK ideograph.
    """
    # Normalised characters: (char, first, last original index, is_cjk); spaces as " ".
    flat: List[list] = []
    last = None  # the entry a character normalising to nothing extends
    for index, ch in enumerate(text):
        if is_wordpiece_control(ch):
            last = None
            continue
        if ch.isspace():
            flat.append([" ", index, index, False])
            last = None
            continue
        normalized = normalize_word(ch, do_lower_case)
        if not normalized:
            if last is not None:
                flat[last][2] = index
            continue
        cjk = is_cjk_char(ord(ch))
        for out in normalized:
            flat.append([out, index, index, cjk])
        last = len(flat) - 1
    words: List[list] = []
    for j, (ch, first, end, cjk) in enumerate(flat):
        if ch.isspace():
            continue
        begins = j == 0 or is_wordpiece_punctuation(ch)
        if not begins:
            prev, prev_first, _, prev_cjk = flat[j - 1]
            begins = (prev.isspace() or is_wordpiece_punctuation(prev)
                      or (prev_first != first and (cjk or prev_cjk)))
        if begins:
            words.append([[], [], []])
        words[-1][0].append(ch)
        words[-1][1].append(first)
        words[-1][2].append(end)
    return [("".join(chars), starts, ends) for chars, starts, ends in words]


def _piece_ranges(pieces: List[str], length: int) -> List[Tuple[int, int]]:
    """Inclusive normalised-character range of each piece of a word of `length` chars."""
    if pieces == [UNK_TOKEN]:
        return [(0, length - 1)]
    ranges, cursor = [], 0
    for index, piece in enumerate(pieces):
        size = len(piece) - (len(WORDPIECE_PREFIX) if index else 0)
        ranges.append((cursor, cursor + size - 1))
        cursor += size
    return ranges


def align_paragraph(tokenizer: WordPieceTokenizer, paragraph: str) -> ParagraphTokens:
    """WordPiece tokens of `paragraph` with their original character ranges (inclusive)."""
    lower = tokenizer.do_lower_case
    words = basic_words_with_origin(paragraph, lower)
    pieces, starts, ends = [], [], []
    for text, char_start, char_end in words:
        word_tokens = tokenizer.wordpiece(text)
        for piece, (first, last) in zip(word_tokens, _piece_ranges(word_tokens, len(text))):
            pieces.append(piece)
            starts.append(char_start[first])
            ends.append(char_end[last])
    if pieces != tokenizer.tokenize(paragraph):
        return _whole_word_fallback(tokenizer, paragraph, words)
    return ParagraphTokens(pieces, tokenizer.convert_tokens_to_ids(pieces), starts, ends)


def _whole_word_fallback(tokenizer: WordPieceTokenizer, paragraph: str,
                         words: List[Word]) -> ParagraphTokens:
    """Whole-text words and pieces, positioned by the per-character words (see module doc)."""
    whole = tokenizer.basic_tokenize(paragraph)
    if len(whole) != len(words):
        pieces = tokenizer.tokenize(paragraph)
        return ParagraphTokens(pieces, tokenizer.convert_tokens_to_ids(pieces), [], [],
                               aligned=False)
    pieces, starts, ends = [], [], []
    for word, (_, char_start, char_end) in zip(whole, words):
        word_tokens = tokenizer.wordpiece(word)
        for piece, (first, last) in zip(word_tokens, _piece_ranges(word_tokens, len(word))):
            pieces.append(piece)
            starts.append(char_start[min(first, len(char_start) - 1)])
            ends.append(char_end[min(last, len(char_end) - 1)])
    return ParagraphTokens(pieces, tokenizer.convert_tokens_to_ids(pieces), starts, ends)
