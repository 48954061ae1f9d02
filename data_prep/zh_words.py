"""Chinese whole-word masking (`--zh_whole_word_mask`): word-continuation flags from a segmenter.

Beyond the original ALBERT (whose WordPiece path makes every Chinese
character its own word), as Chinese-BERT-wwm does: a Chinese word segmenter
splits each sentence into words, and the characters of a multi-character word
after its first are marked as continuations, so that the masker's whole-word
grouping masks the word as a unit. The stored tokens stay the plain characters
(no `##`); `token_boundary` is 0 on the continuation characters, as it would
be for `##` pieces.

The segmenter is rjieba (the maintained Rust port of jieba, jieba-rs, with
jieba's dictionary and HMM for unknown words; MIT, prebuilt abi3 wheels, no
dependencies). It is an optional dependency: `pip install rjieba`.

Alignment: with a WordPiece vocabulary, every CJK ideograph of the text becomes
exactly one token (the character, after NFD when lower-casing, or `[UNK]`),
in text order, and no other text yields a single-ideograph token. So the
tokens that are single ideographs are matched, in order, against the
ideographs of the segmented text; unmatched ideographs are the `[UNK]` ones.
Only words made entirely of ideographs are grouped ("A股" stays two words,
as WordPiece splits it), and the tokens never change.
"""
from __future__ import annotations

import unicodedata
from typing import Callable, List, Sequence

from data_prep import tokenization

INSTALL_HINT = "pip install rjieba"


def is_cjk_char(char: str) -> bool:
    """The original BERT BasicTokenizer's `_is_chinese_char` (CJK ideograph blocks)."""
    return tokenization.is_cjk_char(ord(char))


def load_segmenter() -> Callable[[str], List[str]]:
    """rjieba's `cut` (accurate mode, HMM on, as jieba's default); ImportError naming the flag."""
    try:
        import rjieba
    except ImportError as error:
        raise ImportError("--zh_whole_word_mask needs the Chinese word segmenter rjieba, "
                          f"which is not installed: {INSTALL_HINT}") from error
    return rjieba.cut


def continuation_flags(text: str, tokens: Sequence[str],
                       segment: Callable[[str], List[str]]) -> List[bool]:
    """For each token of `text`: True if it is an ideograph continuing a segmented word.

    `tokens` are the WordPiece tokens of `text` (unchanged); `segment` maps a
    text to its words, in order, covering the text.
    """
    chars: List[str] = []
    continues: List[bool] = []
    for word in segment(text):
        whole = len(word) > 1 and all(is_cjk_char(c) for c in word)
        for k, char in enumerate(word):
            if is_cjk_char(char):
                chars.append(char)
                continues.append(whole and k > 0)
    flags: List[bool] = []
    next_char = 0
    for token in tokens:
        flag = False
        if len(token) == 1 and is_cjk_char(token):
            k = next_char
            while k < len(chars) and token != chars[k] \
                    and token != unicodedata.normalize("NFD", chars[k]):
                k += 1
            if k < len(chars):
                flag = continues[k]
                next_char = k + 1
        flags.append(flag)
    return flags
