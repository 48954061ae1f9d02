"""Tokenization with the original ALBERT's behaviour: SentencePiece and WordPiece.

`FullTokenizer(vocab_file=None, do_lower_case=True, spm_model_file=None)` is
the original's entry point: with a SentencePiece model it is
`SentencePieceTokenizer` (the English checkpoints), with only a vocabulary file
it is `WordPieceTokenizer` (BERT's BasicTokenizer + greedy WordPiece: the
Chinese checkpoints `albert_*_zh`). Both share the `Tokenizer` interface every
caller uses; `in_graph_tokenizer` gives the same ids as TensorFlow ops.

What lives where (every name is importable from here as well):
  base            special pieces, `preprocess_text` / `strip_accents`,
                  `TokenizerError`, the `Tokenizer` base class, `vocabulary_fingerprint`
  sentencepiece   `SentencePieceTokenizer`, `is_start_piece_sp`, `digit_comma_expansions`
  wordpiece       WordPiece constants and character rules, `BasicTokenizerTables`,
                  `load_vocab`, `normalize_word`, `WordPieceTokenizer`
  loading         `FullTokenizer`, `load_tokenizer`, `is_sentencepiece_model`
  tokenizer_json  the SentencePiece model or vocab.txt rebuilt from a Hugging Face
                  tokenizer.json (transformers 5 saves nothing else)
  regex_patterns  RE2 patterns of the character rules (`regex_class`,
                  `whitespace_regex`, `combining_regex`, `wordpiece_regexes`)
  in_graph        `InGraphTokenizer`, `InGraphWordPieceTokenizer`, `in_graph_tokenizer`
                  (tensorflow-text), loaded on first use of one of these names (PEP 562),
                  so that `import albert_tf.tokenization` does not import TensorFlow
                  (the data-preparation workers run without it).

May import: albert_tf.errors and albert_tf.fileio only (TensorFlow only in in_graph.py).
"""
from __future__ import annotations

from albert_tf.tokenization.base import (CLS_PIECE, MASK_PIECE, PAD_PIECE, SEP_PIECE,
                                         SPIECE_UNDERLINE, UNK_PIECE, Tokenizer,
                                         TokenizerError, preprocess_text, strip_accents,
                                         vocabulary_fingerprint)
from albert_tf.tokenization.loading import (FullTokenizer, is_sentencepiece_model,
                                            load_tokenizer)
from albert_tf.tokenization.regex_patterns import (combining_regex, regex_class,
                                                   whitespace_regex, wordpiece_regexes)
from albert_tf.tokenization.sentencepiece import (SentencePieceTokenizer,
                                                  digit_comma_expansions, is_start_piece_sp)
from albert_tf.tokenization.wordpiece import (CJK_RANGES, MAX_INPUT_CHARS_PER_WORD, PAD_TOKEN,
                                              UNK_TOKEN, WORDPIECE_PREFIX, BasicTokenizerTables,
                                              WordPieceTokenizer, is_cjk_char,
                                              is_wordpiece_control, is_wordpiece_punctuation,
                                              is_wordpiece_whitespace, load_vocab,
                                              normalize_word)

from albert_tf import _lazy

# The names of `in_graph`, which need TensorFlow: loaded on first use, so that the rest
# is importable without TensorFlow (its classes derive from `tf.Module`).
_IN_GRAPH_NAMES = ("InGraphTokenizer", "InGraphWordPieceTokenizer", "in_graph_tokenizer")

__all__ = [
    "CJK_RANGES", "CLS_PIECE", "MASK_PIECE", "MAX_INPUT_CHARS_PER_WORD", "PAD_PIECE",
    "PAD_TOKEN", "SEP_PIECE", "SPIECE_UNDERLINE", "UNK_PIECE", "UNK_TOKEN",
    "WORDPIECE_PREFIX", "BasicTokenizerTables", "FullTokenizer", "SentencePieceTokenizer",
    "Tokenizer", "TokenizerError", "WordPieceTokenizer", "combining_regex",
    "digit_comma_expansions", "is_cjk_char", "is_sentencepiece_model", "is_start_piece_sp",
    "is_wordpiece_control", "is_wordpiece_punctuation", "is_wordpiece_whitespace",
    "load_tokenizer", "load_vocab", "normalize_word", "preprocess_text", "regex_class",
    "strip_accents", "vocabulary_fingerprint", "whitespace_regex", "wordpiece_regexes",
]  # without the in-graph names, so that `import *` does not load TensorFlow


__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__, {name: "in_graph" for name in _IN_GRAPH_NAMES}, globals())
