"""A small rule-based English sentence splitter for raw-text input.

No maintained splitter is a core dependency of this project (NLTK's punkt needs
a model download, pySBD/spaCy/blingfire would be new requirements), so raw text
is split with rules: a sentence ends at `.`, `!` or `?` (optionally followed by
closing quotes or brackets) when whitespace and then an upper-case letter, a
digit or an opening quote follow, unless the word before the period is a known
abbreviation ("Mr.", "e.g.") or a single-letter initial ("J. S. Bach").
It is deterministic and fast (one regex scan per paragraph); it will
occasionally split or merge wrongly, which only moves SOP segment boundaries.
"""
from __future__ import annotations

import re
from typing import List

_ABBREVIATIONS = frozenset("""
mr mrs ms messrs mme mlle dr prof rev hon st sr jr mt ft capt col gen lt maj sgt
gov pres sen rep supt esq vs etc e.g i.e cf viz no nos vol vols ch chap fig figs
op pp p ed eds a.m p.m jan feb mar apr jun jul aug sep sept oct nov dec inc ltd co corp
""".split())

# Terminal punctuation, optional closing quotes/brackets, whitespace, then a
# plausible sentence start (optionally behind opening quotes/brackets).
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[_]*[A-Z0-9])")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)\.$")


def split_sentences(paragraph: str) -> List[str]:
    """Splits one paragraph (whitespace already collapsed or not) into sentences.

    Returns the non-empty, stripped sentences in order; their concatenation
    with single spaces equals the whitespace-collapsed paragraph.
    """
    text = " ".join(paragraph.split())
    if not text:
        return []
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        if text[match.start()] == ".":
            word = _WORD_BEFORE.search(text, start, match.start() + 1)
            if word:
                token = word.group(1).lower()
                if len(token) == 1 or token in _ABBREVIATIONS \
                        or token.rstrip(".") in _ABBREVIATIONS:
                    continue
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences
