"""Issue 44: every book of a concatenated Gutenberg file is kept, dropped input is
accounted for, and long documents stream in bounded pieces."""
import pytest

from data_prep.text_input import ReaderOptions, iter_documents, strip_gutenberg

BOOKS = ("pg20170.txt", "pg11563.txt", "pg20249.txt")  # small, plain UTF-8 without BOM


def _docs(paths, **kwargs):
    return [list(d.sentences) for d in iter_documents([str(p) for p in paths],
                                                      ReaderOptions(**kwargs))]


@pytest.fixture(scope="module")
def book_paths(shared_data):
    return [shared_data / "corpus" / "gutenberg" / name for name in BOOKS]


@pytest.fixture()
def concatenated(tmp_path, book_paths):
    path = tmp_path / "three_books.txt"
    path.write_bytes(b"".join(p.read_bytes() for p in book_paths))
    return path


@pytest.mark.parametrize("input_format", ["raw", "sentences"])
def test_every_book_of_a_concatenated_file_is_kept(concatenated, book_paths, input_format):
    """Each book's body reads exactly as the book alone does; a book ends a document."""
    alone = [doc for path in book_paths for doc in _docs([path], input_format=input_format)]
    together = _docs([concatenated], input_format=input_format)
    assert together == alone
    if input_format == "raw":
        assert len(together) == len(BOOKS)
    text = " ".join(s for d in together for s in d)
    for boilerplate in ("project gutenberg-tm", "*** start of", "*** end of",
                        "end of the project gutenberg"):
        assert boilerplate not in text


def test_hand_made_books_keep_exactly_their_bodies():
    lines = ["The Project Gutenberg EBook of A", "*** START OF THIS PROJECT GUTENBERG EBOOK A ***",
             "Body of A.", "", "More A.", "End of the Project Gutenberg EBook of A",
             "*** END OF THIS PROJECT GUTENBERG EBOOK A ***", "licence of A",
             "The Project Gutenberg EBook of B", "***START OF THE PROJECT GUTENBERG EBOOK B",
             "TITLE B***", "Body of B.", "***END OF THE PROJECT GUTENBERG EBOOK B***", "licence B"]
    kept = [line for _, line in strip_gutenberg(iter(enumerate(lines, 1)))]
    assert kept == ["Body of A.", "", "More A.", "Body of B."]
    no_marker = ["plain", "", "text"]
    assert [line for _, line in strip_gutenberg(iter(enumerate(no_marker, 1)))] == no_marker


def test_file_without_markers_is_kept_whole(tmp_path):
    path = tmp_path / "plain.txt"
    paragraphs = [f"Paragraph {i} says something. It ends here." for i in range(500)]
    path.write_text("\n\n".join(paragraphs) + "\n")
    docs = _docs([path], input_format="raw")
    assert docs == [[s.lower() for p in paragraphs for s in (p[:-14], p[-13:])]]


def _hand_made_input():
    """(bytes, reason) lines: two books with headers, licence, an invalid UTF-8 line and a
    book whose text normalises to nothing (an empty document)."""
    body = [(f"Sentence {i} of the body of book A is here.\n".encode(), "kept")
            for i in range(40)]
    return ([(b"The Project Gutenberg EBook of A\r\n", "gutenberg"),
             (b"*** START OF THIS PROJECT GUTENBERG EBOOK A ***\r\n", "gutenberg")]
            + body
            + [(b"\n", "blank"),
               (b"A line with \xff bad byte.\n", "kept"),
               (b"   \t\n", "blank"),
               (b"*** END OF THIS PROJECT GUTENBERG EBOOK A ***\n", "gutenberg"),
               (b"licence text\n", "gutenberg"),
               (b"*** START OF THIS PROJECT GUTENBERG EBOOK B ***\n", "gutenberg"),
               ("\u0301\u0301\n".encode(), "empty_after_normalisation"),
               (b"*** END OF THIS PROJECT GUTENBERG EBOOK B ***\n", "gutenberg"),
               (b"trailing licence", "gutenberg")])


