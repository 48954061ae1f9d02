"""RE2 patterns of the Python tokenizers' character rules, for TensorFlow's regex ops.

The normalisation steps have no library op with Python's exact semantics, so
the in-graph tokenizers (and span_qa's serving module) run them as regexes
whose character classes are computed here from Python's own `str.isspace`,
`unicodedata.combining` and the BasicTokenizer's tables. Computing them needs
no TensorFlow.

  * `regex_class`: an RE2 character class matching exactly some code points;
  * `whitespace_regex`, `combining_regex`: `preprocess_text`'s whitespace runs
    and combining marks;
  * `wordpiece_regexes`: the BasicTokenizer's character sets.
"""
from __future__ import annotations

from typing import Dict, Sequence

from albert_tf.tokenization.base import combining_table
from albert_tf.tokenization.wordpiece import CJK_RANGES, BasicTokenizerTables


def regex_class(code_points: Sequence[int]) -> str:
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
    return regex_class([cp for cp in range(0x110000) if chr(cp).isspace()]) + "+"


def combining_regex() -> str:
    """RE2 pattern for one character with a non-zero Unicode combining class."""
    return regex_class(sorted(combining_table()))


def wordpiece_regexes() -> Dict[str, str]:
    """RE2 classes of the BasicTokenizer's character sets (from Python's `unicodedata`)."""
    classes = BasicTokenizerTables.get()
    control = sorted(cp for cp, out in classes.clean.items() if out is None)
    cjk = [cp for lo, hi in CJK_RANGES for cp in range(lo, hi + 1)]
    return {"control": regex_class(control),
            "cjk": regex_class(sorted(cjk)),
            "marks": regex_class(sorted(classes.marks)),
            "punctuation": regex_class(classes.punctuation_codes),
            "whitespace": whitespace_regex()}

