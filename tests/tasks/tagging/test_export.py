"""Tagging (NER) exports: the raw-text SavedModel finds exactly the entities of the Python
prediction path (split_words -> features.convert -> model -> merge_predictions ->
schemes.entities -> character spans), loaded where only TensorFlow and tensorflow-text are
imported, and its serve_words signature the tags and entities of the Python path of
pre-split (CoNLL-style) words; its graph pieces (word split, windows, max context, chunks)
equal the Python functions; ONNX gives the same logits and predictions, and
decode_onnx_logits the model's tags."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, tokenization
from albert_tf.export import onnx as onnx_export, portable
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.tasks.tagging import export as tagging_export
from albert_tf.tasks.tagging import features, readers, schemes
from tests import conftest

TYPES = {"english": ["LOC", "MISC", "ORG", "PER"],
         "chinese": ["address", "company", "name", "organization"]}
TRICKY = ["", "   ", "x", "\t New\u00a0York\u3000(NY) \u2028 , 1,000,000 dollars!!",
          "Caf\u00e9 au lait, na\u00efve r\u00e9sum\u00e9 \u2014 \u201cquoted\u201d e.g. U.S.A.",
          "emoji \U0001F600 and \U0001F9D1\u200d\U0001F4BB in text; ＡＢＣ full-width",
          "上海 Shanghai：浙商银行 CSOL《变形金刚》\u3000北京  é\u0301 \x1c\x85 end",
          "words \u0301 without \u200b sub-tokens \u200b\u200b: \ufeff ok"]


def label_list(kind, scheme):
    return schemes.labels_from([[f"B-{t}" for t in TYPES[kind]]], scheme)


def ner_file(shared_data, path):
    full = shared_data / "ner" / path
    if not full.exists():
        pytest.skip(f"{full} not found (the NER samples)")
    return str(full)


def english_texts(shared_data, count=24):
    sentences = readers.read_conll2003(ner_file(shared_data, "conll2003/eng.train"))
    texts = [" ".join(s.words) for s in sentences if len(s.words) > 4][:count]
    return texts + ["Pneumonoultramicroscopicsilicovolcanoconiosis is long. " * 3] + TRICKY


def chinese_texts(shared_data, count=24):
    sentences = readers.read_cluener(ner_file(shared_data, "cluener/train.json"))
    return [s.text for s in sentences[:count]] + TRICKY


# Pre-split sentences beyond the files': a long word, words that are white space (MSRA's
# space characters), empty, without sub-tokens or with punctuation inside, an empty row.
TRICKY_WORDS = [["Pneumonoultramicroscopicsilicovolcanoconiosis"] * 3 + ["is", "long", "."],
                ["New\u00a0York", " ", "", "\u200b", "U.S.A.", "na\u00efve", "1,000,000", "!!"],
                ["\U0001F600", "\u3000", "ＡＢＣ", "上海", "\u0301", "e.g.", "CSOL《变形金刚》"],
                [], ["x"]]


def word_sentences(shared_data, language, count=24):
    """Sentences as lists of words: CoNLL-2003's words (English) or CLUENER's characters
    (Chinese), as the readers give them, and TRICKY_WORDS."""
    if language == "english":
        sentences = readers.read_conll2003(ner_file(shared_data, "conll2003/eng.train"))
        sentences = [s for s in sentences if len(s.words) > 4][:count]
    else:
        sentences = readers.read_cluener(ner_file(shared_data, "cluener/train.json"))[:count]
    return [list(s.words) for s in sentences] + TRICKY_WORDS


# --- the graph pieces against the Python functions ---------------------------------------------


def test_word_split_equals_split_words(shared_data):
    texts = english_texts(shared_data, 200) + chinese_texts(shared_data, 200)
    patterns = tagging_export.word_split_patterns()
    words, begin, end = tagging_export.split_words(tf.constant(texts), patterns)
    for text, got, got_begin, got_end in zip(texts, words.to_list(), begin.to_list(),
                                             end.to_list()):
        offsets = readers.split_words(text)
        assert [w.decode() for w in got] == [text[s:e] for s, e in offsets], text
        assert got_begin == [len(text[:s].encode()) for s, _ in offsets]
        assert got_end == [len(text[:e].encode()) for _, e in offsets]


def test_word_windows_and_max_context_equal_the_python_rules():
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(300):
        num_tokens = int(rng.integers(0, 40))
        starts = sorted({0} | {int(t) for t in np.nonzero(rng.random(num_tokens) < rng.random())[0]}
                        ) if num_tokens else []
        rows.append((num_tokens, starts))
    width = max(n for n, _ in rows)
    is_start = np.zeros((len(rows), width), bool)
    for i, (_, starts) in enumerate(rows):
        is_start[i, starts] = True
    num_tokens = tf.constant([n for n, _ in rows], tf.int32)
    token_row = np.array([i for i, (n, _) in enumerate(rows) for _ in range(n)])
    token = tf.constant([t for n, _ in rows for t in range(n)])
    for max_tokens, stride in ((6, 2), (6, 6), (14, 5), (3, 1)):
        starts, lengths, valid = tagging_export.word_windows(tf.constant(is_start), num_tokens,
                                                             max_tokens, stride)
        best = tagging_export.max_context_window(token, tf.gather(starts, token_row),
                                                 tf.gather(lengths, token_row),
                                                 tf.gather(valid, token_row)).numpy()
        for i, (n, word_starts) in enumerate(rows):
            want = features.word_windows(word_starts, n, max_tokens, stride)
            count = int(valid[i].numpy().sum())
            assert valid[i, :count].numpy().all()
            got = list(zip(starts[i, :count].numpy().tolist(), lengths[i, :count].numpy().tolist()))
            assert got == want, (n, word_starts, max_tokens, stride)
            assert best[token_row == i].tolist() == features.max_context_windows(want, n)
        # The linear search gives the same windows, numbered over all valid windows.
        flat = tagging_export.max_context_flat(tf.constant(token_row, tf.int32), token, starts,
                                               lengths, valid, max_tokens).numpy()
        first = np.cumsum([0] + valid.numpy().sum(axis=1).tolist())[:-1]
        np.testing.assert_array_equal(flat, np.where(best >= 0, first[token_row] + best, -1))
    # Rows without a token: no window at all.
    starts, lengths, valid = tagging_export.word_windows(
        tf.zeros([3, 0], tf.bool), tf.zeros([3], tf.int32), 6, 2)
    assert starts.shape == lengths.shape == valid.shape == (3, 0)


@pytest.mark.parametrize("scheme", ["iob2", "bioes"])
def test_chunks_equal_schemes_entities(scheme):
    labels = label_list("english", scheme)[:7]  # O and two types
    prefixes, type_ids, _ = tagging_export.label_tables(labels)
    rng = np.random.default_rng(1)
    sentences = [rng.integers(0, len(labels), rng.integers(0, 12)).tolist() for _ in range(400)]
    flat = tf.constant([i for s in sentences for i in s], tf.int32)
    lengths = [len(s) for s in sentences]
    first_in_row = np.zeros(len(flat), bool)
    first_in_row[np.cumsum([0] + lengths)[:-1][np.array(lengths) > 0]] = True
    first, entity_id = tagging_export.chunk_words(tf.gather(prefixes, flat),
                                                  tf.gather(type_ids, flat),
                                                  tf.constant(first_in_row))
    ends = tf.math.unsorted_segment_max(tf.range(len(flat)), entity_id, tf.shape(first)[0])
    offset, want = 0, []
    for sentence in sentences:
        want += [(offset + e.start, offset + e.end)
                 for e in schemes.entities([labels[i] for i in sentence])]
        offset += len(sentence)
    assert list(zip(first.numpy().tolist(), (ends.numpy() + 1).tolist())) == want


def test_settings_are_checked():
    with pytest.raises(ValueError, match="no 'O'"):
        tagging_export.check_settings(["B-PER", "I-PER"], "iob2", 16, 4)
    with pytest.raises(ValueError, match="doc_stride"):
        tagging_export.check_settings(["O", "B-PER", "I-PER"], "iob2", 16, 15)
    with pytest.raises(ValueError, match="not a tag of the iob2"):
        tagging_export.check_settings(["O", "S-PER"], "iob2", 16, 4)
    with pytest.raises(ValueError, match="3 labels for a model with 5"):
        tagging_export.check_settings(["O", "B-PER", "I-PER"], "iob2", 16, 4, 5)


# --- the exports -------------------------------------------------------------------------------

# name: (language, tokenizer, use_crf, scheme, max_seq_length, doc_stride)
CASES = {"english_softmax": ("english", "sentencepiece", False, "iob2", 24, 8),
         "english_crf": ("english", "sentencepiece", True, "bioes", 40, 16),
         "chinese_softmax": ("chinese", "wordpiece", False, "bioes", 32, 12),
         "chinese_crf": ("chinese", "wordpiece", True, "iob2", 16, 5)}
# The tests of every case but english_softmax are slow: the default suite's fixture then builds
# english_softmax alone (17 s setup; the Chinese exports alone took it from 30 to 15 s,
# chinese_crf's tests 31 s with the fixture).
CASE_PARAMS = [name if name == "english_softmax" else pytest.param(name, marks=pytest.mark.slow)
               for name in sorted(CASES)]


def build_model(language, use_crf, labels, scheme, seed):
    config = AlbertConfig(vocab_size=8000 if language == "english" else 21128,
                          embedding_size=16, hidden_size=32, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=64)
    model = AlbertTokenClassifier(config, num_labels=len(labels), use_crf=use_crf,
                                  allowed=schemes.allowed_transitions(labels, scheme))
    model.build()
    rng = np.random.default_rng(seed)
    for var in model.weights:
        scale = 0.3 if len(var.shape) > 1 else 0.5
        value = rng.normal(0.0, scale, var.shape) + (1.0 if var.path.endswith("gamma") else 0.0)
        var.assign(value.astype("float32"))
    # Varied, confident labels (entities of several types in most texts): large classifier
    # weights on the hidden states' deviation from their mean over random tokens.
    probe = {"input_ids": rng.integers(5, config.vocab_size, (8, 24)).astype(np.int32),
             "input_mask": np.ones((8, 24), np.int32), "segment_ids": np.zeros((8, 24), np.int32)}
    mean = model.encoder(probe)["sequence_output"].numpy().mean(axis=(0, 1))
    weights = rng.normal(0.0, 3.0, model.classifier.output_weights.shape).astype(np.float32)
    model.classifier.output_weights.assign(weights)
    model.classifier.output_bias.assign(-weights @ mean)
    return model


def predict_words(model, tokenizer, labels, sentences, max_seq_length, doc_stride):
    """`TaggingJob`'s prediction of TaggedSentences: (the label ids of each sentence's words,
    the windows' features, the model's outputs on them)."""
    windows, _ = features.convert(sentences, tokenizer, {l: i for i, l in enumerate(labels)},
                                  max_seq_length, doc_stride)
    arrays = features.features_to_arrays(windows)
    inputs = {k: arrays[k].astype(np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    inputs["word_mask"] = (arrays["word_index"] >= 0).astype(np.int32)
    outputs = model(inputs, training=False)
    merged = features.merge_predictions(windows, outputs["predictions"].numpy(),
                                        [len(s.words) for s in sentences], labels.index("O"))
    return merged, inputs, outputs


def python_path(model, tokenizer, labels, texts, max_seq_length, doc_stride):
    """The entities `TaggingJob` predicts for the texts, and the windows' features."""
    sentences = []
    for text in texts:
        offsets = readers.split_words(text)
        sentences.append(readers.TaggedSentence(words=[text[s:e] for s, e in offsets],
                                                tags=None, source="test", text=text,
                                                offsets=offsets))
    merged, inputs, outputs = predict_words(model, tokenizer, labels, sentences,
                                            max_seq_length, doc_stride)
    found = []
    for sentence, ids in zip(sentences, merged):
        spans = [(e.type, *sentence.char_span(e.start, e.end))
                 for e in schemes.entities([labels[i] for i in ids])]
        found.append([(kind, start, end, sentence.text[start:end]) for kind, start, end in spans])
    return found, inputs, {k: outputs[k].numpy() for k in ("logits", "predictions")}


