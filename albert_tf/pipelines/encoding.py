"""Text to token ids with character offsets, packing and windows: what every pipeline reads.

  TextEncoder(tokenizer)            SentencePiece or WordPiece (`albert_tf.tokenization`)
    .tokens(text) -> Tokens         ids with [start, end) character offsets into `text`
    .pack(first, second)            [CLS] A [SEP] (B [SEP]) as a `Packed` row
    .decode(ids) / .tokens_to_string(pieces)

The ids are the original's (`tokenizer.tokenize(tokenizer.preprocess(text))`: the same
normalisation, SentencePiece's digit-comma split, WordPiece's basic tokenizer); the offsets
are computed beside them. An offset points at the characters of the token itself, never at
the space before it (Hugging Face's ALBERT offsets include the leading space); a lone "▁"
piece is an empty span where its space is. A token's `word` is the index of the word that
holds it: whitespace-delimited, cut around a SentencePiece model's user-defined pieces, as
Hugging Face's fast tokenizer splits words (WordPiece: the basic tokenizer's units, each
punctuation mark and CJK character its own); question answering widens answers to whole
words with it (Hugging Face's `align_to_words`).
"""
from __future__ import annotations

import dataclasses
import re
from typing import List, Optional, Sequence, Tuple

from albert_tf.errors import UserValueError
from albert_tf.tokenization.base import SPIECE_UNDERLINE, strip_accents

_WORD = re.compile(r"\S+")
# The BasicTokenizer's whitespace: space, tab, newline, carriage return and category Zs
# (Python's \s also has \x0b \x0c \x1c-\x1f \x85, control characters it deletes).
_WORDPIECE_WORD = re.compile(r"[^ \t\n\r\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")
_CLEAN_UP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]
Span = Tuple[int, int]


@dataclasses.dataclass
class Tokens:
    """The tokens of one text: `ids`, `offsets` (character [start, end) into the text) and
    `words` (the index into `word_spans`, the text's words as the module docstring says)."""

    ids: List[int]
    offsets: List[Span]
    words: List[int]
    word_spans: List[Span]

    def __len__(self) -> int:
        return len(self.ids)

    def window(self, start: int, stop: int) -> "Tokens":
        return Tokens(self.ids[start:stop], self.offsets[start:stop], self.words[start:stop],
                      self.word_spans)


@dataclasses.dataclass
class Packed:
    """One model row: `[CLS] A [SEP] (B [SEP])`.

    input_ids, segment_ids: lists of ints (length = the row's tokens, unpadded);
    sequence: per position, None for [CLS]/[SEP], 0 for A's tokens, 1 for B's;
    offsets: per position, the token's character span in its text ((0, 0) for specials);
    words: per position, the word index in its text (-1 for specials);
    word_spans: the character spans of A's words and of B's (None without B).
    """

    input_ids: List[int]
    segment_ids: List[int]
    sequence: List[Optional[int]]
    offsets: List[Span]
    words: List[int]
    word_spans: Tuple[List[Span], Optional[List[Span]]] = ([], None)