def _expected_accounting(lines):
    def total(reason):
        chosen = [data for data, r in lines if r == reason]
        return {"lines": len(chosen), "bytes": sum(len(d) for d in chosen)}
    size = sum(len(d) for d, _ in lines)
    kept = total("kept")
    return {"bytes": size, "lines": len(lines),
            "kept": dict(kept, fraction_of_bytes=kept["bytes"] / size),
            "dropped": {r: total(r) for r in ("gutenberg", "blank",
                                              "empty_after_normalisation")},
            "invalid_utf8_replaced": {"lines": 1, "bytes": len(b"A line with \xff bad byte.\n")},
            "gutenberg_books": 2, "documents_split_at_block_chars": 0,
            "sentences_dropped": {"empty_after_normalisation": 1, "no_tokens": 0},
            "documents_dropped": {"empty_after_normalisation": 1, "no_tokens": 0}}


def test_dropped_input_is_accounted_exactly_in_log_and_summary(tmp_path, spm_model):
    from data_prep import runner
    lines = _hand_made_input()
    path = tmp_path / "books.txt"
    path.write_bytes(b"".join(data for data, _ in lines))
    messages = []
    options = _run_options(spm_model, ReaderOptions(input_format="raw", decode_errors="replace"))
    summary = runner.create_pretraining_data([str(path)], [str(tmp_path / "out.tfrecord")],
                                             options, log=messages.append)
    expected = _expected_accounting(lines)
    assert summary["input"] == expected
    on_disk = (tmp_path / "out.summary.json").read_text()
    assert '"input"' in on_disk and f'"bytes": {expected["bytes"]}' in on_disk
    log = "\n".join(messages)
    kept = expected["kept"]["bytes"]
    assert f"input: kept {kept:,} of {expected['bytes']:,} bytes" in log
    gutenberg = expected["dropped"]["gutenberg"]
    assert (f"dropped {gutenberg['bytes']:,} bytes ({gutenberg['lines']:,} lines) of Project "
            "Gutenberg header/footer/licence text") in log
    replaced = expected["invalid_utf8_replaced"]["bytes"]
    assert (f"input: 1 lines ({replaced} bytes) with invalid UTF-8 kept with U+FFFD "
            "(--decode_errors=replace; strict stops at the first)") in log
    assert "0 sentences and 0 documents with no token" in log  # zero counts are printed too


def test_sentences_format_accounting_adds_up(tmp_path):
    from data_prep.text_input import ReadCounts
    data = "One.\nTwo.\n\n\u0301\n   \nThree.\n".encode()
    path = tmp_path / "s.txt"
    path.write_bytes(data)
    counts = ReadCounts()
    docs = list(iter_documents([str(path)], ReaderOptions(), counts=counts))
    assert [d.sentences for d in docs] == [("one.", "two."), ("three.",)]
    assert counts.bytes_in == len(data) and counts.lines_in == 6
    assert (counts.kept_lines, counts.kept_bytes) == (3, len("One.\nTwo.\nThree.\n"))
    assert counts.dropped == {"gutenberg": [0, 0], "blank": [2, 5],
                              "empty_after_normalisation": [1, 3]}


def _run_options(spm_model, reader, **layout):
    from data_prep import pipeline, runner
    from data_prep.masking import MaskingOptions
    return runner.RunOptions(
        spm_model_file=spm_model, reader=reader,
        instances=pipeline.InstanceOptions(max_seq_length=64, dupe_factor=2,
                                           masking=MaskingOptions(max_predictions_per_seq=10)),
        layout=pipeline.LayoutOptions(**layout))


def _paragraphs(count):
    return [" ".join(f"Paragraph {p} sentence {s} has some words in it." for s in range(p % 5 + 1))
            for p in range(count)]


