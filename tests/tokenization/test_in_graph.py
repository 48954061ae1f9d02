"""tokenization.InGraphTokenizer: the Python tokenizer's exact ids, as TensorFlow ops."""
import csv

import pytest
import tensorflow as tf

from albert_tf import tokenization as tok

# Hand-made strings exercising each normalisation step.
TRICKY = [
    "", " ", "  a \t b\n\n c  ", "a\u00a0\u2003b\u3000c", "\x1ca\x1fb\x85c\u2028d",
    "Caf\u00e9 \u00c5ngstr\u00f6m", "e\u0301", "\ufb01ne \u00bd", "a \u00a8 b",
    "\u0130stanbul", "\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3",  # dotted I, final sigma
    "in 116, he", "page 3, line", "16,000 men", "x3, y", "1999, 2000,",
    "``quoted'' text", "caf\u00e9 \u00f1 \u4e2d\u6587 \U0001f600", "www.gutenberg.org",
    "\u1100\u1161\u11a8 \u00e5\u0328",  # conjoining jamo, stacked marks
]


@pytest.fixture(scope="module")
def spm_path(shared_data):
    path = shared_data / "spm" / "albert_style_pd8k.model"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return str(path)


@pytest.fixture(scope="module")
def python_tokenizer(spm_path):
    return tok.SentencePieceTokenizer(spm_path, do_lower_case=True)


@pytest.fixture(scope="module")
def graph_tokenizer(spm_path):
    return tok.InGraphTokenizer(spm_path, do_lower_case=True)


def expected_ids(python_tokenizer, texts):
    return python_tokenizer.encode_ids([python_tokenizer.preprocess(t) for t in texts])


def corpus_and_glue_lines(shared_data):
    lines = []
    for path in sorted((shared_data / "corpus").rglob("*.txt")):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    glue = shared_data / "glue"
    with open(glue / "SST-2" / "dev.tsv", encoding="utf-8") as handle:
        lines += [row[0] for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
    for split in ("train", "dev"):
        with open(glue / "CoLA" / f"{split}.tsv", encoding="utf-8") as handle:
            lines += [row[3] for row in csv.reader(handle, delimiter="\t",
                                                   quoting=csv.QUOTE_NONE)]
    return lines


def test_in_graph_names_resolve_lazily_to_the_in_graph_module():
    from albert_tf.tokenization import in_graph

    for name in ("InGraphTokenizer", "InGraphWordPieceTokenizer", "in_graph_tokenizer"):
        assert getattr(tok, name) is getattr(in_graph, name)
    assert "InGraphTokenizer" in dir(tok)
    with pytest.raises(AttributeError):
        tok.NoSuchName  # noqa: B018


def test_regex_class_ranges():
    assert tok.regex_class([1, 2, 3, 5, 0x300]) == "[\\x{1}-\\x{3}\\x{5}\\x{300}]"
    assert " " in tok.whitespace_regex() or "\\x{20}" in tok.whitespace_regex()


@pytest.mark.parametrize("lower", [True, False])
def test_preprocess_matches_python(spm_path, lower):
    graph = tok.InGraphTokenizer(spm_path, do_lower_case=lower)
    got = [s.decode("utf-8") for s in graph.preprocess(tf.constant(TRICKY)).numpy()]
    assert got == [tok.preprocess_text(t, lower=lower) for t in TRICKY]


def test_hand_computed_ids(graph_tokenizer):
    # "116," -> "▁1" + "16," in SentencePiece; the original splits "16," into
    # "16" (not in this vocabulary: <unk> = 1) and "," (14).
    got = graph_tokenizer(tf.constant(["In  116, he", "  "])).to_list()
    assert got == [[21, 211, 1, 14, 28], []]
    assert (graph_tokenizer.pad_id, graph_tokenizer.unk_id, graph_tokenizer.cls_id,
            graph_tokenizer.sep_id, graph_tokenizer.mask_id, graph_tokenizer.vocab_size) == (
                0, 1, 2, 3, 4, 8000)


def test_tricky_strings_match_python(graph_tokenizer, python_tokenizer):
    assert graph_tokenizer(tf.constant(TRICKY)).to_list() == expected_ids(python_tokenizer,
                                                                          TRICKY)


def test_identical_ids_on_corpus_sst2_and_cola(graph_tokenizer, python_tokenizer, shared_data):
    lines = corpus_and_glue_lines(shared_data)
    assert len(lines) > 90000
    want = expected_ids(python_tokenizer, lines)
    got = graph_tokenizer(tf.constant(lines)).to_list()
    mismatches = [line for line, a, b in zip(lines, want, got) if a != b]
    # No known mismatch remains (tensorflow-text's older SentencepieceTokenizer
    # had 110 here, all exact-score ties like "www"); keep the count visible.
    assert len(mismatches) == 0, mismatches[:5]


def test_inside_tf_function_and_dataset(graph_tokenizer, python_tokenizer):
    texts = ["The cat sat.", "Caf\u00e9 1999, ok", ""]
    want = expected_ids(python_tokenizer, texts)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(batch):
        return graph_tokenizer(batch)

    assert encode(tf.constant(texts)).to_list() == want
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(graph_tokenizer)
    assert [row for batch in dataset for row in batch.to_list()] == want


def test_model_proto_and_argument_errors(spm_path):
    with open(spm_path, "rb") as handle:
        proto = handle.read()
    from_proto = tok.InGraphTokenizer(model_proto=proto, do_lower_case=False)
    assert from_proto(tf.constant(["ABC"])).to_list() == \
        tok.InGraphTokenizer(spm_path, do_lower_case=False)(tf.constant(["ABC"])).to_list()
    with pytest.raises(ValueError, match="exactly one of spm_model_file and model_proto"):
        tok.InGraphTokenizer()
    with pytest.raises(ValueError, match="exactly one"):
        tok.InGraphTokenizer(spm_path, model_proto=proto)
