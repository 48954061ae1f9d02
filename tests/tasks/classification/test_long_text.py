"""Texts longer than the model (--long_text): the Python rules, the same rules in the serving
graph, the features a job reads, and the serving module against the model run by hand."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling.models import AlbertClassifier
from albert_tf.tasks.classification import features, glue, long_text
from albert_tf.tasks.classification.export import (ClassifierServingModule, head_tail_ids,
                                                   window_ids)
from albert_tf.tasks.classification.long_text import LongText


# --- the rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize("length, budget, stride, starts", [
    (0, 10, 5, [0]), (10, 10, 5, [0]), (11, 10, 5, [0, 5]), (15, 10, 5, [0, 5]),
    (16, 10, 5, [0, 5, 10]), (25, 10, 10, [0, 10, 20]), (7, 3, 1, [0, 1, 2, 3, 4]),
])
def test_window_starts_reach_the_end(length, budget, stride, starts):
    assert long_text.window_starts(length, budget, stride) == starts
    count = 1 + -(-max(length - budget, 0) // stride)
    assert len(starts) == count
    assert starts[-1] + budget >= length  # the last window reaches the end


def test_pieces_under_each_rule():
    ids = list(range(1000, 1020))  # 20 ids, budget 8
    assert long_text.pieces(ids, 8, LongText("truncate")) == [ids[:8]]
    assert long_text.head_tokens(8) == 2 and long_text.head_tokens(510) == 128
    assert long_text.pieces(ids, 8, LongText("head_tail")) == [ids[:2] + ids[-6:]]
    windows = long_text.pieces(ids, 8, LongText("windows", doc_stride=5))
    assert windows == [ids[0:8], ids[5:13], ids[10:18], ids[15:20]]
    # Default stride: half a window.
    assert LongText("windows").stride(8) == 4
    # A text that fits is one unchanged piece under every rule.
    for mode in long_text.MODES:
        assert long_text.pieces(ids[:8], 8, LongText(mode)) == [ids[:8]]


@pytest.mark.parametrize("settings, message", [
    (dict(mode="middle"), "--long_text must be one of truncate, head_tail, windows"),
    (dict(mode="windows", aggregation="sum"), "--window_aggregation must be one of mean, max"),
    (dict(mode="windows", doc_stride=0), "--doc_stride must be positive"),
])
def test_bad_settings_name_the_flag(settings, message):
    with pytest.raises(ValueError, match=message):
        LongText(**settings)


def test_a_stride_longer_than_a_window_is_refused():
    with pytest.raises(ValueError, match="--doc_stride 20 exceeds the 14 text tokens a window "
                                         "holds"):
        LongText("windows", doc_stride=20).stride(14)


def test_aggregation_is_the_mean_or_max_of_each_examples_windows():
    logits = np.array([[1, 5], [3, 1], [0, 0], [-2, 4]], np.float32)
    index = np.array([0, 0, 1, 2])
    np.testing.assert_array_equal(long_text.aggregate(logits, index, 3, "mean"),
                                  [[2, 3], [0, 0], [-2, 4]])
    np.testing.assert_array_equal(long_text.aggregate(logits, index, 3, "max"),
                                  [[3, 5], [0, 0], [-2, 4]])
    with pytest.raises(ValueError, match="an example without a window"):
        long_text.aggregate(logits, np.array([0, 0, 2, 2]), 3)


# --- in the graph -------------------------------------------------------------------------------


def random_rows(seed, count=60, longest=70):
    rng = np.random.default_rng(seed)
    return [rng.integers(5, 100, rng.integers(0, longest)).tolist() for _ in range(count)]


@pytest.mark.parametrize("budget, stride", [(8, 4), (8, 8), (10, 3), (3, 1), (126, 63)])
def test_the_graphs_windows_and_head_tail_equal_the_python_rules(budget, stride):
    rows = random_rows(budget * 10 + stride)
    ragged = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1,
                                row_splits_dtype=tf.int64)
    windows, row = window_ids(ragged, budget, stride)
    want = [(i, piece) for i, ids in enumerate(rows)
            for piece in long_text.pieces(ids, budget, LongText("windows", stride))]
    assert row.numpy().tolist() == [i for i, _ in want]
    assert windows.to_list() == [piece for _, piece in want]
    assert head_tail_ids(ragged, budget).to_list() == [long_text.head_tail(ids, budget)
                                                       for ids in rows]


# --- features -----------------------------------------------------------------------------------


class Tokenizer:
    """Each character is a token (id = its code point), so lengths are easy to set."""

    cls_id, sep_id, pad_id, do_lower_case = 2, 3, 0, True

    def preprocess(self, text):
        return text

    def encode_ids(self, texts, num_threads=1):
        return [[ord(c) for c in text] for text in texts]

    def convert_ids_to_tokens(self, ids):
        return [chr(i) for i in ids]


def examples(*texts):
    return [glue.InputExample(f"g{i}", text, None, "b" if i % 2 else "a", f"f:{i + 1}")
            for i, text in enumerate(texts)]


def test_windows_become_features_with_their_examples_index_and_label():
    rows = examples("abcdefghijklmnopqrst", "short", "abcdefghijk")
    out = features.convert_examples(rows, Tokenizer(), 10, ["a", "b"],
                                    long_text=LongText("windows", doc_stride=4))
    # Budget 8: 20 tokens -> starts 0, 4, 8, 12; 5 -> one; 11 -> 0, 4.
    np.testing.assert_array_equal(out["example_index"], [0, 0, 0, 0, 1, 2, 2])
    np.testing.assert_array_equal(out["label_ids"], [0, 0, 0, 0, 1, 0, 0])
    first = [chr(i) for i in out["input_ids"][1][1:9]]
    assert "".join(first) == "efghijkl"
    last = out["input_ids"][3][:out["input_mask"][3].sum()]
    assert "".join(chr(i) for i in last[1:-1]) == "mnopqrst"
    assert last[0] == 2 and last[-1] == 3


def test_a_text_that_fits_gives_the_same_features_under_every_rule(tmp_path):
    rows = examples("abcdefgh", "abc", "")
    reference = features.convert_examples(rows, Tokenizer(), 10, ["a", "b"])
    for mode in long_text.MODES:
        out = features.convert_examples(rows, Tokenizer(), 10, ["a", "b"],
                                        long_text=LongText(mode))
        for name in ("input_ids", "input_mask", "segment_ids", "label_ids"):
            np.testing.assert_array_equal(out[name], reference[name])


def test_truncation_is_counted_in_the_log(monkeypatch):
    lines = []
    monkeypatch.setattr(features.logging, "info", lambda text, *args: lines.append(text % args))
    rows = examples("abcdefghijklmnopqrst", "short", "abcdefghi")
    features.convert_examples(rows, Tokenizer(), 10, ["a", "b"])
    assert any(line.startswith("2 of 3 examples are longer than --max_seq_length 10 and were "
                               "cut to their first tokens") for line in lines)


def test_the_windows_cache_round_trips_with_its_index(tmp_path):
    spec = glue.TaskSpec("custom", "", {s: glue.SplitLayout("", True, 0, None, 1)
                                        for s in glue.SPLITS}, ("a", "b"), "eval_accuracy")
    rows = examples("abcdefghijklmnopqrst", "short")
    path = features.prepare_features(str(tmp_path), spec, "dev", rows, Tokenizer(), 10, "v",
                                     long_text=LongText("windows", doc_stride=4))
    np.testing.assert_array_equal(features.read_example_index(path), [0, 0, 0, 0, 1])
    batches = list(features.dataset(path, 10, False, 4, False, 5, windows=True)
                   .as_numpy_iterator())
    np.testing.assert_array_equal(np.concatenate([b["example_index"] for b in batches]),
                                  [0, 0, 0, 0, 1, 0, 0, 0])
    # Another rule over the same examples is another cache.
    other = features.prepare_features(str(tmp_path), spec, "dev", rows, Tokenizer(), 10, "v")
    assert other != path


# --- the serving module -------------------------------------------------------------------------


class GraphTokenizer:
    """The character tokenizer, in the graph."""

    cls_id, sep_id, pad_id = 2, 3, 0

    def __call__(self, texts):
        return tf.strings.unicode_decode(texts, "UTF-8")


CONFIG = AlbertConfig(vocab_size=400, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)


@pytest.fixture(scope="module")
def model():
    tf.keras.utils.set_random_seed(3)
    built = AlbertClassifier(CONFIG, num_labels=3)
    built({"input_ids": tf.zeros([1, 12], tf.int32), "input_mask": tf.ones([1, 12], tf.int32),
           "segment_ids": tf.zeros([1, 12], tf.int32)})
    return built


def by_hand(model, text, rule, max_seq_length=12):
    """Logits [K] of one text: its pieces packed in Python, run one at a time, aggregated."""
    ids = [ord(c) for c in text]
    rows = []
    for piece in long_text.pieces(ids, max_seq_length - 2, rule):
        packed = features.pack_pair(piece, None, max_seq_length, 2, 3)
        outputs = model({name: tf.constant([value]) for name, value in
                         zip(("input_ids", "input_mask", "segment_ids"), packed)})
        rows.append(outputs["logits"].numpy()[0])
    return long_text.aggregate(np.array(rows), np.zeros(len(rows), int), 1,
                               rule.aggregation)[0], len(rows)


@pytest.mark.parametrize("rule", [LongText("truncate"), LongText("head_tail"),
                                  LongText("windows", 3, "mean"), LongText("windows", 7, "max")])
def test_the_raw_text_signature_reads_long_texts_as_the_python_rules(model, rule):
    texts = ["a long text of many characters, read in windows", "short", "",
             "x" * 61 + "the end"]
    module = ClassifierServingModule(model, GraphTokenizer(), 12, ["p", "q", "r"], pair=False,
                                     long_text=rule, layer_norm="plain")
    served = module.serving_default(text_a=tf.constant(texts))
    for row, text in enumerate(texts):
        logits, count = by_hand(model, text, rule)
        probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        np.testing.assert_allclose(served["probabilities"][row], probabilities, atol=2e-6)
        assert served["predictions"][row].numpy().decode() == "pqr"[int(np.argmax(logits))]
        if rule.mode != "truncate":
            assert served["num_windows"][row] == count


def test_a_short_text_gives_identical_outputs_under_every_rule(model):
    texts = tf.constant(["short", "ten chars!", ""])  # at most the 10 tokens of one window
    outputs = [ClassifierServingModule(model, GraphTokenizer(), 12, ["p", "q", "r"], pair=False,
                                       long_text=LongText(mode), layer_norm="plain")
               .serving_default(text_a=texts) for mode in long_text.MODES]
    for other in outputs[1:]:
        np.testing.assert_array_equal(other["probabilities"], outputs[0]["probabilities"])
        np.testing.assert_array_equal(other["predictions"], outputs[0]["predictions"])
        assert other["num_windows"].numpy().tolist() == [1, 1, 1]


def test_many_windows_go_through_the_model_in_chunks(model):
    module = ClassifierServingModule(model, GraphTokenizer(), 12, ["p", "q", "r"], pair=False,
                                     long_text=LongText("windows", 10), layer_norm="plain")
    text = "".join(chr(97 + i % 26) for i in range(600))  # 60 windows: 4 chunks of 16
    served = module.serving_default(text_a=tf.constant([text, "ab"]))
    assert served["num_windows"].numpy().tolist() == [60, 1]
    logits, _ = by_hand(model, text, LongText("windows", 10))
    np.testing.assert_allclose(served["probabilities"][0],
                               np.exp(logits) / np.exp(logits).sum(), atol=2e-6)
