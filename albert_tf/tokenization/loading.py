"""Choosing the tokenizer for the files given: SentencePiece or WordPiece.

  * `FullTokenizer`: the original's entry point; its rule (a SentencePiece
    model wins when both files are given) is `choose_tokenizer`, which the
    in-graph twin `in_graph_tokenizer` shares;
  * `load_tokenizer`: the same for command lines, every problem a
    `TokenizerError` naming the flag;
  * `is_sentencepiece_model`: whether a file is a SentencePiece model or
    something else (a WordPiece vocabulary), for APIs that take either.
"""
from __future__ import annotations

from typing import Optional

from albert_tf.tokenization.base import Tokenizer, TokenizerError
from albert_tf.tokenization.sentencepiece import SentencePieceTokenizer
from albert_tf.tokenization.wordpiece import WordPieceTokenizer


def choose_tokenizer(vocab_file: Optional[str], spm_model_file: Optional[str],
                     do_lower_case: bool, sentencepiece_class, wordpiece_class):
    """`sentencepiece_class(spm_model_file)` when a model is given, else
    `wordpiece_class(vocab_file)` (each with `do_lower_case`): the original's choice,
    for `FullTokenizer` and its in-graph twin."""
    if spm_model_file:
        return sentencepiece_class(spm_model_file, do_lower_case=do_lower_case)
    if vocab_file:
        return wordpiece_class(vocab_file, do_lower_case=do_lower_case)
    raise TokenizerError("give a SentencePiece model (--spm_model_file) or a WordPiece "
                         "vocabulary (--vocab_file)")


def FullTokenizer(vocab_file: Optional[str] = None, do_lower_case: bool = True,  # noqa: N802
                  spm_model_file: Optional[str] = None) -> Tokenizer:
    """The original's `FullTokenizer`: SentencePiece when `spm_model_file` is given, else WordPiece.

    As in the original, a SentencePiece model wins when both are given (the
    English checkpoints ship a `30k-clean.vocab` beside the model).
    """
    return choose_tokenizer(vocab_file, spm_model_file, do_lower_case,
                            SentencePieceTokenizer, WordPieceTokenizer)


def load_tokenizer(vocab_file: Optional[str] = None, spm_model_file: Optional[str] = None,
                   do_lower_case: bool = True, vocab_flag: str = "--vocab_file",
                   spm_flag: str = "--spm_model_file") -> Tokenizer:
    """`FullTokenizer` for command lines: every problem is a TokenizerError naming the flag."""
    import os

    if not spm_model_file and not vocab_file:
        raise TokenizerError(f"give {spm_flag} (SentencePiece, the English checkpoints) or "
                             f"{vocab_flag} (WordPiece, the Chinese checkpoints)")
    # The SentencePiece model wins; the vocabulary file is then not read at all.
    flag, path = (spm_flag, spm_model_file) if spm_model_file else (vocab_flag, vocab_file)
    if not os.path.exists(path):
        raise TokenizerError(f"{flag}={path}: no such file")
    if os.path.isdir(path):
        raise TokenizerError(f"{flag}={path} is a directory; give the file itself")
    if spm_model_file:
        try:
            return SentencePieceTokenizer(spm_model_file, do_lower_case=do_lower_case)
        except (RuntimeError, OSError) as err:
            raise TokenizerError(f"{spm_flag}={spm_model_file}: not a SentencePiece model "
                                 f"({err})") from None
    try:
        return WordPieceTokenizer(vocab_file, do_lower_case=do_lower_case)
    except TokenizerError as err:
        raise TokenizerError(f"{vocab_flag}: {err}") from None


def is_sentencepiece_model(path: str) -> bool:
    """True when `path` loads as a SentencePiece model; False for anything else, such as
    a WordPiece vocabulary (text): for APIs that take either kind in one argument, as the
    TF-Hub layout's `vocab_file` does."""
    import sentencepiece as spm

    try:
        with open(path, "rb") as handle:
            spm.SentencePieceProcessor().LoadFromSerializedProto(handle.read())
    except (RuntimeError, OSError):
        return False
    return True