class TextEncoder:
    """Tokenizes with offsets and packs rows for a `Tokenizer` of either kind."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.sentencepiece = tokenizer.kind == "sentencepiece"
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.pad_id = max(tokenizer.pad_id, 0)
        self.special_ids = frozenset(i for i in (tokenizer.cls_id, tokenizer.sep_id,
                                                 tokenizer.pad_id, tokenizer.mask_id) if i >= 0)
        self.symbol_ids = user_defined_ids(tokenizer) if self.sentencepiece else frozenset()
        self._prefetched: dict = {}

    # --- tokens ---------------------------------------------------------------------------

    def tokens(self, text: str, offsets: bool = True) -> Tokens:
        """The ids of `text` with their offsets (see the module docstring); `offsets=False`:
        the ids alone (empty offsets and words), by the tokenizer's fast path."""
        check_text(text)
        if not offsets:
            return Tokens(self.ids(text), [], [], [])
        if self.sentencepiece:
            return self._sentencepiece_tokens(text)
        return self._wordpiece_tokens(text)

    def ids(self, text: str) -> List[int]:
        """The original's ids of `text` (`Tokenizer.encode_ids` of the preprocessed text)."""
        cached = self._prefetched.get(text)
        if cached is not None:
            return list(cached)
        check_text(text)
        return self.tokenizer.encode_ids([self.tokenizer.preprocess(text)])[0]

    def prefetch(self, texts) -> None:
        """Tokenizes `texts` in one call (SentencePiece's batch encoder: a call costs ~20x
        one text's work), for the `ids` calls that follow; replaces the previous batch."""
        texts = [t for t in dict.fromkeys(t for t in texts if isinstance(t, str))
                 if _is_unicode(t)]  # the others fail, one by one, where they are read
        self._prefetched = dict(zip(texts, self.tokenizer.encode_ids(
            [self.tokenizer.preprocess(t) for t in texts])))

    def _normalize_char(self, char: str) -> str:
        char = strip_accents(char)
        return char.lower() if self.tokenizer.do_lower_case else char

    def _normalized(self, text: str) -> Tuple[str, List[Span], List[int]]:
        """The text as the original normalises it for SentencePiece (`preprocess_text`), with
        each normalised character's span in `text` ((-1, -1) for the spaces between words)
        and its whitespace word's index."""
        pieces, spans, words = [], [], []
        for index, match in enumerate(_WORD.finditer(text)):
            if index:
                pieces.append(" ")
                spans.append((-1, -1))
                words.append(-1)
            start, word = match.start(), match.group()
            per_char = [self._normalize_char(c) for c in word]
            normalized = self.tokenizer.preprocess(word)
            if "".join(per_char) == normalized:
                for offset, chars in enumerate(per_char):
                    spans.extend([(start + offset, start + offset + 1)] * len(chars))
            else:  # e.g. a final sigma: the word's characters map to the whole word
                spans.extend([(start, match.end())] * len(normalized))
            pieces.append(normalized)
            words.extend([index] * (len(spans) - len(words)))
        return "".join(pieces), spans, words

    def _sentencepiece_tokens(self, text: str) -> Tokens:
        tokenizer = self.tokenizer
        normalized, spans, char_words = self._normalized(text)
        byte_to_char = []
        for index, char in enumerate(normalized):
            byte_to_char.extend([index] * len(char.encode("utf-8")))
        byte_to_char.append(len(normalized))
        proto = tokenizer.sp_model.encode(normalized, return_type="proto")
        pieces = []  # (id, begin, end) in normalised characters, leading spaces skipped
        for piece in proto.pieces:
            begin, end = byte_to_char[piece.begin], byte_to_char[piece.end]
            while begin < end and normalized[begin] == " ":
                begin += 1
            if tokenizer.splits_digit_comma(piece.id):
                parts = tokenizer.convert_tokens_to_ids(tokenizer.digit_comma_pieces(piece.piece))
                texts = [tokenizer.token_text(p) for p in tokenizer.convert_ids_to_tokens(parts)]
                pieces += [(part, b, e) for part, (b, e) in
                           zip(parts, _split_evenly(begin, end, [len(t) for t in texts]))]
            else:
                pieces.append((piece.id, begin, end))
        ids, offsets, words = [], [], []
        for index, (token_id, begin, end) in enumerate(pieces):
            ids.append(token_id)
            if begin < end:
                offsets.append(_span(spans, begin, end))
                words.append(char_words[begin])
                continue
            # A lone "▁": the start of the word it begins, or alone (an empty span after the
            # word before it) when a user-defined piece or nothing follows.
            following = pieces[index + 1] if index + 1 < len(pieces) else None
            if (following is not None and following[1] < following[2]
                    and following[0] not in self.symbol_ids):
                at = spans[following[1]][0]
                offsets.append((at, at))
                words.append(char_words[following[1]])
            else:
                offsets.append(_span(spans, begin, end))
                words.append(-1)
        words, word_spans = self._split_words(ids, offsets, words)
        return Tokens(ids, offsets, words, word_spans)

    def _split_words(self, ids: List[int], offsets: List[Span], words: List[int]):
        """Word ids and spans: whitespace-delimited words, further cut around the model's
        user-defined pieces ( ) " - . – £ € and a lone "▁" (each its own word), as the
        words of Hugging Face's fast ALBERT tokenizer are."""
        out, spans = [], []
        previous_word, previous_alone = None, False
        for token_id, (start, end), word in zip(ids, offsets, words):
            alone = token_id in self.symbol_ids or word < 0
            if not spans or word != previous_word or alone or previous_alone:
                spans.append((start, end))
            else:
                spans[-1] = (spans[-1][0], end)
            out.append(len(spans) - 1)
            previous_word, previous_alone = word, alone
        return out, spans

    def _wordpiece_tokens(self, text: str) -> Tokens:
        """WordPiece ids with offsets; a word is a unit of the basic tokenizer (a run of
        letters and digits, a punctuation mark, a CJK character), as Hugging Face's
        BertPreTokenizer splits words."""
        tokenizer = self.tokenizer
        ids, offsets, words, word_spans = [], [], [], []
        for match in _WORDPIECE_WORD.finditer(text):
            for start, end in _basic_spans(match.group(), match.start()):
                pieces = tokenizer.basic_tokenize(text[start:end])
                if not pieces:
                    continue
                word_spans.append((start, end))
                for piece_ids, (b, e) in _wordpiece_spans(tokenizer, pieces, start, end):
                    ids.extend(piece_ids)
                    offsets.extend([(b, e)] * len(piece_ids))
                    words.extend([len(word_spans) - 1] * len(piece_ids))
        return Tokens(ids, offsets, words, word_spans)

    # --- rows -----------------------------------------------------------------------------

    def pack(self, first: Tokens, second: Optional[Tokens] = None) -> Packed:
        """`[CLS] first [SEP] (second [SEP])` with segment ids 0 / 1 (offsets and words are
        filled only where the tokens have them)."""
        ids = [self.cls_id] + first.ids + [self.sep_id]
        segments = [0] * len(ids)
        sequence = [None] + [0] * len(first) + [None]
        offsets = [(0, 0)] + _offsets(first) + [(0, 0)]
        words = [-1] + _words(first) + [-1]
        if second is not None:
            ids += second.ids + [self.sep_id]
            segments += [1] * (len(second) + 1)
            sequence += [1] * len(second) + [None]
            offsets += _offsets(second) + [(0, 0)]
            words += _words(second) + [-1]
        return Packed(ids, segments, sequence, offsets, words,
                      (first.word_spans, second.word_spans if second is not None else None))

    # --- text back ------------------------------------------------------------------------

    def tokens_to_string(self, pieces: Sequence[str]) -> str:
        """Pieces as text, as Hugging Face's `convert_tokens_to_string` gives them ("▁new",
        "▁york" -> "new york"; "##ing" is joined to the piece before it)."""
        if self.sentencepiece:
            text = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
            return text[1:] if text.startswith(" ") else text
        return " ".join(pieces).replace(" ##", "").strip()

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Ids as text, as Hugging Face's `tokenizer.decode` gives them for ALBERT (its
        `clean_up_tokenization_spaces`: no space before . , ? ! and English contractions)."""
        ids = [int(i) for i in ids if not (skip_special_tokens and int(i) in self.special_ids)]
        text = self.tokens_to_string(self.tokenizer.convert_ids_to_tokens(ids))
        for spaced, joined in _CLEAN_UP:
            text = text.replace(spaced, joined)
        return text

    def token_string(self, token_id: int) -> str:
        """One id as text (`decode([id])`)."""
        return self.decode([token_id])


def check_text(text) -> None:
    """A UserValueError unless `text` is a str that UTF-8 can encode (not a lone surrogate,
    as a JSON string cut inside an emoji leaves)."""
    if not isinstance(text, str):
        raise UserValueError(f"a text must be a string, not {type(text).__name__}")
    if not _is_unicode(text):
        raise UserValueError(f"a text is not valid Unicode (a lone surrogate): {text!r:.60}")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def windows(length: int, size: int, stride: int) -> List[range]:
    """Token ranges of windows of `size` tokens overlapping by `stride`, the last reaching
    `length` (Hugging Face's tokenizers' overflowing windows)."""
    out = []
    for start in range(0, max(length, 1), size - stride):
        stop = min(start + size, length)
        out.append(range(start, stop))
        if stop == length:
            break
    return out


def truncate_pair(first: Tokens, second: Optional[Tokens], budget: int):
    """(first, second) cut to `budget` tokens together: a token off the longer one at a
    time (the second on ties), as the original's `_truncate_seq_pair`."""
    n1, n2 = len(first), len(second) if second is not None else 0
    while n1 + n2 > budget:
        if n1 > n2:
            n1 -= 1
        else:
            n2 -= 1
    return first.window(0, n1), (second.window(0, n2) if second is not None else None)


