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
