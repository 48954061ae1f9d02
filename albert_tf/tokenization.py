"""Tokenization with the original ALBERT's behaviour: SentencePiece and WordPiece.

`FullTokenizer(vocab_file=None, do_lower_case=True, spm_model_file=None)` is
the original's entry point: with a SentencePiece model it is
`SentencePieceTokenizer` (the English checkpoints), with only a vocabulary file
it is `WordPieceTokenizer` (BERT's BasicTokenizer + greedy WordPiece: the
Chinese checkpoints `albert_*_zh`). Both share the `Tokenizer` interface every
caller uses; `in_graph_tokenizer` gives the same ids as TensorFlow ops.

Sections:
  1. `preprocess_text`: the normalisation the original applies to every line
     before SentencePiece (whitespace collapse, NFKD accent stripping, optional
     lower-casing).
  2. `SentencePieceTokenizer`: a `FullTokenizer`-like Python tokenizer
     (`tokenize`, `convert_tokens_to_ids`, `convert_ids_to_tokens`) plus a fast
     batch path `encode_ids` that gives the same ids as
     `convert_tokens_to_ids(tokenize(text))` for every input.
  3. `WordPieceTokenizer`: the original's WordPiece path (section 3 below
     lists its rules), and `FullTokenizer` / `load_tokenizer`, which choose.
  4. `InGraphTokenizer` (SentencePiece) and `InGraphWordPieceTokenizer`: the
     same normalisation and ids as TensorFlow ops (tensorflow-text), for
     tf.data and for SavedModels that take raw text. The classes are created
     on first access so that sections 1-3 never import TensorFlow.

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

from albert_tf.errors import UserError

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


class SentencePieceTokenizer(Tokenizer):
    """ALBERT's SentencePiece tokenizer: pieces, ids and the special-piece ids.

    Attributes (ids are ints, -1 when the model lacks the piece):
      vocab_size, pad_id, unk_id, cls_id, sep_id, mask_id.
    `tokenize` does not normalise; call `preprocess` (or `preprocess_text`)
    first, as create_pretraining_data does.
    """

    kind = "sentencepiece"

    def __init__(self, spm_model_file: str, do_lower_case: bool = True):
        import sentencepiece as spm  # local import keeps `import albert_tf` light

        with open(spm_model_file, "rb") as handle:
            proto = handle.read()
        self.spm_model_file = self.vocab_file = spm_model_file
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

    def token_text(self, token: str) -> str:
        return token.replace(SPIECE_UNDERLINE, " ").strip() or token


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
# 3. WordPiece tokenizer (Python) and the choice between the two
# ---------------------------------------------------------------------------
#
# The original's WordPiece path (BERT's tokenization, used by the Chinese
# checkpoints), rule by rule:
#   * vocabulary: one token per line, the first whitespace-separated field (an
#     empty line is the token " "); a repeated token keeps its first id, so
#     ids count distinct tokens in file order.
#   * BasicTokenizer: drop U+0000, U+FFFD and control characters (categories
#     Cc and Cf, except \t \n \r); turn whitespace (" ", \t, \n, \r and
#     category Zs) into " "; put spaces around every CJK ideograph (the
#     original's code-point ranges); split on Python whitespace; per word, when
#     do_lower_case: str.lower(), then NFD and drop category Mn; split off every
#     punctuation character (ASCII non-alphanumeric printable characters and
#     category P*) as its own word.
#   * WordpieceTokenizer: a word of more than 200 characters is [UNK] (ALBERT's
#     and BERT's max_input_chars_per_word; Hugging Face uses 100); otherwise
#     greedy longest-match-first from the left, pieces after the first prefixed
#     "##"; a word with any unmatched remainder is one [UNK].

WORDPIECE_PREFIX = "##"
UNK_TOKEN = "[UNK]"
PAD_TOKEN = "[PAD]"
MAX_INPUT_CHARS_PER_WORD = 200

# The original's `_is_chinese_char` ranges (inclusive).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk_char(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def is_wordpiece_punctuation(char: str) -> bool:
    """The original's `_is_punctuation`: ASCII non-alphanumeric printables, and Unicode P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_wordpiece_control(char: str) -> bool:
    """The original's `_is_control`, plus U+0000 and U+FFFD, which `_clean_text` also drops."""
    if char in "\t\n\r":
        return False
    return ord(char) in (0, 0xFFFD) or unicodedata.category(char) in ("Cc", "Cf")


