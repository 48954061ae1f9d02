"""WordPiece (the Chinese checkpoints' tokenizer): Python and in-graph ids against a reference.

The reference (`tests/helpers/wordpiece_reference.py`) is written from the original's
rules with no shared code; `WordPieceTokenizer` and `InGraphWordPieceTokenizer`
must give its ids on every line of the shared Chinese data, mixed and
full-width text, and the English GLUE text.
"""
import json
import os
import subprocess
import sys

import pytest

from albert_tf import tokenization
from tests.helpers import wordpiece_reference as reference

MIXED = [
    "中国的首都是北京。Hello, WORLD! naïve café ＡＢＣ１２３ 123,456 unaffable",
    "“你好”，他说：「ALBERT 模型」（2019年）……是不是？！",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ｓｐａｃｅ　and ideographic　space, tab\there\r\nnew line",
    "zero\u200bwidth\u200djoiner\ufeffbom \ufffd replacement \x00 nul \x07 bell",
    "ÀÉÎÕÜ Ångström İstanbul ß Σίσυφος Ωμέγα ﬁ ligature Ⅻ ① ㈱",
    "emoji 😀👍🏽 and 𠀀𪜀 (CJK extension B/C) 丽 (compatibility) ぁアｱ 한국어",
    "#hashtag @user http://example.com/a_b?c=d&e=f 3.14 -5% $10 ¥20 €30 £40",
    "a" * 200, "b" * 201, "长" * 250, "x" * 199 + "é" * 2,
    "", "   ", "\n\t", "[MASK] [CLS] [SEP] [UNK]",
]


@pytest.fixture(scope="module")
def vocab_path(chinese_vocab_file):
    return chinese_vocab_file


@pytest.fixture(scope="module")
def tokenizer(vocab_path):
    return tokenization.FullTokenizer(vocab_file=vocab_path)


@pytest.fixture(scope="module")
def reference_vocab(vocab_path):
    return reference.read_vocab(vocab_path)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def chinese_lines(shared_data):
    """Every text of the shared Chinese data: JSON string values, TSV and corpus lines."""
    root = shared_data / "chinese"
    lines = []
    for path in sorted(root.rglob("*.json")):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        try:
            documents = [json.loads(text)]
        except json.JSONDecodeError:  # JSON lines
            # split("\n"), not splitlines(): CLUE texts contain U+2028 and similar.
            documents = [json.loads(line) for line in text.split("\n") if line.strip()]
        lines.extend(s for document in documents for s in _strings(document))
    for path in sorted(root.rglob("*.txt")):
        if path.parent.name == "vocab":
            continue
        with open(path, encoding="utf-8") as handle:
            lines.extend(handle.read().splitlines())
    return lines


def glue_lines(shared_data):
    lines = []
    for path in sorted((shared_data / "glue").rglob("*.tsv")):
        with open(path, encoding="utf-8-sig") as handle:
            lines.extend(handle.read().splitlines())
    return lines


def test_known_tokens(tokenizer):
    assert tokenizer.kind == "wordpiece" and tokenizer.vocab_size == 21128
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id,
            tokenizer.mask_id) == (0, 100, 101, 102, 103)
    assert tokenizer.tokenize("中国的首都是北京。Naïve UNAFFABLE!") == [
        "中", "国", "的", "首", "都", "是", "北", "京", "。", "na", "##ive", "u", "##na",
        "##ff", "##able", "!"]
    assert tokenizer.preprocess(" A  b ") == " A  b "
    assert tokenizer.token_text("##able") == "able" and tokenizer.token_text("##") == "##"
    starts = tokenizer.is_start_piece_table()
    assert starts[tokenizer.vocab["中"]] and not starts[tokenizer.vocab["##able"]]


def test_mixed_text_matches_reference(tokenizer, reference_vocab):
    for text in MIXED:
        for lower in (True, False):
            tokenizer.do_lower_case = lower
            try:
                assert tokenizer.tokenize(text) == reference.wordpiece_tokens(
                    text, reference_vocab, lower), text
            finally:
                tokenizer.do_lower_case = True


def test_word_length_limit_is_the_originals_200_characters(tokenizer):
    pieces = tokenizer.tokenize("a" * 200)
    assert "[UNK]" not in pieces and "".join(tokenizer.token_text(p) for p in pieces) == "a" * 200
    assert tokenizer.tokenize("a" * 201) == ["[UNK]"]


@pytest.mark.slow  # 11 s
def test_all_shared_chinese_and_glue_text_matches_reference(tokenizer, reference_vocab,
                                                            shared_data):
    lines = chinese_lines(shared_data) + glue_lines(shared_data)
    assert len(lines) > 20000
    ours = tokenizer.encode_ids(lines)
    mismatches = [line for line, ids in zip(lines, ours)
                  if ids != reference.wordpiece_ids(line, reference_vocab)]
    assert not mismatches, mismatches[:3]


@pytest.fixture(scope="module")
def graph_tokenizer(vocab_path):
    return tokenization.in_graph_tokenizer(vocab_file=vocab_path)


def _graph_ids(graph_tokenizer, lines, batch=4096):
    import tensorflow as tf

    ids = []
    for start in range(0, len(lines), batch):
        ids.extend(graph_tokenizer(tf.constant(lines[start:start + batch])).to_list())
    return ids


