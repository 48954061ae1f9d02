"""Text normalisation and SentencePiece tokenization, with the original ALBERT's behaviour.

Sections:
  1. `preprocess_text`: the normalisation the original applies to every line
     before SentencePiece (whitespace collapse, NFKD accent stripping, optional
     lower-casing).
  2. `SentencePieceTokenizer`: a `FullTokenizer`-like Python tokenizer
     (`tokenize`, `convert_tokens_to_ids`, `convert_ids_to_tokens`) plus a fast
     batch path `encode_ids` that gives the same ids as
     `convert_tokens_to_ids(tokenize(text))` for every input.
  3. `InGraphTokenizer`: the same normalisation and ids as TensorFlow ops
     (tensorflow-text), for tf.data and for SavedModels that take raw text.
     The class is created on first access so that sections 1-2 never import
     TensorFlow.

Facts from the original (google-research/albert tokenization.py, last version):
  * `preprocess_text(inputs, remove_space=True, lower=False)` strips, collapses
    runs of whitespace to one space, always applies NFKD and drops combining
    characters (there is no keep-accents switch), then lower-cases. It does
    *not* rewrite `` and '' quotes (XLNet's and Hugging Face's versions do; that
    is available here as `replace_quotes=True`).
  * `encode_pieces` post-processes pieces that end in a digit followed by a
    comma (e.g. "▁1999,"): the piece without the comma is re-encoded without
    its leading "▁" (kept only if the original piece had it) and "," is
    appended as its own piece.
  * Ids come from `PieceToId(piece)`; the "vocabulary" is every piece of the
    model, so a random replacement token is uniform over [0, vocab_size).
"""
from __future__ import annotations

import unicodedata
from typing import Dict, Iterable, List, Optional, Sequence

SPIECE_UNDERLINE = "\u2581"
PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
CLS_PIECE = "[CLS]"
SEP_PIECE = "[SEP]"
MASK_PIECE = "[MASK]"

# ---------------------------------------------------------------------------
# 1. Text normalisation
# ---------------------------------------------------------------------------

_COMBINING_TABLE: Optional[Dict[int, None]] = None


def _combining_table() -> Dict[int, None]:
    """str.translate table deleting every code point with a non-zero combining class."""
    global _COMBINING_TABLE
    if _COMBINING_TABLE is None:
        _COMBINING_TABLE = {cp: None for cp in range(0x300, 0x110000)
                            if unicodedata.combining(chr(cp))}
    return _COMBINING_TABLE


def strip_accents(text: str) -> str:
    """NFKD, then drop combining characters (what the original always does)."""
    if text.isascii():
        return text  # NFKD is the identity on ASCII and ASCII has no combining marks
    return unicodedata.normalize("NFKD", text).translate(_combining_table())


