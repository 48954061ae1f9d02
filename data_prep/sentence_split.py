"""A small rule-based sentence splitter for raw-text input (English and Chinese).

No maintained splitter is a core dependency of this project (NLTK's punkt needs
a model download, pySBD/spaCy/blingfire would be new requirements), so raw text
is split with rules:

  * English: a sentence ends at `.`, `!` or `?` (optionally followed by
    closing quotes or brackets) when whitespace and then an upper-case letter,
    a digit or an opening quote follow, unless the word before the period is a
    known abbreviation ("Mr.", "e.g.") or a single-letter initial ("J. S. Bach").
  * Chinese: a sentence ends after a run of `。` `！` `？` (also the half-width
    ideographic stop `｡`) and the closing quotes/brackets right after it
    (`”` `’` `」` `』` `）` `》` `】` ...), whatever follows and without needing
    whitespace, unless a clause mark (`，` `、` `；` `：` and their ASCII forms)
    follows, which means the quoted exclamation/question is part of a longer
    sentence. ASCII `!`/`?` end a sentence the same way when a Chinese
    character (or an opening Chinese quote) follows, after full-width closing
    marks only (an ASCII `"` there may as well open the next sentence). After `。` an
    ASCII `"` is taken as closing only when a `"` is open (an odd number of them
    earlier in the paragraph). `.` never ends a sentence
    before Chinese text (decimals, abbreviations), and `……` is not a boundary.

It is deterministic and fast (two regex scans per paragraph); it will
occasionally split or merge wrongly, which only moves SOP segment boundaries.
"""
from __future__ import annotations

import re
from typing import List, Tuple

_ABBREVIATIONS = frozenset("""
mr mrs ms messrs mme mlle dr prof rev hon st sr jr mt ft capt col gen lt maj sgt
gov pres sen rep supt esq vs etc e.g i.e cf viz no nos vol vols ch chap fig figs
op pp p ed eds a.m p.m jan feb mar apr jun jul aug sep sept oct nov dec inc ltd co corp
""".split())

# Terminal punctuation, optional closing quotes/brackets, whitespace, then a
# plausible sentence start (optionally behind opening quotes/brackets).
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[_]*[A-Z0-9])")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)\.$")

# CJK Unified Ideographs (+ extension A, compatibility) and the opening marks
# that may start a Chinese sentence.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_ZH_OPEN = "\u201c\u2018\u300c\u300e\uff08\u300a\u3008\u3010\u3014"  # “ ‘ 「 『 （ 《 〈 【 〔
_ZH_CLOSE_WIDE = "\u201d\u2019\u300d\u300f\uff09\u300b\u3009\u3011\u3015"  # ” ’ 」 』 ） 》 〉 】 〕
_ZH_CLOSE = _ZH_CLOSE_WIDE + "\"')\\]"
_ZH_TERMINAL = "\u3002\uff01\uff1f\uff61"  # 。 ！ ？ ｡
_CLAUSE = "\uff0c\u3001\uff1b\uff1a,;:"  # ， 、 ； ： , ; :
_ZH_BOUNDARY = re.compile(
    f"(?:[{_ZH_TERMINAL}][{_ZH_TERMINAL}!?]*[{_ZH_CLOSE}]*"
    f"|[!?]+[{_ZH_CLOSE_WIDE})\\]]*(?=\\s*[{_ZH_OPEN}{_HAN}]))"
    f"(?![{_ZH_CLOSE}{_CLAUSE}{_ZH_TERMINAL}!?])")


def _boundaries(text: str) -> List[Tuple[int, int]]:
    """Candidate (end, start of the terminal run) pairs in text order, both rules merged."""
    found = {m.end(): m.start() for m in _BOUNDARY.finditer(text)}
    for match in _ZH_BOUNDARY.finditer(text):
        end = match.end()
        quote = text.find('"', match.start(), end)
        # An ASCII '"' after 。 closes a quote only if one is open (an odd number of them
        # before it in the paragraph); otherwise it opens the next sentence.
        if quote >= 0 and text.count('"', 0, match.start()) % 2 == 0:
            end = quote
        found.setdefault(end, -1)  # -1: no abbreviation check
    return sorted(found.items())


def split_sentences(paragraph: str) -> List[str]:
    """Splits one paragraph (whitespace already collapsed or not) into sentences.

    Returns the non-empty, stripped sentences in order; joined with single
    spaces they give the whitespace-collapsed paragraph, except that a split
    inside Chinese text (no whitespace there) adds a space at the split.
    """
    text = " ".join(paragraph.split())
    if not text:
        return []
    sentences = []
    start = 0
    for end, terminal in _boundaries(text):
        if end <= start:
            continue
        if terminal >= 0 and text[terminal] == ".":
            word = _WORD_BEFORE.search(text, start, terminal + 1)
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