def is_wordpiece_whitespace(char: str) -> bool:
    """The original's `_is_whitespace`."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


class _CharClasses:
    """Code-point sets of the BasicTokenizer, computed once from `unicodedata`.

    `clean` is a str.translate table doing `_clean_text` and the CJK spacing in
    one pass; `punctuation` a compiled regex splitting punctuation off a word;
    `marks` a translate table deleting category Mn.
    """

    _instance = None

    def __init__(self):
        import re

        # One category lookup per code point (the same rules as the is_* functions above,
        # spelled out so that building the tables takes ~0.3 s instead of ~1 s).
        clean: Dict[int, Optional[str]] = {0: None, 0xFFFD: None}
        punctuation, marks = [], {}
        ascii_punctuation = {cp for cp in range(128) if is_wordpiece_punctuation(chr(cp))}
        for cp in range(0x110000):
            category = unicodedata.category(chr(cp))
            if category in ("Cc", "Cf"):
                if cp not in (9, 10, 13):
                    clean[cp] = None
            elif category == "Zs" and cp != 32:
                clean[cp] = " "
            elif category == "Mn":
                marks[cp] = None
            if category[0] == "P" or cp in ascii_punctuation:
                punctuation.append(cp)
        for cp in (9, 10, 13):
            clean[cp] = " "
        for lo, hi in CJK_RANGES:
            for cp in range(lo, hi + 1):
                clean[cp] = f" {chr(cp)} "
        self.clean = clean
        self.marks = marks
        self.punctuation_codes = punctuation
        self.punctuation = re.compile(
            "([" + "".join(re.escape(chr(cp)) for cp in punctuation) + "])")

    @classmethod
    def get(cls) -> "_CharClasses":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


def load_vocab(vocab_file: str) -> Dict[str, int]:
    """token -> id of a WordPiece vocabulary file, by the original's `load_vocab` rules.

    Raises TokenizerError naming the file (and line) when it is missing, is a
    directory, or is not UTF-8.
    """
    import os

    if not os.path.exists(vocab_file):
        raise TokenizerError(f"{vocab_file}: no such vocabulary file")
    if os.path.isdir(vocab_file):
        raise TokenizerError(f"{vocab_file} is a directory; give the vocabulary file itself "
                             "(e.g. vocab_chinese.txt or vocab.txt)")
    vocab: Dict[str, int] = {}
    with open(vocab_file, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise TokenizerError(f"{vocab_file}:{number}: not UTF-8 ({err.reason}); is this "
                                     "a WordPiece vocabulary (one token per line)?") from None
            token = line.strip().split()[0] if line.strip() else " "
            if token not in vocab:
                vocab[token] = len(vocab)
    if not vocab:
        raise TokenizerError(f"{vocab_file}: the vocabulary file is empty")
    return vocab


def normalize_word(text: str, do_lower_case: bool) -> str:
    """The BasicTokenizer's per-word step: with `do_lower_case`, str.lower(), then NFD and
    category Mn dropped; else `text` unchanged."""
    if not do_lower_case:
        return text
    text = text.lower()
    if text.isascii():
        return text  # NFD is the identity on ASCII, which has no marks
    return unicodedata.normalize("NFD", text).translate(_CharClasses.get().marks)


class WordPieceTokenizer(Tokenizer):
    """The original's WordPiece `FullTokenizer` (BasicTokenizer + WordpieceTokenizer).

    Args:
      vocab_file: the vocabulary (`vocab_chinese.txt`, `vocab.txt`), one token a line.
      do_lower_case: lower-case and strip accents (the original's flag; True
        for the Chinese checkpoints).

    `preprocess` is the identity (the original normalises WordPiece text inside
    `tokenize` only). Raises TokenizerError naming the file when the
    vocabulary lacks [UNK], [CLS], [SEP] or [MASK].
    """

    kind = "wordpiece"

    def __init__(self, vocab_file: str, do_lower_case: bool = True,
                 max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD):
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self._vocab = load_vocab(vocab_file)
        self.inv_vocab = {i: token for token, i in self._vocab.items()}
        self.vocab_size = len(self._vocab)
        missing = [t for t in (UNK_TOKEN, CLS_PIECE, SEP_PIECE, MASK_PIECE) if t not in self._vocab]
        if missing:
            raise TokenizerError(
                f"{vocab_file}: the vocabulary has no {', '.join(missing)} "
                f"({self.vocab_size} tokens read); a WordPiece vocabulary for ALBERT needs "
                "[UNK], [CLS], [SEP] and [MASK] (for a SentencePiece model use --spm_model_file)")
        self.unk_id = self._vocab[UNK_TOKEN]
        self.cls_id = self._vocab[CLS_PIECE]
        self.sep_id = self._vocab[SEP_PIECE]
        self.mask_id = self._vocab[MASK_PIECE]
        self.pad_id = self._vocab.get(PAD_TOKEN, -1)
        self._max_token_chars = max(len(t) for t in self._vocab)

    @property
    def vocab(self) -> Dict[str, int]:
        return self._vocab

    def preprocess(self, text: str) -> str:
        return text

    def basic_tokenize(self, text: str) -> List[str]:
        """The BasicTokenizer: words and punctuation marks, normalised."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "ignore")  # the original's convert_to_unicode
        classes = _CharClasses.get()
        words = []
        for word in text.translate(classes.clean).split():
            word = normalize_word(word, self.do_lower_case)
            if word.isalnum():
                words.append(word)
            else:
                words.extend(part for part in classes.punctuation.split(word) if part)
        # The original re-splits on whitespace: lower() or NFD may have made some.
        return " ".join(words).split()

    def wordpiece(self, word: str) -> List[str]:
        """Greedy longest-match-first pieces of one word ([UNK] if it cannot be covered)."""
        if len(word) > self.max_input_chars_per_word:
            return [UNK_TOKEN]
        if word in self._vocab:  # what the greedy match finds first, without the search
            return [word]
        vocab, pieces, start = self._vocab, [], 0
        while start < len(word):
            # No vocabulary entry is longer than _max_token_chars, so longer
            # candidates can be skipped without changing the result.
            end = min(len(word), start + self._max_token_chars)
            while end > start:
                piece = word[start:end] if start == 0 else WORDPIECE_PREFIX + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            else:
                return [UNK_TOKEN]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> List[str]:
        return [piece for word in self.basic_tokenize(text) for piece in self.wordpiece(word)]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        vocab = self._vocab
        ids = []
        for token in tokens:
            if token not in vocab:
                raise KeyError(f"token {token!r} is not in the vocabulary {self.vocab_file}")
            ids.append(vocab[token])
        return ids

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        return [self.inv_vocab[int(i)] for i in ids]

    def is_start_piece_table(self) -> List[bool]:
        """The original's `_is_start_piece_bert`: a token starts a word unless it is "##..."."""
        return [not self.inv_vocab[i].startswith(WORDPIECE_PREFIX)
                for i in range(self.vocab_size)]

    def token_text(self, token: str) -> str:
        return token[len(WORDPIECE_PREFIX):] if (token.startswith(WORDPIECE_PREFIX)
                                                 and len(token) > 2) else token


def FullTokenizer(vocab_file: Optional[str] = None, do_lower_case: bool = True,  # noqa: N802
                  spm_model_file: Optional[str] = None) -> Tokenizer:
    """The original's `FullTokenizer`: SentencePiece when `spm_model_file` is given, else WordPiece.

    As in the original, a SentencePiece model wins when both are given (the
    English checkpoints ship a `30k-clean.vocab` beside the model).
    """
    if spm_model_file:
        return SentencePieceTokenizer(spm_model_file, do_lower_case=do_lower_case)
    if vocab_file:
        return WordPieceTokenizer(vocab_file, do_lower_case=do_lower_case)
    raise TokenizerError("give a SentencePiece model (--spm_model_file) or a WordPiece "
                         "vocabulary (--vocab_file)")


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


def vocabulary_fingerprint(tokenizer: Tokenizer) -> str:
    """sha1 of the tokenizer's vocabulary file, with its kind (for feature-cache keys)."""
    import hashlib

    with open(tokenizer.vocab_file, "rb") as handle:
        digest = hashlib.sha1(handle.read()).hexdigest()
    return digest if tokenizer.kind == "sentencepiece" else f"{tokenizer.kind}:{digest}"


# ---------------------------------------------------------------------------
# 4. In-graph tokenizer (tensorflow-text)
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


