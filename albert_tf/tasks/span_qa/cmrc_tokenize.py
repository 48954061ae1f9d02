"""NLTK's `word_tokenize` for the English runs of the CMRC 2018 metric.

The official CMRC 2018 evaluation script is Python 2, so it ran with NLTK
3.4.5 at the newest. It hands every run of non-Chinese text (already lower-cased,
its punctuation list removed) to `nltk.word_tokenize`: Punkt sentence splitting
with NLTK's English model, then the "improved" Penn Treebank tokenizer on each
sentence. This module gives the same tokens without NLTK or its data:

- `treebank_tokenize(text)`: the improved Treebank rules of NLTK 3.4.5's
  `word_tokenize`, with Python 2's regular-expression semantics (the rules NLTK
  compiled without `re.UNICODE` see only ASCII digits, word characters and
  whitespace; Python 3's `re.ASCII` is the same).
- `punkt_sentences(text)`: Punkt (Kiss & Strunk 2006, as NLTK implements it)
  with the abbreviation types and collocations of NLTK's English model and an
  empty orthographic context. The ortho context (word case statistics from
  the training corpus, not available here) only decides a break after an
  initial or a number that is followed by a lower-case word which the model
  saw starting a sentence in lower case and never capitalised; everywhere
  else, and in particular for all lower-cased text without such words, the
  decision is the model's.
- `word_tokenize(text)`: both, as NLTK's `word_tokenize`.

Checked against NLTK 3.4.5 under Python 2.7, its Punkt built from the same
parameters: identical tokens on every English run (and random substrings of
runs) of the shared Chinese data sets. Newer NLTK (3.8+) also splits en/em
dashes and runs of 4+ periods, which the script never did.
"""
from __future__ import annotations

import re
from typing import List, Tuple

# ---------------------------------------------------------------- Punkt ----
# NLTK english.pickle: abbreviation types (". . " is the type of the ". . ."
# multi-character token without its last period) and collocations.
_ABBREVIATIONS = frozenset("""
    w.c ala w.r colo w.w ga s.a.y c.o.m.b aug wed jan lt adm oct reps nov yr dr gen w.va d h l
    p ph.d t r.k r.j r.i r.h s.c sep r.a m.b.a tues e.f p.a.m sen r.t h.c tenn h.f rep n.h h.m
    a.m.e a.m nev prof calif a.d n.m a.g a.a a.c a.h n.d n.c jr kan a.t corp n.y a.s n.v u.s.s.r
    ore c ok g e.h k e.l e.m s w ltd m.d.c sept col i.m.s okla co s.g s.p.a wash wis ct ariz maj
    feb chg fri s.a pa s.s n.j cos bros mich mg d.c cie f n r ms mr fla vt dec ill c.i.t va v
    minn sw u.s.a d.h vs p.m ave st conn inc u.s d.w f.g g.f g.d messrs g.k u.k f.j u.n t.j j.r
    j.p ft l.p j.c j.b m.j j.k j.j l.f l.a c.v e sr m b.v mrs ky b.f
    """.split()) | {". . "}
_N = "##number##"
_NUMBER_COLLOCATIONS = (
    "corrections insider pay-fone international cbot letters business review who pepper aes "
    "dividend notable leisure genentech credit cooper henley zimmer colgate financing "
    "wedgestone commodities pegasus abreast rj")
_COLLOCATIONS = frozenset(
    [(_N, w) for w in _NUMBER_COLLOCATIONS.split()]
    + [("j", "aron"), ("b", "wigton"), ("b", "levine"), ("o", "ludcke"), ("i", "magnin"),
       ("b", "edelman"), ("j", "fialka"), ("i", "toussie"), ("b", "smith"), ("j", "walter"),
       ("b", "stewart")])
_SENT_STARTERS = frozenset("""among since they indeed some sales in moreover yet if even these
    nevertheless similarly there when under instead meanwhile thus however but it most although
    despite nor he both this many nonetheless according separately i while so though the""".split())