def test_long_raw_document_is_cut_at_paragraph_ends_in_bounded_pieces(tmp_path):
    from data_prep.text_input import ReadCounts
    paragraphs = _paragraphs(120)
    path = tmp_path / "long.txt"
    path.write_text("\n\n".join(p[:30] + "\n" + p[30:] for p in paragraphs) + "\n")
    whole = _docs([path], input_format="raw")
    assert len(whole) == 1
    limit = 1000
    counts = ReadCounts()
    pieces = [list(d.sentences) for d in iter_documents(
        [str(path)], ReaderOptions(input_format="raw"), counts=counts, split_chars=limit)]
    assert len(pieces) > 5 and counts.split_documents == len(pieces) - 1
    assert [s for piece in pieces for s in piece] == whole[0]  # same sentences, same order
    paragraph_ends = {_docs([_write(tmp_path, p)], input_format="raw")[0][-1] for p in paragraphs}
    longest = max(len(p) for p in paragraphs)
    for piece in pieces:
        assert piece[-1] in paragraph_ends  # cut only where a paragraph ends
        assert sum(len(s) for s in piece) <= limit + longest
    for piece in pieces[:-1]:
        assert sum(len(s) for s in piece) >= limit


def _write(tmp_path, text, name="one.txt"):
    path = tmp_path / name
    path.write_text(text + "\n")
    return path


def test_a_paragraph_without_blank_lines_is_cut_at_a_line(tmp_path):
    """A file with no blank line at all (one endless paragraph) still streams in pieces."""
    lines = [f"Line {i} is one sentence." for i in range(300)]
    path = _write(tmp_path, "\n".join(lines), "endless.txt")
    limit = 500
    pieces = [d.sentences for d in iter_documents(
        [str(path)], ReaderOptions(input_format="raw"), split_chars=limit)]
    assert [s for p in pieces for s in p] == [line.lower() for line in lines]
    assert max(sum(len(s) for s in p) for p in pieces) <= limit + max(len(x) for x in lines)
    sentence_pieces = [d.sentences for d in iter_documents(
        [str(path)], ReaderOptions(), split_chars=limit)]
    assert [s for p in sentence_pieces for s in p] == [line.lower() for line in lines]
    assert max(sum(len(s) for s in p) for p in sentence_pieces) <= limit + 30


def test_multi_block_raw_file_same_output_for_any_worker_count(tmp_path, spm_model, shared_data):
    from data_prep import runner
    book = shared_data / "corpus" / "gutenberg" / "pg20170.txt"
    outputs = {}
    for workers in (1, 2):
        options = _run_options(spm_model, ReaderOptions(input_format="raw"),
                               block_chars=10_000, task_tokens=3_000)
        options = runner.RunOptions(**{**options.__dict__, "num_workers": workers})
        out = tmp_path / f"w{workers}" / "out@2"
        summary = runner.create_pretraining_data(
            [str(book)], runner.expand_output_spec(str(out)), options, log=lambda m: None)
        assert summary["input"]["documents_split_at_block_chars"] >= 3
        files = sorted((tmp_path / f"w{workers}").glob("out-*"))
        outputs[workers] = ([f.read_bytes() for f in files], summary["input"],
                            summary["documents"])
    assert outputs[1] == outputs[2]


def test_chunked_tokenizing_and_encoding_change_no_byte(tmp_path, spm_model, shared_data,
                                                        monkeypatch):
    """The memory-saving chunks (sentences per tokenizer call, instances per feature batch)
    give the same records as one chunk per block and task."""
    from data_prep import pipeline, runner
    book = shared_data / "corpus" / "gutenberg" / "pg20249.txt"
    options = _run_options(spm_model, ReaderOptions(input_format="raw"), block_chars=30_000)
    outputs = []
    for sentences, instances in ((1 << 30, 1 << 30), (7, 5)):
        monkeypatch.setattr(pipeline, "_ENCODE_CHUNK", sentences)
        monkeypatch.setattr(pipeline, "_ENCODE_INSTANCES", instances)
        out = tmp_path / f"out-{sentences}.tfrecord"
        runner.create_pretraining_data([str(book)], [str(out)], options, log=lambda m: None)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and len(outputs[0]) > 0