def _offsets(tokens: Tokens) -> List[Span]:
    return tokens.offsets if len(tokens.offsets) == len(tokens) else [(0, 0)] * len(tokens)


def _words(tokens: Tokens) -> List[int]:
    return tokens.words if len(tokens.words) == len(tokens) else [-1] * len(tokens)


def user_defined_ids(tokenizer) -> frozenset:
    """Ids of a SentencePiece model's user-defined pieces (30k-clean: ( ) " - . – £ €)."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    with open(tokenizer.spm_model_file, "rb") as handle:
        model.ParseFromString(handle.read())
    kind = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
    return frozenset(i for i, piece in enumerate(model.pieces) if piece.type == kind)


def _span(spans: List[Span], begin: int, end: int) -> Span:
    """The original-text span of normalised characters [begin, end)."""
    inside = [spans[i] for i in range(begin, end) if spans[i][0] >= 0]
    if inside:
        return inside[0][0], inside[-1][1]
    # A lone "▁" piece (a space before a piece SentencePiece keeps apart): empty, where the
    # space is.
    before = next((spans[i] for i in range(begin - 1, -1, -1) if spans[i][0] >= 0), None)
    if before is not None:
        return before[1], before[1]
    after = next((spans[i] for i in range(end, len(spans)) if spans[i][0] >= 0), (0, 0))
    return after[0], after[0]


def _split_evenly(begin: int, end: int, lengths: List[int]) -> List[Span]:
    """[begin, end) cut into consecutive parts of `lengths` (all of it to each part when
    the lengths do not add up)."""
    if sum(lengths) != end - begin:
        return [(begin, end)] * len(lengths)
    out, at = [], begin
    for length in lengths:
        out.append((at, at + length))
        at += length
    return out


def _basic_spans(word: str, start: int) -> List[Span]:
    """Character spans of the basic tokenizer's units of one whitespace word: runs of
    ordinary characters, and each punctuation mark or CJK character on its own."""
    from albert_tf.tokenization import wordpiece

    spans, run_start = [], None
    for offset, char in enumerate(word):
        alone = wordpiece.is_cjk_char(ord(char)) or wordpiece.is_wordpiece_punctuation(char)
        if alone:
            if run_start is not None:
                spans.append((start + run_start, start + offset))
                run_start = None
            spans.append((start + offset, start + offset + 1))
        elif run_start is None:
            run_start = offset
    if run_start is not None:
        spans.append((start + run_start, start + len(word)))
    return spans


def _wordpiece_spans(tokenizer, words: List[str], start: int, end: int):
    """(ids, span) of each WordPiece piece of the basic tokenizer's `words` found in
    text[start:end]: the pieces of one unit share its span unless their lengths add up."""
    out = []
    for word in words:
        pieces = tokenizer.wordpiece(word)
        ids = tokenizer.convert_tokens_to_ids(pieces)
        lengths = [len(tokenizer.token_text(p)) for p in pieces]
        if len(words) == 1 and sum(lengths) == end - start and "[UNK]" not in pieces:
            out.extend(([i], span) for i, span in zip(ids, _split_evenly(start, end, lengths)))
        else:
            out.append((ids, (start, end)))
    return out