_NON_WORD = r"(?:[?!)\";}\]\*:@\'\({\[])"
_MULTI_CHAR = r"(?:\-{2,}|\.{2,}|(?:\.\s){2,}\.)"
_PUNKT_WORD = re.compile(
    rf"""({_MULTI_CHAR}
          | (?=[^\(\"\`{{\[:;&\#\*@\)}}\]\-,])\S+?
            (?=\s|$|{_NON_WORD}|{_MULTI_CHAR}|,(?=$|\s|{_NON_WORD}|{_MULTI_CHAR}))
          | \S)""", re.VERBOSE)
_PERIOD_CONTEXT = re.compile(rf"\S*[.?!](?=(?P<after_tok>{_NON_WORD}|\s+(?P<next_tok>\S+)))")
_REALIGN = re.compile(r"[\"\')\]}]+?(?:\s+|(?=--)|$)", re.MULTILINE)
_NUMERIC = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$", re.ASCII)
_INITIAL = re.compile(r"[^\W\d]\.$")
_ELLIPSIS = re.compile(r"\.\.+$")


class _Token:
    __slots__ = ("tok", "type", "sentbreak", "abbr", "ellipsis")

    def __init__(self, tok: str):
        self.tok = tok
        self.type = _NUMERIC.sub(_N, tok.lower())
        self.sentbreak = self.abbr = self.ellipsis = False

    @property
    def type_no_period(self) -> str:
        return self.type[:-1] if len(self.type) > 1 and self.type[-1] == "." else self.type

    @property
    def type_no_sentperiod(self) -> str:
        return self.type_no_period if self.sentbreak else self.type


def _starts_sentence(token: _Token):
    """Punkt's orthographic heuristic with an empty ortho context: True/False/None."""
    if token.tok in (";", ":", ",", ".", "!", "?") or token.tok[0].islower():
        return False
    return None


def _annotate(tokens: List[_Token]) -> None:
    for t in tokens:  # first pass: types
        if t.tok in (".", "?", "!"):
            t.sentbreak = True
        elif _ELLIPSIS.match(t.tok):
            t.ellipsis = True
        elif t.tok.endswith(".") and not t.tok.endswith(".."):
            stem = t.tok[:-1].lower()
            if stem in _ABBREVIATIONS or stem.split("-")[-1] in _ABBREVIATIONS:
                t.abbr = True
            else:
                t.sentbreak = True
    for t, nxt in zip(tokens, tokens[1:]):  # second pass: the token and the next one
        if not t.tok.endswith("."):
            continue
        typ, next_typ = t.type_no_period, nxt.type_no_sentperiod
        initial = bool(_INITIAL.match(t.tok))
        if (typ, next_typ) in _COLLOCATIONS:
            t.sentbreak, t.abbr = False, True
            continue
        if (t.abbr or t.ellipsis) and not initial:
            if _starts_sentence(nxt) is True or (nxt.tok[0].isupper()
                                                 and next_typ in _SENT_STARTERS):
                t.sentbreak = True
                continue
        if initial or typ == _N:
            starts = _starts_sentence(nxt)
            if starts is False or (starts is None and initial and nxt.tok[0].isupper()):
                t.sentbreak, t.abbr = False, True


def _contains_sentbreak(context: str) -> bool:
    tokens = [_Token(tok) for line in context.split("\n") if line.strip()
              for tok in _PUNKT_WORD.findall(line)]
    _annotate(tokens)
    return any(t.sentbreak for t in tokens[:-1])


def punkt_sentences(text: str) -> List[str]:
    """Sentences of `text` as NLTK's English Punkt model splits it (see module doc)."""
    slices: List[Tuple[int, int]] = []
    last = 0
    for match in _PERIOD_CONTEXT.finditer(text):
        if _contains_sentbreak(match.group() + match.group("after_tok")):
            slices.append((last, match.end()))
            last = match.start("next_tok") if match.group("next_tok") else match.end()
    slices.append((last, len(text.rstrip())))
    # Closing quotes/brackets after the break belong to the sentence before it.
    sentences, shift = [], 0
    for i, (start, end) in enumerate(slices):
        start += shift
        if i + 1 == len(slices):
            if text[start:end]:
                sentences.append(text[start:end])
            continue
        following = slices[i + 1]
        found = _REALIGN.match(text[following[0]:following[1]])
        if found:
            sentences.append(text[start:following[0] + len(found.group(0).rstrip())])
            shift = found.end()
        else:
            shift = 0
            if text[start:end]:
                sentences.append(text[start:end])
    return sentences