def wordpiece_regexes() -> Dict[str, str]:
    """RE2 classes of the BasicTokenizer's character sets (from Python's `unicodedata`)."""
    classes = _CharClasses.get()
    control = sorted(cp for cp, out in classes.clean.items() if out is None)
    cjk = [cp for lo, hi in CJK_RANGES for cp in range(lo, hi + 1)]
    return {"control": _regex_class(control),
            "cjk": _regex_class(sorted(cjk)),
            "marks": _regex_class(sorted(classes.marks)),
            "punctuation": _regex_class(classes.punctuation_codes),
            "whitespace": whitespace_regex()}


# A word longer than the original's 200-character limit is replaced by this
# many bytes of "a", which FastWordpieceTokenizer maps to [UNK] (its limit is
# in bytes: 4 * 200, so that every word of at most 200 characters fits).
_WORDPIECE_MAX_BYTES = 4 * MAX_INPUT_CHARS_PER_WORD


def _make_in_graph_wordpiece_class():
    tf, tf_text = _tf_modules()

    class InGraphWordPieceTokenizer(tf.Module):
        """`WordPieceTokenizer` (BasicTokenizer + WordPiece) as TensorFlow ops.

        Args:
          vocab_file: the WordPiece vocabulary (or give `vocab`, its tokens in id order).
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
            self.do_lower_case = do_lower_case
            for attr in ("vocab_size", "pad_id", "unk_id", "cls_id", "sep_id", "mask_id"):
                setattr(self, attr, getattr(python_tokenizer, attr))
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

        def __call__(self, texts):
            return self.tokenize(texts)

    return InGraphWordPieceTokenizer


def in_graph_tokenizer(vocab_file: Optional[str] = None, spm_model_file: Optional[str] = None,
                       do_lower_case: bool = True):
    """The in-graph twin of `FullTokenizer(vocab_file, do_lower_case, spm_model_file)`."""
    if spm_model_file:
        return __getattr__("InGraphTokenizer")(spm_model_file, do_lower_case=do_lower_case)
    if vocab_file:
        return __getattr__("InGraphWordPieceTokenizer")(vocab_file, do_lower_case=do_lower_case)
    raise TokenizerError("give a SentencePiece model (--spm_model_file) or a WordPiece "
                         "vocabulary (--vocab_file)")


def __getattr__(name):
    """Builds `InGraphTokenizer` / `InGraphWordPieceTokenizer` on first access (PEP 562).

    The classes derive from `tf.Module`, so defining them imports TensorFlow;
    doing that lazily keeps sections 1-3 importable without TensorFlow (the
    data-preparation workers).
    """
    makers = {"InGraphTokenizer": _make_in_graph_module_class,
              "InGraphWordPieceTokenizer": _make_in_graph_wordpiece_class}
    if name in makers:
        cls = makers[name]()
        cls.__module__ = __name__
        cls.__qualname__ = name
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
