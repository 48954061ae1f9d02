"""The tensorflow-text tokenizers: the Python tokenizers' normalisation and ids as TensorFlow ops.

  * `InGraphTokenizer`: `preprocess_text` + `SentencePieceTokenizer.encode_ids`;
  * `InGraphWordPieceTokenizer`: `WordPieceTokenizer` (BasicTokenizer + WordPiece);
  * `in_graph_tokenizer`: the in-graph twin of `FullTokenizer`, which picks one.

Serving a model on raw text needs `preprocess_text` + `encode_ids` as graph
ops, so that a SavedModel runs with only TensorFlow and tensorflow-text.
SentencePiece itself is tensorflow-text's `FastSentencepieceTokenizer`, fed
the same serialized model as the Python package. The normalisation steps are
regexes from `regex_patterns` (character classes computed from Python's own
rules); NFKD / NFD are tensorflow-text's `normalize_utf8` (ICU). The
digit-comma post-processing depends only on the piece, so it is a precomputed
id -> ids expansion table (`digit_comma_expansions`) applied with a gather.

This is the one module of the package that imports TensorFlow (at its top);
`albert_tf.tokenization` loads it only when one of its names is first used.
"""
from __future__ import annotations

import os
import tempfile
from typing import Optional

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenization.loading import choose_tokenizer
from albert_tf.tokenization.regex_patterns import (combining_regex, whitespace_regex,
                                                   wordpiece_regexes)
from albert_tf.tokenization.sentencepiece import SentencePieceTokenizer, digit_comma_expansions
from albert_tf.tokenization.wordpiece import (MAX_INPUT_CHARS_PER_WORD, UNK_TOKEN,
                                              WORDPIECE_PREFIX, WordPieceTokenizer)

# The Python tokenizer's attributes each in-graph tokenizer carries as Python ints.
_COPIED_ATTRIBUTES = ("vocab_size", "pad_id", "unk_id", "cls_id", "sep_id", "mask_id")

# A word longer than the original's 200-character limit is replaced by this
# many bytes of "a", which FastWordpieceTokenizer maps to [UNK] (its limit is
# in bytes: 4 * 200, so that every word of at most 200 characters fits).
_WORDPIECE_MAX_BYTES = 4 * MAX_INPUT_CHARS_PER_WORD


class _InGraphTokenizerBase(tf.Module):
    """What both in-graph tokenizers share: the Python tokenizer's ids; calling is `tokenize`."""

    def _copy_attributes(self, python_tokenizer, do_lower_case: bool) -> None:
        self.do_lower_case = do_lower_case
        for attr in _COPIED_ATTRIBUTES:
            setattr(self, attr, getattr(python_tokenizer, attr))

    def tokenize(self, texts):
        raise NotImplementedError

    def __call__(self, texts):
        return self.tokenize(texts)


class InGraphTokenizer(_InGraphTokenizerBase):
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
        self._copy_attributes(python_tokenizer, do_lower_case)
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


class InGraphWordPieceTokenizer(_InGraphTokenizerBase):
    """`WordPieceTokenizer` (BasicTokenizer + WordPiece) as TensorFlow ops.

    Args:
      vocab_file: the WordPiece vocabulary (vocab.txt, one token a line).
      do_lower_case: the original's flag.

    Calling it maps tf.string [B] to int32 RaggedTensor [B, (T)] with exactly
    the ids of `WordPieceTokenizer.encode_ids`. The BasicTokenizer's steps
    are regexes whose character classes are computed from Python's
    `unicodedata` (tensorflow-text's BasicTokenizer lower-cases with ICU
    case folding, which maps full-width "Ａ" to "a" where Python gives
    "ａ", so it is not used); lower-casing is `tf.strings.lower`, NFD is
    `normalize_utf8` (ICU), and WordPiece is tensorflow-text's
    `FastWordpieceTokenizer` (the same greedy longest-match-first).
    Loading a SavedModel that holds it needs only TensorFlow and
    tensorflow-text.

    Attributes: vocab_size, do_lower_case, pad_id, unk_id, cls_id, sep_id,
    mask_id (Python ints).
    """

    def __init__(self, vocab_file: Optional[str] = None, do_lower_case: bool = True,
                 name: Optional[str] = None):
        super().__init__(name=name)
        python_tokenizer = WordPieceTokenizer(vocab_file, do_lower_case=do_lower_case)
        self._copy_attributes(python_tokenizer, do_lower_case)
        self.regexes = wordpiece_regexes()
        tokens = python_tokenizer.convert_ids_to_tokens(range(python_tokenizer.vocab_size))
        # FastWordpieceTokenizer rejects tokens with spaces (the original's
        # token for an empty line); no word can contain a space anyway.
        tokens = [t if t.strip() else f"[albert_tf_unreachable_{i}]"
                  for i, t in enumerate(tokens)]
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens, suffix_indicator=WORDPIECE_PREFIX,
            max_bytes_per_word=_WORDPIECE_MAX_BYTES, token_out_type=tf.int64,
            unknown_token=UNK_TOKEN, no_pretokenization=True)
        self._too_long = tf.constant("a" * (_WORDPIECE_MAX_BYTES + 1))

    def words(self, texts):
        """The BasicTokenizer: tf.string [B] -> words tf.string RaggedTensor [B, (W)]."""
        regex = self.regexes
        texts = tf.strings.regex_replace(texts, regex["control"], "")
        texts = tf.strings.regex_replace(texts, regex["cjk"], " \\0 ")
        if self.do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = tf.strings.regex_replace(texts, regex["marks"], "")
        texts = tf.strings.regex_replace(texts, regex["punctuation"], " \\0 ")
        texts = tf.strings.regex_replace(texts, regex["whitespace"], " ")
        return tf.strings.split(texts)

    def wordpiece_with_offsets(self, words):
        """WordPiece of BasicTokenizer words tf.string [W] -> (ids int64 [W, (P)],
        byte starts int64 [W, (P)], byte ends int64 [W, (P)]) inside each word.

        A word of more than 200 characters is one [UNK] (whose offsets may run
        past the word's end: clamp them to its length).
        """
        long_words = tf.strings.length(words, unit="UTF8_CHAR") > MAX_INPUT_CHARS_PER_WORD
        words = tf.where(long_words, self._too_long, words)
        return self._wordpiece.tokenize_with_offsets(words)

    def tokenize(self, texts):
        """Raw texts tf.string [B] -> ids int32 RaggedTensor [B, (T)]."""
        words = self.words(texts)
        ids, _, _ = self.wordpiece_with_offsets(words.flat_values)
        ids = words.with_flat_values(ids).merge_dims(1, 2)
        return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)

    def preprocess(self, texts):
        """The identity: WordPiece normalises inside `tokenize`, as the original."""
        return texts

    def encode_preprocessed(self, texts):
        return self.tokenize(texts)


def _tokenizer_from_proto(model_proto: bytes, do_lower_case: bool) -> SentencePieceTokenizer:
    """The Python tokenizer of a serialized model (through a temporary file)."""
    handle, path = tempfile.mkstemp(suffix=".model")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(model_proto)
        return SentencePieceTokenizer(path, do_lower_case=do_lower_case)
    finally:
        os.remove(path)


def in_graph_tokenizer(vocab_file: Optional[str] = None, spm_model_file: Optional[str] = None,
                       do_lower_case: bool = True):
    """The in-graph twin of `FullTokenizer(vocab_file, do_lower_case, spm_model_file)`."""
    return choose_tokenizer(vocab_file, spm_model_file, do_lower_case,
                            InGraphTokenizer, InGraphWordPieceTokenizer)
