"""albert_tf.tokenization: the original's preprocess_text, piece rules and ids."""
import subprocess
import sys

import pytest

from data_prep import tokenization as tok
from tests.conftest import REPO_ROOT

# Every public name the module had before it became a package (the in-graph ones need TF).
TENSORFLOW_FREE_NAMES = (
    "SPIECE_UNDERLINE", "PAD_PIECE", "UNK_PIECE", "CLS_PIECE", "SEP_PIECE", "MASK_PIECE",
    "strip_accents", "preprocess_text", "TokenizerError", "Tokenizer", "SentencePieceTokenizer",
    "is_start_piece_sp", "WORDPIECE_PREFIX", "UNK_TOKEN", "PAD_TOKEN",
    "MAX_INPUT_CHARS_PER_WORD", "CJK_RANGES", "is_cjk_char", "is_wordpiece_punctuation",
    "is_wordpiece_control", "is_wordpiece_whitespace", "load_vocab", "normalize_word",
    "WordPieceTokenizer", "FullTokenizer", "load_tokenizer", "is_sentencepiece_model",
    "vocabulary_fingerprint", "whitespace_regex", "combining_regex", "digit_comma_expansions",
    "wordpiece_regexes")


def test_import_keeps_every_name_and_does_not_load_tensorflow():
    """The package's facade has the old module's names; the in-graph ones load TF on first use."""
    code = ("import sys\n"
            "import albert_tf.tokenization as tok\n"
            f"missing = [n for n in {TENSORFLOW_FREE_NAMES!r} if not hasattr(tok, n)]\n"
            "assert not missing, missing\n"
            "assert 'tensorflow' not in sys.modules, 'import albert_tf.tokenization loaded TF'\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def tokenizer(shared_data):
    path = shared_data / "spm" / "albert_style_pd8k.model"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return tok.SentencePieceTokenizer(str(path), do_lower_case=True)


@pytest.mark.parametrize("text, kwargs, expected", [
    ("  a \t b\n\n c  ", {}, "a b c"),
    ("Caf\u00e9 \u00c5ngstr\u00f6m", {}, "Cafe Angstrom"),           # NFKD + drop combining
    ("Caf\u00e9", {"lower": True}, "cafe"),
    ("\ufb01ne \u00bd", {}, "fine 1\u20442"),                       # NFKD compatibility forms
    ("a\u00a0\u2003b", {}, "a b"),                                  # Unicode spaces collapse
    ("``quoted'' text", {}, "``quoted'' text"),                     # ALBERT keeps `` and ''
    ("``quoted'' text", {"replace_quotes": True}, '"quoted" text'),  # XLNet/HF behaviour
    ("Caf\u00e9", {"keep_accents": True}, "Caf\u00e9"),
    ("  a  b ", {"remove_space": False}, "  a  b "),
    ("e\u0301", {}, "e"),                                            # decomposed accent
])
def test_preprocess_text(text, kwargs, expected):
    assert tok.preprocess_text(text, **kwargs) == expected


def test_special_ids_and_vocab(tokenizer):
    assert tokenizer.vocab_size == 8000
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
            tokenizer.mask_id) == (0, 1, 2, 3, 4)
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == [
        "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert tokenizer.vocab["[MASK]"] == 4 and len(tokenizer.vocab) == 8000


def test_digit_comma_pieces_are_split_as_in_the_original(tokenizer):
    sp = tokenizer.sp_model
    # SentencePiece alone yields the pieces "3," and "16,".
    assert sp.EncodeAsPieces("page 3, line") == ["\u2581page", "\u2581", "3,", "\u2581line"]
    assert tokenizer.tokenize("page 3, line") == ["\u2581page", "\u2581", "3", ",", "\u2581line"]
    # "16," -> re-encode "16" = ["▁16"]; the piece had no "▁", so it is stripped to "16",
    # which is not in this vocabulary (-> <unk>, as the original produces).
    assert sp.EncodeAsPieces("in 116, he") == ["\u2581in", "\u25811", "16,", "\u2581he"]
    assert tokenizer.tokenize("in 116, he") == ["\u2581in", "\u25811", "16", ",", "\u2581he"]
    assert tokenizer.encode_ids(["in 116, he"]) == [[21, 211, 1, 14, 28]]
    # A comma piece not preceded by a digit is left alone.
    assert tokenizer.tokenize("16,000 men") == ["\u258116", ",000", "\u2581men"]


def test_batch_encode_equals_piece_path_on_corpus(tokenizer, shared_data):
    from data_prep.text_input import ReaderOptions, iter_documents
    files = sorted(str(p) for p in (shared_data / "corpus" / "gutenberg").glob("pg1*.txt"))[:3]
    sentences = [s for d in iter_documents(files, ReaderOptions(input_format="raw"))
                 for s in d.sentences]
    sentences += ["in 116, he", "x3, y", "caf\u00e9 \u00f1 \u4e2d\u6587 \U0001f600", ""]
    assert len(sentences) > 5000
    fast = tokenizer.encode_ids(sentences, num_threads=2)
    slow = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in sentences]
    assert fast == slow


@pytest.mark.parametrize("piece, expected", [
    ("\u2581the", True), ("the", False), ("s", False), ("<unk>", True), (",", True),
    ("-", True), ("12", True), ("3,", True), ("\u00f1", True), ("ab-c", False),
    ("\u20ac", True), ("The", False), ("\u2581", True),
])
def test_is_start_piece_sp(piece, expected):
    assert tok.is_start_piece_sp(piece) is expected