@pytest.mark.slow  # 7 s
def test_in_graph_ids_equal_python_on_all_shared_text(graph_tokenizer, tokenizer, shared_data):
    lines = MIXED + chinese_lines(shared_data) + glue_lines(shared_data)
    python = tokenizer.encode_ids(lines)
    graph = _graph_ids(graph_tokenizer, lines)
    mismatches = [(line, p, g) for line, p, g in zip(lines, python, graph) if p != g]
    assert not mismatches, mismatches[:3]
    assert (graph_tokenizer.cls_id, graph_tokenizer.vocab_size) == (101, 21128)


def test_in_graph_cased_and_inside_tf_function(vocab_path):
    import tensorflow as tf

    cased = tokenization.in_graph_tokenizer(vocab_file=vocab_path, do_lower_case=False)
    python = tokenization.FullTokenizer(vocab_file=vocab_path, do_lower_case=False)
    encode = tf.function(lambda texts: cased(texts).to_tensor(-1))
    got = encode(tf.constant(MIXED)).numpy().tolist()
    want = python.encode_ids(MIXED)
    assert [[i for i in row if i != -1] for row in got] == want


@pytest.mark.slow  # 5 s
def test_in_graph_tokenizer_in_a_saved_model_loaded_without_albert_tf(vocab_path, tokenizer,
                                                                      tmp_path):
    import tensorflow as tf

    module = tokenization.in_graph_tokenizer(vocab_file=vocab_path)
    module.encode = tf.function(lambda texts: module(texts).to_tensor(-1),
                                input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "tok"))
    script = ("import json, sys, tensorflow as tf, tensorflow_text\n"
              "m = tf.saved_model.load(sys.argv[1])\n"
              "print(json.dumps(m.encode(tf.constant(json.loads(sys.argv[2]))).numpy().tolist()))")
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "tok"),
                             json.dumps(MIXED[:3])], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=""), cwd=tmp_path, check=True)
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    assert [[i for i in row if i != -1] for row in rows] == tokenizer.encode_ids(MIXED[:3])


def test_vocabulary_rules_duplicates_and_empty_lines(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello extra\nhello\n\nwor\n##ld\n",
                    encoding="utf-8")
    tok = tokenization.FullTokenizer(vocab_file=str(path))
    assert tok.vocab == reference.read_vocab(str(path))
    assert tok.vocab["wor"] == 7 and tok.vocab[" "] == 6 and tok.vocab_size == 9
    assert tok.encode_ids(["Hello WORLD x"]) == [[5, 7, 8, 1]]


def test_missing_special_tokens_are_named(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[SEP]\nhello\n", encoding="utf-8")
    with pytest.raises(tokenization.TokenizerError, match=r"vocab\.txt: the vocabulary has no "
                       r"\[CLS\], \[MASK\]"):
        tokenization.FullTokenizer(vocab_file=str(path))


def test_bad_vocabulary_files(tmp_path):
    with pytest.raises(tokenization.TokenizerError, match="is a directory"):
        tokenization.load_tokenizer(vocab_file=str(tmp_path))
    with pytest.raises(tokenization.TokenizerError, match=r"--vocab_file=.*nope.txt: no such file"):
        tokenization.load_tokenizer(vocab_file=str(tmp_path / "nope.txt"))
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"[CLS]\n\xff\xfe\x00garbage\n")
    with pytest.raises(tokenization.TokenizerError, match=r"--vocab_file: .*model.bin:2: not UTF-8"):
        tokenization.load_tokenizer(vocab_file=str(binary))
    with pytest.raises(tokenization.TokenizerError, match="--spm_model_file.*--vocab_file"):
        tokenization.load_tokenizer()


def test_full_tokenizer_chooses_like_the_original(vocab_path, shared_data):
    spm = shared_data / "spm_official" / "30k-clean.model"
    if not spm.exists():
        pytest.skip(f"{spm} not found")
    both = tokenization.FullTokenizer(vocab_file=vocab_path, spm_model_file=str(spm))
    assert both.kind == "sentencepiece" and both.vocab_size == 30000
    assert isinstance(both, tokenization.Tokenizer)
    # English did not move: the SentencePiece path gives the ids it gave before.
    assert both.encode_ids([both.preprocess("Hello World!")]) == \
        tokenization.SentencePieceTokenizer(str(spm)).encode_ids(["hello world!"])
    assert both.token_text("\u2581hello") == "hello"
    wordpiece = tokenization.load_tokenizer(vocab_file=vocab_path)
    assert wordpiece.kind == "wordpiece"
    assert tokenization.vocabulary_fingerprint(wordpiece).startswith("wordpiece:")
    assert tokenization.vocabulary_fingerprint(both) != tokenization.vocabulary_fingerprint(
        wordpiece)


def test_character_tables_equal_the_rules_on_every_code_point():
    """`BasicTokenizerTables` against the rule functions, for all of Unicode."""
    import unicodedata

    classes = tokenization.BasicTokenizerTables.get()
    for cp in range(0x110000):
        char = chr(cp)
        if tokenization.is_wordpiece_control(char):
            want = None
        elif tokenization.is_wordpiece_whitespace(char):
            want = " "
        elif tokenization.is_cjk_char(cp):
            want = f" {char} "
        else:
            want = char
        assert classes.clean.get(cp, char) == want, hex(cp)
        assert (cp in classes.marks) == (unicodedata.category(char) == "Mn"), hex(cp)
    assert classes.punctuation_codes == [cp for cp in range(0x110000)
                                         if tokenization.is_wordpiece_punctuation(chr(cp))]