def preprocess_text(text: str, remove_space: bool = True, lower: bool = False,
                    keep_accents: bool = False, replace_quotes: bool = False) -> str:
    """Normalises one line of text as the original does before SentencePiece.

    Args:
      text: a str (bytes are decoded as UTF-8, strictly).
      remove_space: strip and collapse every whitespace run to one space.
      lower: lower-case after accent stripping (the original's `do_lower_case`).
      keep_accents: skip NFKD + combining-mark removal (the original never
        skips it; the switch exists for XLNet/HF compatibility).
      replace_quotes: rewrite `` and '' as " (XLNet/HF behaviour, off in ALBERT).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if remove_space:
        text = " ".join(text.split())
    if replace_quotes:
        text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = strip_accents(text)
    if lower:
        text = text.lower()
    return text


# ---------------------------------------------------------------------------
# 2. SentencePiece tokenizer (Python)
# ---------------------------------------------------------------------------


def _needs_digit_comma_split(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


class SentencePieceTokenizer:
    """ALBERT's SentencePiece tokenizer: pieces, ids and the special-piece ids.

    Attributes (ids are ints, -1 when the model lacks the piece):
      vocab_size, pad_id, unk_id, cls_id, sep_id, mask_id.
    `tokenize` does not normalise; call `preprocess` (or `preprocess_text`)
    first, as create_pretraining_data does.
    """

    def __init__(self, spm_model_file: str, do_lower_case: bool = True):
        import sentencepiece as spm  # local import keeps `import albert_tf` light

        with open(spm_model_file, "rb") as handle:
            proto = handle.read()
        self.spm_model_file = spm_model_file
        self.do_lower_case = do_lower_case
        self.sp_model = spm.SentencePieceProcessor()
        self.sp_model.LoadFromSerializedProto(proto)
        self.vocab_size = self.sp_model.GetPieceSize()
        self.pad_id = self._special_id(PAD_PIECE)
        self.unk_id = self.sp_model.unk_id()
        self.cls_id = self._special_id(CLS_PIECE)
        self.sep_id = self._special_id(SEP_PIECE)
        self.mask_id = self._special_id(MASK_PIECE)
        self._digit_comma_ids = frozenset(
            i for i in range(self.vocab_size)
            if _needs_digit_comma_split(self.sp_model.IdToPiece(i)))
        self._vocab: Optional[Dict[str, int]] = None

    def _special_id(self, piece: str) -> int:
        pid = self.sp_model.PieceToId(piece)
        if pid == self.sp_model.unk_id() and piece != UNK_PIECE:
            return -1
        return pid

    @property
    def vocab(self) -> Dict[str, int]:
        """piece -> id for every piece of the model (the original's `FullTokenizer.vocab`)."""
        if self._vocab is None:
            self._vocab = {self.sp_model.IdToPiece(i): i for i in range(self.vocab_size)}
        return self._vocab

    def preprocess(self, text: str) -> str:
        """`preprocess_text(text, lower=do_lower_case)`."""
        return preprocess_text(text, lower=self.do_lower_case)

    def _split_digit_comma(self, piece: str) -> List[str]:
        sub = self.sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
        if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
            if len(sub[0]) == 1:
                sub = sub[1:]
            else:
                sub[0] = sub[0][1:]
        sub.append(piece[-1])
        return sub

    def tokenize(self, text: str) -> List[str]:
        """Pieces of `text`, with the original's digit-comma post-processing."""
        pieces = []
        for piece in self.sp_model.EncodeAsPieces(text):
            if _needs_digit_comma_split(piece):
                pieces.extend(self._split_digit_comma(piece))
            else:
                pieces.append(piece)
        return pieces

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        return [self.sp_model.PieceToId(token) for token in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        return [self.sp_model.IdToPiece(int(i)) for i in ids]

    def encode_ids(self, texts: Sequence[str], num_threads: int = 1) -> List[List[int]]:
        """Ids of each text; equals `convert_tokens_to_ids(tokenize(t))` for every t.

        Uses SentencePiece's batch encoder (C++, `num_threads` threads) and only
        falls back to the piece path for texts containing a digit-comma piece.
        """
        if not texts:
            return []
        batch = self.sp_model.Encode(list(texts), out_type=int, num_threads=num_threads)
        special = self._digit_comma_ids
        for index, ids in enumerate(batch):
            if not special.isdisjoint(ids):
                batch[index] = self.convert_tokens_to_ids(self.tokenize(texts[index]))
        return batch

    def is_start_piece_table(self) -> List[bool]:
        """For each id, whether the original's SentencePiece rule makes it a word start."""
        return [is_start_piece_sp(self.sp_model.IdToPiece(i)) for i in range(self.vocab_size)]


# The original's `_is_start_piece_sp` tests membership in a set of ASCII
# punctuation plus the *UTF-8 bytes* of "€" and "£"; in Python 3 a str piece is
# never equal to those bytes, so in effect only ASCII punctuation counts.
_SP_PUNCTUATION = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_SP_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _SP_PUNCTUATION


def is_start_piece_sp(piece: str) -> bool:
    """The original's whole-word rule for SentencePiece pieces.

    A piece starts a new word if it starts with "▁" or "<", is a single ASCII
    punctuation piece, or contains any character that is not (after
    lower-casing) an ASCII letter or ASCII punctuation (digits and non-English
    characters make a piece its own word).
    """
    return (piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<")
            or piece in _SP_PUNCTUATION
            or not all(ch.lower() in _SP_WORD_CHARS for ch in piece))


# ---------------------------------------------------------------------------
# 3. In-graph tokenizer (tensorflow-text)
# ---------------------------------------------------------------------------
#
# Serving a model on raw text needs `preprocess_text` + `encode_ids` as graph
# ops, so that a SavedModel runs with only TensorFlow and tensorflow-text.
# SentencePiece itself is tensorflow-text's `FastSentencepieceTokenizer`, fed
# the same serialized model as the Python package. The three
# normalisation steps have no library op with Python's exact semantics, so they
# are regexes whose character classes are computed here from Python's own
# `str.isspace` and `unicodedata.combining`; NFKD is tensorflow-text's
# `normalize_utf8` (ICU). The digit-comma post-processing depends only on the
# piece, so it is a precomputed id -> ids expansion table applied with a gather.


def _regex_class(code_points: Sequence[int]) -> str:
    """An RE2 character class `[...]` matching exactly `code_points` (sorted ints)."""
    ranges = []
    for cp in code_points:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    parts = [f"\\x{{{lo:x}}}" if lo == hi else f"\\x{{{lo:x}}}-\\x{{{hi:x}}}"
             for lo, hi in ranges]
    return "[" + "".join(parts) + "]"


def whitespace_regex() -> str:
    """RE2 pattern for one run of the characters Python's `str.split()` splits on."""
    return _regex_class([cp for cp in range(0x110000) if chr(cp).isspace()]) + "+"


def combining_regex() -> str:
    """RE2 pattern for one character with a non-zero Unicode combining class."""
    return _regex_class(sorted(_combining_table()))


def digit_comma_expansions(tokenizer: SentencePieceTokenizer) -> List[List[int]]:
    """For every id, the ids `tokenize` turns that piece into ([id] for most pieces).

    The original splits pieces like "3," into re-encoded digits plus ","; the
    result depends only on the piece, which makes it a fixed table.
    """
    table = [[i] for i in range(tokenizer.vocab_size)]
    for i in sorted(tokenizer._digit_comma_ids):
        piece = tokenizer.sp_model.IdToPiece(i)
        table[i] = tokenizer.convert_tokens_to_ids(tokenizer._split_digit_comma(piece))
    return table


def _tf_modules():
    import tensorflow as tf  # local imports: sections 1-2 stay TensorFlow-free
    import tensorflow_text as tf_text
    return tf, tf_text


def _make_in_graph_module_class():
    tf, tf_text = _tf_modules()

    class InGraphTokenizer(tf.Module):
        """`preprocess_text` + `SentencePieceTokenizer.encode_ids` as TensorFlow ops.

        Args:
          spm_model_file: path of the SentencePiece model (or give `model_proto`,
            its serialized bytes).
          do_lower_case: lower-case after accent stripping (the original's flag).

        Calling it maps tf.string [B] to int32 RaggedTensor [B, (T)] with exactly
        the ids of `SentencePieceTokenizer.encode_ids([preprocess(t), ...])`.
        Usable inside `tf.function`, `tf.data` and SavedModels: the model proto
        is embedded in the graph, so loading needs only TensorFlow and
        tensorflow-text (building it also needs the `sentencepiece` package).

        Attributes: vocab_size, do_lower_case and the special ids pad_id,
        unk_id, cls_id, sep_id, mask_id (Python ints, -1 when absent).

        Known limit: NFKD comes from ICU in tensorflow-text and from Python's
        `unicodedata` in Python; a character whose decomposition differs
        between the two Unicode versions could tokenize differently.
        """

        def __init__(self, spm_model_file: Optional[str] = None, do_lower_case: bool = True,
                     model_proto: Optional[bytes] = None, name: Optional[str] = None):
            super().__init__(name=name)
            if (spm_model_file is None) == (model_proto is None):
                raise ValueError("give exactly one of spm_model_file and model_proto")
            if model_proto is None:
                with open(spm_model_file, "rb") as handle:
                    model_proto = handle.read()
            python_tokenizer = _tokenizer_from_proto(model_proto, do_lower_case)
            self.do_lower_case = do_lower_case
            for attr in ("vocab_size", "pad_id", "unk_id", "cls_id", "sep_id", "mask_id"):
                setattr(self, attr, getattr(python_tokenizer, attr))
            self._whitespace = whitespace_regex()
            self._combining = combining_regex()
            expansions = digit_comma_expansions(python_tokenizer)
            self._needs_expansion = any(len(ids) != 1 for ids in expansions)
            lengths = [len(ids) for ids in expansions]
            self._expansion_values = tf.constant([i for ids in expansions for i in ids],
                                                 tf.int32)
            self._expansion_lengths = tf.constant(lengths, tf.int64)
            # FastSentencepieceTokenizer, not SentencepieceTokenizer: the latter
            # bundles an older SentencePiece that breaks exact Viterbi ties
            # differently ("www" -> "ww w" instead of the Python package's
            # "w ww"); the fast one matched the Python package on every line of
            # the corpus and GLUE test data.
            self._sentencepiece = tf_text.FastSentencepieceTokenizer(model_proto)

        def preprocess(self, texts):
            """`preprocess_text(t, lower=do_lower_case)` on a tf.string tensor of any shape."""
            texts = tf.strings.regex_replace(texts, self._whitespace, " ")
            texts = tf.strings.regex_replace(texts, "^ | $", "")
            texts = tf_text.normalize_utf8(texts, "NFKD")
            texts = tf.strings.regex_replace(texts, self._combining, "")
            if self.do_lower_case:
                texts = tf.strings.lower(texts, encoding="utf-8")
            return texts

        def encode_preprocessed(self, texts):
            """Ids of already-normalised texts [B] -> int32 RaggedTensor [B, (T)]."""
            ids = tf.cast(self._sentencepiece.tokenize(texts), tf.int32)
            ids = ids.with_row_splits_dtype(tf.int64)
            if not self._needs_expansion:
                return ids
            table = tf.RaggedTensor.from_row_lengths(self._expansion_values,
                                                     self._expansion_lengths)
            return tf.gather(table, ids).merge_dims(1, 2)

        def tokenize(self, texts):
            """Raw texts tf.string [B] -> ids int32 RaggedTensor [B, (T)]."""
            return self.encode_preprocessed(self.preprocess(texts))

        def __call__(self, texts):
            return self.tokenize(texts)

    return InGraphTokenizer


def _tokenizer_from_proto(model_proto: bytes, do_lower_case: bool) -> SentencePieceTokenizer:
    import os
    import tempfile

    handle, path = tempfile.mkstemp(suffix=".model")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(model_proto)
        return SentencePieceTokenizer(path, do_lower_case=do_lower_case)
    finally:
        os.remove(path)


def __getattr__(name):
    """Builds `InGraphTokenizer` on first access (PEP 562).

    The class derives from `tf.Module`, so defining it imports TensorFlow;
    doing that lazily keeps sections 1-2 importable without TensorFlow (the
    data-preparation workers).
    """
    if name == "InGraphTokenizer":
        cls = _make_in_graph_module_class()
        cls.__module__ = __name__
        cls.__qualname__ = name
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