# ------------------------------------------------------------- Treebank ----
def _rules(*rules):
    return [(re.compile(pattern, flags), repl) for pattern, repl, flags in rules]


_A, _U = re.ASCII, 0  # NLTK's rules compiled without / with re.UNICODE under Python 2
_STARTING_QUOTES = _rules(
    ("([«“‘„]|[`]+)", r" \1 ", _U),
    (r'^"', r"``", _A),
    (r"(``)", r" \1 ", _A),
    (r"([ \(\[{<])(\"|\'{2})", r"\1 `` ", _A),
    (r"(?i)(\')(?!re|ve|ll|m|t|s|d)(\w)\b", r"\1 \2", _U),
)
_PUNCTUATION = _rules(
    (r"([^\.])(\.)([\]\)}>\"\'»”’ ]*)\s*$", r"\1 \2 \3 ", _U),
    (r"([:,])([^\d])", r" \1 \2", _A),
    (r"([:,])$", r" \1 ", _A),
    (r"\.\.\.", r" ... ", _A),
    (r"[;@#$%&]", r" \g<0> ", _A),
    (r"([^\.])(\.)([\]\)}>\"\']*)\s*$", r"\1 \2\3 ", _A),
    (r"[?!]", r" \g<0> ", _A),
    (r"([^'])' ", r"\1 ' ", _A),
    (r"[\]\[\(\)\{\}\<\>]", r" \g<0> ", _A),
    (r"--", r" -- ", _A),
)
_ENDING_QUOTES = _rules(
    ("([»”’])", r" \1 ", _U),
    (r'"', " '' ", _A),
    (r"(\S)(\'\')", r"\1 \2 ", _A),
    (r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 ", _A),
    (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 ", _A),
    # MacIntyre's contractions (split into two tokens).
    (r"(?i)\b(can)(?#X)(not)\b", r" \1 \2 ", _A),
    (r"(?i)\b(d)(?#X)('ye)\b", r" \1 \2 ", _A),
    (r"(?i)\b(gim)(?#X)(me)\b", r" \1 \2 ", _A),
    (r"(?i)\b(gon)(?#X)(na)\b", r" \1 \2 ", _A),
    (r"(?i)\b(got)(?#X)(ta)\b", r" \1 \2 ", _A),
    (r"(?i)\b(lem)(?#X)(me)\b", r" \1 \2 ", _A),
    (r"(?i)\b(mor)(?#X)('n)\b", r" \1 \2 ", _A),
    (r"(?i)\b(wan)(?#X)(na)\s", r" \1 \2 ", _A),
    (r"(?i) ('t)(?#X)(is)\b", r" \1 \2 ", _A),
    (r"(?i) ('t)(?#X)(was)\b", r" \1 \2 ", _A),
)


def treebank_tokenize(sentence: str) -> List[str]:
    """Tokens of one sentence by NLTK 3.4.5's improved Treebank rules (no NLTK needed)."""
    for pattern, repl in _STARTING_QUOTES + _PUNCTUATION:
        sentence = pattern.sub(repl, sentence)
    sentence = f" {sentence} "
    for pattern, repl in _ENDING_QUOTES:
        sentence = pattern.sub(repl, sentence)
    return sentence.split()


def word_tokenize(text: str) -> List[str]:
    """`nltk.word_tokenize(text)` of NLTK 3.4.5 with the English model (see module doc)."""
    return [token for sentence in punkt_sentences(text) for token in treebank_tokenize(sentence)]
