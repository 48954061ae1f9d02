"""An independent reference of the original's WordPiece tokenization, written from its rules.

Deliberately naive (character loops, no tables, no shortcuts) so that it shares
no code or optimisation with `albert_tf.tokenization.WordPieceTokenizer`:
    1. vocabulary: first field of each line (" " for an empty line), first id wins;
    2. clean: drop U+0000, U+FFFD, Cc/Cf except tab/newline/CR; whitespace
       (space, tab, newline, CR, Zs) -> space;
    3. space around CJK ideographs (the original's eight ranges);
    4. split on whitespace; per word: lower-case, NFD, drop Mn (if lower-casing);
       split every punctuation character (ASCII 33-47, 58-64, 91-96, 123-126, P*) off;
    5. WordPiece: > 200 characters -> [UNK]; greedy longest match, "##" for
       non-initial pieces; any unmatched remainder -> [UNK] for the whole word.
"""
import unicodedata


def read_vocab(path):
    vocab = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            token = line.strip().split()[0] if line.strip() else " "
            if token not in vocab:
                vocab[token] = len(vocab)
    return vocab


def _cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _punct(ch):
    cp = ord(ch)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(ch)[0] == "P")


def basic_tokens(text, lower=True):
    cleaned = ""
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf"):
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            cleaned += " "
        elif _cjk(cp):
            cleaned += " " + ch + " "
        else:
            cleaned += ch
    pieces = []
    for word in cleaned.split():
        if lower:
            word = word.lower()
            word = "".join(c for c in unicodedata.normalize("NFD", word)
                           if unicodedata.category(c) != "Mn")
        current = ""
        for ch in word:
            if _punct(ch):
                if current:
                    pieces.append(current)
                    current = ""
                pieces.append(ch)
            else:
                current += ch
        if current:
            pieces.append(current)
    return " ".join(pieces).split()


def wordpiece_tokens(text, vocab, lower=True):
    out = []
    for word in basic_tokens(text, lower):
        if len(word) > 200:
            out.append("[UNK]")
            continue
        start, pieces = 0, []
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                candidate = word[start:end]
                if start > 0:
                    candidate = "##" + candidate
                if candidate in vocab:
                    found = candidate
                    break
                end -= 1
            if found is None:
                pieces = None
                break
            pieces.append(found)
            start = end
        out.extend(["[UNK]"] if pieces is None else pieces)
    return out


def wordpiece_ids(text, vocab, lower=True):
    return [vocab[t] for t in wordpiece_tokens(text, vocab, lower)]
