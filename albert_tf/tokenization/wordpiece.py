r"""The WordPiece tokenizer (BERT's, used by the Chinese checkpoints `albert_*_zh`), in Python.

  * the WordPiece constants (`WORDPIECE_PREFIX`, `UNK_TOKEN`, `PAD_TOKEN`,
    `MAX_INPUT_CHARS_PER_WORD`, `CJK_RANGES`) and the BasicTokenizer's
    character rules (`is_cjk_char`, `is_wordpiece_punctuation`,
    `is_wordpiece_control`, `is_wordpiece_whitespace`);
  * `BasicTokenizerTables`: the same rules as code-point tables, built once;
  * `load_vocab`, `normalize_word` and `WordPieceTokenizer`.

The original's WordPiece path (BERT's tokenization), rule by rule:
  * vocabulary: one token per line, the first whitespace-separated field (an
    empty line is the token " "); a repeated token keeps its first id, so
    ids count distinct tokens in file order.
  * BasicTokenizer: drop U+0000, U+FFFD and control characters (categories
    Cc and Cf, except \t \n \r); turn whitespace (" ", \t, \n, \r and
    category Zs) into " "; put spaces around every CJK ideograph (the
    original's code-point ranges); split on Python whitespace; per word, when
    do_lower_case: str.lower(), then NFD and drop category Mn; split off every
    punctuation character (ASCII non-alphanumeric printable characters and
    category P*) as its own word.
  * WordpieceTokenizer: a word of more than 200 characters is [UNK] (ALBERT's
    and BERT's max_input_chars_per_word; Hugging Face uses 100); otherwise
    greedy longest-match-first from the left, pieces after the first prefixed
    "##"; a word with any unmatched remainder is one [UNK].
"""
from __future__ import annotations

import unicodedata
from typing import Dict, Iterable, List, Optional

from albert_tf.tokenization.base import (CLS_PIECE, MASK_PIECE, SEP_PIECE, Tokenizer,
                                         TokenizerError)

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


class BasicTokenizerTables:
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
    def get(cls) -> "BasicTokenizerTables":
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
    return unicodedata.normalize("NFD", text).translate(BasicTokenizerTables.get().marks)


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
        classes = BasicTokenizerTables.get()
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

