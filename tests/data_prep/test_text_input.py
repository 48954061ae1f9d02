"""data_prep.text_input and data_prep.sentence_split on hand-made files and the shared corpus."""
import gzip

import pytest

from data_prep.sentence_split import split_sentences
from data_prep.text_input import (InputError, ReaderOptions, expand_input_patterns,
                                  iter_documents, iter_lines, strip_gutenberg)


def _docs(paths, **kwargs):
    return [list(d.sentences) for d in iter_documents([str(p) for p in paths],
                                                      ReaderOptions(**kwargs))]


def test_sentence_format_documents_bom_crlf_gzip(tmp_path):
    text = "\ufeffFirst  Sentence.\r\nSecond one\r\n\r\n \t \r\nThird\r\n\r\n\r\nFourth \u00e9\r\n"
    plain = tmp_path / "a.txt"
    plain.write_bytes(text.encode("utf-8"))
    packed = tmp_path / "b.txt.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    expected = [["first sentence.", "second one"], ["third"], ["fourth e"]]
    assert _docs([plain]) == expected
    assert _docs([packed]) == expected
    assert _docs([plain], do_lower_case=False)[0] == ["First Sentence.", "Second one"]
    indices = [d.index for d in iter_documents([str(plain), str(packed)], ReaderOptions())]
    assert indices == [0, 1, 2, 3, 4, 5]


def test_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\nsecond \xff\xfe line\n")
    with pytest.raises(InputError, match=r"bad\.txt:2: invalid UTF-8 at byte 7"):
        _docs([path])
    assert _docs([path], decode_errors="replace") == [["good line", "second \ufffd\ufffd line"]]


def test_missing_inputs_are_reported(tmp_path):
    with pytest.raises(InputError, match="matches no file"):
        expand_input_patterns(str(tmp_path / "nothing*.txt"))
    (tmp_path / "b.txt").write_text("x")
    (tmp_path / "a.txt").write_text("y")
    assert expand_input_patterns(f"{tmp_path}/*.txt, {tmp_path}/a.txt") == [
        str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), str(tmp_path / "a.txt")]
    with pytest.raises(InputError, match="cannot open input file"):
        list(iter_lines(str(tmp_path)))


def test_gutenberg_header_and_footer_are_stripped(tmp_path):
    lines = ["The Project Gutenberg EBook of X", "", "*** START OF THIS PROJECT GUTENBERG EBOOK",
             "X ***", "", "Real text here.", "", "More text.",
             "End of the Project Gutenberg EBook of X", "licence text"]
    got = [line for _, line in strip_gutenberg(iter(enumerate(lines, 1)))]
    assert got == ["", "Real text here.", "", "More text."]
    # Older files end with "End of Project Gutenberg's <title>, by <author>".
    older = lines[:8] + ["End of Project Gutenberg's X, by Y", "licence text"]
    assert [l for _, l in strip_gutenberg(iter(enumerate(older, 1)))] == got
    no_marker = ["plain", "text"]
    assert [l for _, l in strip_gutenberg(iter(enumerate(no_marker, 1)))] == no_marker
    path = tmp_path / "pg.txt"
    path.write_text("\n".join(lines) + "\n")
    assert _docs([path], input_format="raw") == [["real text here.", "more text."]]
    assert _docs([path], input_format="raw", strip_gutenberg=False)[0][0] == (
        "the project gutenberg ebook of x")


def test_raw_format_joins_paragraph_lines_and_splits_sentences(tmp_path):
    path = tmp_path / "raw.txt"
    path.write_text("Mr. Smith came\nhome. He sat down!\n\n\"Why?\" she asked. It was 5 p.m. Then\n"
                    "dinner.\n")
    assert _docs([path], input_format="raw") == [[
        "mr. smith came home.", "he sat down!", "\"why?\" she asked.",
        "it was 5 p.m. then dinner."]]


@pytest.mark.parametrize("paragraph, expected", [
    ("One. Two! Three? four.", ["One.", "Two!", "Three? four."]),
    ("Dr. J. S. Bach wrote e.g. fugues. Yes.", ["Dr. J. S. Bach wrote e.g. fugues.", "Yes."]),
    ("He said \"Stop.\" Then left.", ["He said \"Stop.\"", "Then left."]),
    ("Chapter 1. 2 men.", ["Chapter 1.", "2 men."]),
    ("   ", []),
])
def test_split_sentences(paragraph, expected):
    assert split_sentences(paragraph) == expected


def test_shared_corpus_reads_without_gutenberg_boilerplate(shared_data):
    files = sorted((shared_data / "corpus" / "gutenberg").glob("*.txt"))
    docs = list(iter_documents([str(f) for f in files], ReaderOptions(input_format="raw")))
    assert len(docs) == len(files) == 13
    text = " ".join(s for d in docs for s in d.sentences)
    assert "project gutenberg-tm" not in text
    assert "*** start of" not in text and "*** end of" not in text
    botchan = next(d for d in docs if d.source.endswith("pg8868_botchan.txt"))
    assert not botchan.sentences[0].startswith("\ufeff")
