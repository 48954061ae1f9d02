"""What both vocabularies share: special pieces, text normalisation, the Tokenizer interface.

  * the special pieces (`SPIECE_UNDERLINE`, `PAD_PIECE` ... `MASK_PIECE`);
  * `preprocess_text` / `strip_accents`: the normalisation the original applies
    to every line before SentencePiece (whitespace collapse, NFKD accent
    stripping, optional lower-casing), and `combining_table` behind it;
  * `TokenizerError`, the `Tokenizer` base class every caller uses, and
    `vocabulary_fingerprint` (feature-cache keys).

Facts from the original (google-research/albert tokenization.py, last version):
  * `preprocess_text(inputs, remove_space=True, lower=False)` strips, collapses
    runs of whitespace to one space, always applies NFKD and drops combining
    characters (there is no keep-accents switch), then lower-cases. It does
    *not* rewrite `` and '' quotes (XLNet's and Hugging Face's versions do; that
    is available here as `replace_quotes=True`).
"""
from __future__ import annotations

import unicodedata
from typing import Dict, Iterable, List, Optional, Sequence

from albert_tf.errors import UserError

SPIECE_UNDERLINE = "\u2581"
PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
CLS_PIECE = "[CLS]"
SEP_PIECE = "[SEP]"
MASK_PIECE = "[MASK]"

# ---------------------------------------------------------------------------
# Text normalisation
# ---------------------------------------------------------------------------

_COMBINING_TABLE: Optional[Dict[int, None]] = None


def combining_table() -> Dict[int, None]:
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
    return unicodedata.normalize("NFKD", text).translate(combining_table())


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
# The interface
# ---------------------------------------------------------------------------


class TokenizerError(UserError, ValueError):
    """A tokenizer cannot be built from what was given (the message names the flag or file)."""


class Tokenizer:
    """What every caller uses, whichever the vocabulary (SentencePiece or WordPiece).

    Attributes: `kind` ("sentencepiece" | "wordpiece"), `vocab_file` (the file
    that defines the ids: the SentencePiece model or the vocab.txt),
    `do_lower_case`, `vocab_size`, the special ids `pad_id unk_id cls_id sep_id
    mask_id` (ints; -1 where the vocabulary lacks the token: pad with
    max(pad_id, 0)) and `vocab` (token -> id).

    The original applies different normalisation per kind *outside* the
    tokenizer (SentencePiece: `preprocess_text` in every reader; WordPiece:
    nothing, its BasicTokenizer normalises), so callers run
    `encode_ids([preprocess(t) for t in texts])`, which is right for both.
    """

    kind = ""
    vocab_file = ""
    do_lower_case = True
    vocab_size = 0
    pad_id = unk_id = cls_id = sep_id = mask_id = -1

    def preprocess(self, text: str) -> str:
        raise NotImplementedError

    def tokenize(self, text: str) -> List[str]:
        raise NotImplementedError

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        raise NotImplementedError

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        raise NotImplementedError

    def encode_ids(self, texts: Sequence[str], num_threads: int = 1) -> List[List[int]]:
        """Ids of each (preprocessed) text: `convert_tokens_to_ids(tokenize(t))`."""
        return [self.convert_tokens_to_ids(self.tokenize(text)) for text in texts]

    def is_start_piece_table(self) -> List[bool]:
        """For each id, whether the original's whole-word rule makes it start a word."""
        raise NotImplementedError

    def token_text(self, token: str) -> str:
        """A token as display text ("▁the" -> "the", "##ing" -> "ing")."""
        raise NotImplementedError


def vocabulary_fingerprint(tokenizer: Tokenizer) -> str:
    """sha1 of the tokenizer's vocabulary file, with its kind (for feature-cache keys)."""
    import hashlib

    with open(tokenizer.vocab_file, "rb") as handle:
        digest = hashlib.sha1(handle.read()).hexdigest()
    return digest if tokenizer.kind == "sentencepiece" else f"{tokenizer.kind}:{digest}"