# Runs in a fresh interpreter with only TensorFlow and tensorflow-text imported.
LOADER = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the tokenizer ops
def strings(tensor):
    return [[item.decode("utf-8") for item in row] for row in tensor.numpy().tolist()]
def lists(outputs):
    return {k: strings(v) if v.dtype == tf.string else v.numpy().tolist()
            for k, v in outputs.items()}
out = {}
for name, case in json.loads(open(sys.argv[1]).read()).items():
    loaded = tf.saved_model.load(case["dir"])
    text = loaded.signatures["serving_default"](text=tf.constant(case["texts"]))
    words = loaded.signatures["serve_words"](words=tf.constant(case["words"], tf.string))
    tokens = loaded.signatures["serve_tokens"](**{k: tf.constant(v, tf.int32)
                                                  for k, v in case["tokens"].items()})
    out[name] = {
        "signatures": sorted(loaded.signatures),
        "text": lists(text),
        "words": lists(words),
        "tokens": {k: v.numpy().tolist() for k, v in tokens.items()},
        "labels": strings(loaded.labels[None])[0],
        "tag_scheme": loaded.tag_scheme.numpy().decode(),
        "settings": [int(loaded.max_seq_length.numpy()), int(loaded.doc_stride.numpy()),
                     bool(loaded.do_lower_case.numpy())]}
