"""Tokens with character offsets: the original's ids, offsets that point at each token."""
import pytest

from albert_tf.pipelines.encoding import TextEncoder
from albert_tf.pipelines.token_classification import windows
from albert_tf.tokenization import load_tokenizer
from albert_tf.tokenization.base import strip_accents

ODD = ["Café Müller, ÉCOLE", "1999, 2,000 and 3,5", "tabs\tand\nnewlines  and   spaces",
       "ΣΟΦΟΣ σοφός", "full-width ＡＢＣ１２３", "emoji 🙂 and ½", "``quoted'' \"text\"",
       "", "   ", "Jean-Luc (U.S.A.) cost £5 – or €3.", "form\x0cfeed and\x85next\x1cline"]


@pytest.fixture(scope="module")
def sentencepiece(shared_data):
    return TextEncoder(load_tokenizer(
        spm_model_file=str(shared_data / "spm_official" / "30k-clean.model")))


@pytest.fixture(scope="module")
def wordpiece(chinese_vocab_file):
    return TextEncoder(load_tokenizer(vocab_file=chinese_vocab_file))


def book_lines(shared_data, count=400):
    book = sorted((shared_data / "corpus" / "gutenberg").glob("*.txt"))[0]
    lines = [line for line in book.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[100:100 + count]


def original_ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(tokenizer.preprocess(text)))


def test_sentencepiece_ids_are_the_originals(sentencepiece, shared_data):
    for text in book_lines(shared_data) + ODD:
        assert sentencepiece.ids(text) == original_ids(sentencepiece.tokenizer, text), text


def test_sentencepiece_offsets_point_at_each_token(sentencepiece, shared_data):
    tokenizer = sentencepiece.tokenizer
    for text in book_lines(shared_data) + ODD:
        tokens = sentencepiece.tokens(text)
        previous = (0, 0)
        for token_id, (start, end), word in zip(tokens.ids, tokens.offsets, tokens.words):
            # in order; pieces of one character ("½" is "1⁄2" after NFKD) share its span
            assert previous <= (start, end) and start <= end <= len(text), (text, start, end)
            assert start >= previous[1] or (start, end) == previous, (text, previous, start)
            previous = (start, end)
            piece = tokenizer.convert_ids_to_tokens([token_id])[0].replace("\u2581", "")
            surface = text[start:end]
            assert surface == surface.strip(), (text, surface)  # never the space before it
            if token_id != tokenizer.unk_id and piece and surface:
                normalized = strip_accents(surface).lower()
                assert normalized == piece or piece in normalized or normalized in piece, (
                    text, piece, surface)
            span = tokens.word_spans[word]
            assert span[0] <= start and end <= span[1], (text, span, start, end)


def test_offsets_of_known_text(sentencepiece):
    text = "Anna lives in New-York, since 1999,  OK?"
    tokens = sentencepiece.tokens(text)
    pieces = sentencepiece.tokenizer.convert_ids_to_tokens(tokens.ids)
    spans = [text[s:e] for s, e in tokens.offsets]
    assert list(zip(pieces, spans)) == [
        ("▁anna", "Anna"), ("▁lives", "lives"), ("▁in", "in"), ("▁new", "New"), ("-", "-"),
        ("yo", "Yo"), ("rk", "rk"), (",", ","), ("▁since", "since"), ("▁1999", "1999"),
        (",", ","), ("▁ok", "OK"), ("?", "?")]
    # words: whitespace-delimited, cut around the model's user-defined pieces ("-")
    assert [text[slice(*tokens.word_spans[w])] for w in tokens.words] == [
        "Anna", "lives", "in", "New", "-", "York,", "York,", "York,", "since", "1999,", "1999,",
        "OK?", "OK?"]


def test_wordpiece_ids_and_offsets(wordpiece, shared_data):
    novel = sorted((shared_data / "chinese" / "corpus").rglob("*.txt"))[0]
    lines = [line for line in novel.read_text(encoding="utf-8").splitlines() if line.strip()]
    tokenizer = wordpiece.tokenizer
    for text in lines[:200] + ["ALBERT 模型在 2019 年发布, Café!", "ＡＢＣ全角"] + ODD:
        tokens = wordpiece.tokens(text)
        assert tokens.ids == original_ids(tokenizer, text), text
        for token_id, (start, end) in zip(tokens.ids, tokens.offsets):
            assert 0 <= start < end <= len(text) and text[start:end].strip() == text[start:end]


def test_windows_overlap_by_the_stride_and_reach_the_end():
    assert windows(10, 4, 1) == [range(0, 4), range(3, 7), range(6, 10)]
    assert windows(10, 4, 0) == [range(0, 4), range(4, 8), range(8, 10)]
    assert windows(3, 4, 2) == [range(0, 3)]
    assert windows(0, 4, 2) == [range(0, 0)]


def test_decode_cleans_spaces_as_hugging_face(sentencepiece):
    ids = sentencepiece.ids("The cat , sat . Is it ? I don't know")
    assert sentencepiece.decode(ids) == "the cat, sat. is it? i don't know"
    assert sentencepiece.tokens_to_string(["▁new", "▁york", "er"]) == "new yorker"