out["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def exported(request, tmp_path_factory, shared_data, spm_model, chinese_vocab_file):
    """name -> the case's model, settings, Python-path results and what the SavedModel
    returned in a process without albert_tf (the cases the run's tests use)."""
    root = tmp_path_factory.mktemp("tagging_export")
    cases, requests = {}, {}
    wanted = conftest.selected_cases(request, CASES, read_by_name=("english_softmax",))
    for seed, (name, (language, kind, use_crf, scheme, seq, stride)) in enumerate(
            CASES.items()):
        if name not in wanted:
            continue
        labels = label_list(language, scheme)
        model = build_model(language, use_crf, labels, scheme, seed)
        vocabulary = ({"spm_model_file": spm_model} if kind == "sentencepiece"
                      else {"vocab_file": chinese_vocab_file})
        tokenizer = tokenization.FullTokenizer(**vocabulary)
        texts = (english_texts if language == "english" else chinese_texts)(shared_data)
        want, inputs, outputs = python_path(model, tokenizer, labels, texts, seq, stride)
        sentences = word_sentences(shared_data, language)
        tagged = [readers.TaggedSentence(words=words, tags=None, source="test")
                  for words in sentences]
        word_ids, _, _ = predict_words(model, tokenizer, labels, tagged, seq, stride)
        width = max(len(words) for words in sentences)
        export_dir = str(root / name)
        tagging_export.export_saved_model(model, export_dir, labels, scheme,
                                          max_seq_length=seq, doc_stride=stride,
                                          **vocabulary)
        cases[name] = dict(model=model, labels=labels, scheme=scheme, seq=seq, stride=stride,
                           vocabulary=vocabulary, texts=texts, want=want, inputs=inputs,
                           outputs=outputs, dir=export_dir, sentences=sentences,
                           want_tags=[[labels[i] for i in ids] for ids in word_ids])
        requests[name] = {"dir": export_dir, "texts": texts,
                          "words": [words + [""] * (width - len(words)) for words in sentences],
                          "tokens": {k: v.tolist() for k, v in inputs.items()}}
    request_file = root / "request.json"
    request_file.write_text(json.dumps(requests))
    done = subprocess.run([sys.executable, "-c", LOADER, str(request_file)], capture_output=True,
                          text=True, cwd="/",
                          env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads([line for line in done.stdout.splitlines()
                         if line.startswith("RESULT")][-1][len("RESULT"):])
    assert result.pop("albert_tf_imported") is False
    for name, got in result.items():
        cases[name]["served"] = got
    return cases


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_saved_model_finds_the_python_paths_entities(exported, name):
    case = exported[name]
    served = case["served"]
    assert served["signatures"] == ["serve_tokens", "serve_words", "serving_default"]
    assert served["labels"] == case["labels"] and served["tag_scheme"] == case["scheme"]
    assert served["settings"] == [case["seq"], case["stride"], True]
    out = served["text"]
    assert sorted(out) == ["end", "entity_text", "entity_type", "num_entities", "score",
                           "start"]
    got = []
    for row, text in enumerate(case["texts"]):
        count = out["num_entities"][row]
        columns = zip(out["entity_type"][row], out["start"][row], out["end"][row],
                      out["entity_text"][row])
        entities = [tuple(c) for c in columns][:count]
        got.append(entities)
        for kind, start, end, entity_text in entities:
            assert text[start:end] == entity_text
        for padding in ("entity_type", "entity_text"):
            assert out[padding][row][count:] == [""] * (len(out[padding][row]) - count)
        for padding in ("start", "end", "score"):
            assert out[padding][row][count:] == [-1] * (len(out[padding][row]) - count)
        assert all(0 < score <= 1 for score in out["score"][row][:count])
    assert got == case["want"]
    found = sum(len(entities) for entities in got)
    assert found >= len(case["texts"]) // 2  # the weights give entities, of several types
    assert len({kind for entities in got for kind, *_ in entities}) >= 2


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_serve_words_tags_the_words_as_the_python_path(exported, name):
    """Each word's tag equals the Python path's (features.convert of the reader's words ->
    the model -> merge_predictions), the entities `schemes.entities` of those tags."""
    case = exported[name]
    out = case["served"]["words"]
    assert sorted(out) == ["end_word", "entity_type", "num_entities", "score", "start_word",
                           "tags"]
    width = max(len(words) for words in case["sentences"])
    got_tags, got_entities = [], []
    for row, words in enumerate(case["sentences"]):
        assert len(out["tags"][row]) == width
        assert out["tags"][row][len(words):] == [""] * (width - len(words))
        got_tags.append(out["tags"][row][:len(words)])
        count = out["num_entities"][row]
        columns = zip(out["entity_type"][row], out["start_word"][row], out["end_word"][row])
        got_entities.append([tuple(c) for c in columns][:count])
        assert out["entity_type"][row][count:] == [""] * (len(out["entity_type"][row]) - count)
        for padding in ("start_word", "end_word", "score"):
            assert out[padding][row][count:] == [-1] * (len(out[padding][row]) - count)
        assert all(0 < score <= 1 for score in out["score"][row][:count])
    assert got_tags == case["want_tags"]
    assert got_entities == [[(e.type, e.start, e.end) for e in schemes.entities(tags)]
                            for tags in case["want_tags"]]
    assert sum(len(entities) for entities in got_entities) >= len(case["sentences"]) // 2


def test_scores_are_mean_word_probabilities_and_empty_inputs_serve(exported):
    """Entity scores recomputed from the model's logits at their words' first sub-tokens;
    batches without any sub-token (no window to run) give no entities."""
    case = exported["english_softmax"]
    text = "John Smith visited the European Commission in Brussels on Thursday ."
    module = tagging_export.TaggingServingModule(
        case["model"], tokenization.in_graph_tokenizer(**case["vocabulary"]), case["labels"],
        case["scheme"], 64, 8)
    out = {k: v.numpy() for k, v in module.serving_default(tf.constant([text])).items()}
    assert out["num_entities"][0] > 0
    tokenizer = tokenization.FullTokenizer(**case["vocabulary"])
    _, inputs, outputs = python_path(case["model"], tokenizer, case["labels"], [text], 64, 8)
    starts = [i for i, on in enumerate(inputs["word_mask"][0]) if on]
    probabilities = tf.nn.softmax(outputs["logits"][0]).numpy()
    offsets = readers.split_words(text)
    for start, end, score in zip(out["start"][0], out["end"][0], out["score"][0]):
        words = [i for i, (s, e) in enumerate(offsets) if start <= s and e <= end]
        want = np.mean([probabilities[starts[w], outputs["predictions"][0, starts[w]]]
                        for w in words])
        assert score == pytest.approx(want, rel=1e-5)
    for texts in ([], [""], ["", " \t ", "\u0301"]):
        out = {k: v.numpy() for k, v in module.serving_default(tf.constant(texts, tf.string)
                                                               ).items()}
        assert out["num_entities"].tolist() == [0] * len(texts)
        assert all(v.shape == (len(texts), 0) for k, v in out.items() if k != "num_entities")
    # Pre-split words: no row with a sub-token (no window to run); padding and empty words.
    for words, tags in (([], []), ([[]], [[]]), ([["", ""]], [["", ""]]),
                        ([["", "\u0301", ""], ["\u0301", "", ""]], [["O", "O", ""],
                                                                     ["O", "", ""]])):
        batch = tf.constant(words, tf.string, shape=[len(words), len(tags[0]) if tags else 0])
        out = {k: v.numpy() for k, v in module.serve_words(batch).items()}
        assert out["num_entities"].tolist() == [0] * len(words)
        assert [[t.decode() for t in row] for row in out["tags"].tolist()] == tags
        assert all(v.shape == (len(words), 0) for k, v in out.items()
                   if k not in ("num_entities", "tags"))


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_serve_tokens_equals_the_model(exported, name):
    case = exported[name]
    got = case["served"]["tokens"]
    np.testing.assert_array_equal(got["predictions"], case["outputs"]["predictions"])
    # The SavedModel's LayerNorms are spelled for serving (export.call_for_export).
    np.testing.assert_allclose(got["logits"], case["outputs"]["logits"], atol=1e-4)


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_onnx_predictions_and_decoded_logits_equal_the_model(exported, name, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    case = exported[name]
    model, inputs, outputs = case["model"], case["inputs"], case["outputs"]
    int8 = name == "english_softmax"
    written = portable.export_model_dir(str(tmp_path), tagging_export.portable_model(
        model, case["labels"], case["scheme"], max_seq_length=case["seq"], do_lower_case=True,
        doc_stride=case["stride"]), ["onnx"], int8=int8, **case["vocabulary"])
    vocabulary = os.path.basename(next(iter(case["vocabulary"].values())))
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["model.onnx", vocabulary] + (["model.int8.onnx"] if int8 else []))
    session = ort.InferenceSession(written["onnx"], providers=["CPUExecutionProvider"])
    assert sorted(i.name for i in session.get_inputs()) == [
        "input_ids", "input_mask", "segment_ids", "word_mask"]
    assert sorted(o.name for o in session.get_outputs()) == ["logits", "predictions"]
    logits, predictions = session.run(["logits", "predictions"], inputs)
    np.testing.assert_allclose(logits, outputs["logits"], atol=1e-4)
    metadata = onnx_export.read_metadata(written["onnx"])
    assert {k: metadata[k] for k in ("task", "labels", "tag_scheme", "max_seq_length",
                                     "doc_stride", "do_lower_case", "use_crf", "decoding",
                                     "vocabulary_file")} == {
        "task": "tagging", "labels": case["labels"], "tag_scheme": case["scheme"],
        "max_seq_length": case["seq"], "doc_stride": case["stride"], "do_lower_case": True,
        "use_crf": model.use_crf, "decoding": "viterbi", "vocabulary_file": vocabulary}
    want = outputs["predictions"]
    assert predictions.dtype == np.int32
    np.testing.assert_array_equal(predictions, want)
    np.testing.assert_array_equal(
        tagging_export.decode_onnx_logits(logits, inputs["word_mask"], metadata), want)
    np.testing.assert_array_equal(  # TensorFlow's logits: the same tags
        tagging_export.decode_onnx_logits(outputs["logits"], inputs["word_mask"], metadata),
        want)
    if int8:  # its logits differ a little; its predictions are the decoding of its logits
        quantized = ort.InferenceSession(written["onnx_int8"], providers=["CPUExecutionProvider"])
        int8_logits, int8_predictions = quantized.run(["logits", "predictions"], inputs)
        error = np.abs(int8_logits - outputs["logits"]).max()
        assert 0 < error < 0.1 * np.abs(outputs["logits"]).max()
        np.testing.assert_array_equal(int8_predictions, tagging_export.decode_onnx_logits(
            int8_logits, inputs["word_mask"], metadata))


def test_decode_onnx_logits_equals_the_model_on_random_emissions():
    """Every decoding (argmax, constrained softmax, CRF with and without constraints), on
    rows with no words, one word and all words."""
    labels = label_list("english", "bioes")[:9]
    allowed = schemes.allowed_transitions(labels, "bioes")
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 3, (6, 11, len(labels))).astype(np.float32)
    word_mask = (rng.random((6, 11)) < 0.6).astype(np.int32)
    word_mask[0], word_mask[1], word_mask[2] = 0, np.eye(11, dtype=np.int32)[4], 1
    for use_crf, constrained in ((False, False), (False, True), (True, False), (True, True)):
        model = AlbertTokenClassifier(AlbertConfig(vocab_size=30, hidden_size=8,
                                                   num_attention_heads=2, intermediate_size=8,
                                                   num_hidden_layers=1),
                                      num_labels=len(labels), use_crf=use_crf,
                                      allowed=allowed if constrained else None)
        model.build()
        if use_crf:
            for var in model.crf.weights:
                var.assign(rng.normal(0, 2, var.shape).astype(np.float32))
        want = model.decode(tf.constant(logits), word_mask).numpy()
        metadata = json.loads(json.dumps(tagging_export.decoding_metadata(model)))
        got = tagging_export.decode_onnx_logits(logits, word_mask, metadata)
        np.testing.assert_array_equal(got, want, err_msg=f"crf={use_crf} {constrained}")
        assert (got[word_mask == 1] >= 0).all() and (got[word_mask == 0] == -1).all()
