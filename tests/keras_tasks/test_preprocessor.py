"""AlbertPreprocessor: the ids and packing of run_classifier.py's features, from raw text, in
every input form; WordPiece for the Chinese vocabulary; saved with its vocabulary."""
import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.errors import UserFileNotFoundError, UserValueError
from albert_tf.export import TOKEN_FEATURES
from albert_tf.keras_tasks import AlbertPreprocessor
from albert_tf.tasks.classification import features, glue


def glue_examples(shared_data, task, count):
    examples = glue.read_examples(glue.TASKS[task], str(shared_data / "glue"), "dev")[:count]
    return [dataclasses.replace(e, label=None) for e in examples]


@pytest.mark.parametrize("length", [16, 128])
def test_pairs_and_singles_equal_run_classifiers_features(shared_data, official_spm, length):
    python = tokenization.FullTokenizer(spm_model_file=official_spm, do_lower_case=True)
    preprocessor = AlbertPreprocessor(official_spm, sequence_length=length)
    pairs = glue_examples(shared_data, "mrpc", 120)
    singles = glue_examples(shared_data, "sst-2", 120)
    for examples, given in (
            (pairs, ([e.text_a for e in pairs], [e.text_b for e in pairs])),
            (pairs, {"text": [e.text_a for e in pairs], "text_pair": [e.text_b for e in pairs]}),
            (singles, [e.text_a for e in singles]),
            (singles, np.array([e.text_a for e in singles]))):
        want = features.convert_examples(examples, python, length, None)
        got = preprocessor(given)
        for key in TOKEN_FEATURES:
            np.testing.assert_array_equal(got[key].numpy(), want[key], err_msg=key)
            assert got[key].dtype == tf.int32 and got[key].shape == (len(examples), length)


def test_upper_case_text_is_lower_cased_as_the_original(official_spm):
    """keras-hub's AlbertTokenizer leaves capitals, which the uncased vocabulary lacks."""
    preprocessor = AlbertPreprocessor(official_spm, sequence_length=12)
    upper = preprocessor(["The Cat SAT."])["input_ids"].numpy()
    lower = preprocessor(["the cat sat."])["input_ids"].numpy()
    np.testing.assert_array_equal(upper, lower)
    assert preprocessor.unk_id not in upper


def test_chinese_wordpiece_equals_the_python_tokenizer(chinese_vocab_file):
    python = tokenization.FullTokenizer(vocab_file=chinese_vocab_file, do_lower_case=True)
    preprocessor = AlbertPreprocessor(chinese_vocab_file, sequence_length=24)
    assert preprocessor.tokenizer_kind == "wordpiece"
    texts = ["今天天气很好，我们去公园。", "ALBERT 是一个轻量的 BERT 模型"]
    examples = [glue.InputExample(str(i), t, None, None) for i, t in enumerate(texts)]
    want = features.convert_examples(examples, python, 24, None)
    np.testing.assert_array_equal(preprocessor(texts)["input_ids"].numpy(), want["input_ids"])


def test_runs_inside_tf_data(official_spm):
    preprocessor = AlbertPreprocessor(official_spm, sequence_length=10)
    data = tf.data.Dataset.from_tensor_slices(["one text", "another text here"]).batch(2)
    batch = next(iter(data.map(preprocessor)))
    np.testing.assert_array_equal(batch["input_ids"].numpy(),
                                  preprocessor(["one text", "another text here"])["input_ids"])


def test_saved_with_its_vocabulary(tmp_path, official_spm):
    import shutil

    copy = tmp_path / "vocab" / "my.model"
    copy.parent.mkdir()
    shutil.copy(official_spm, copy)
    preprocessor = AlbertPreprocessor(str(copy), do_lower_case=True, sequence_length=9)
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, preprocessor(inputs))
    model.save(tmp_path / "p.keras")
    shutil.rmtree(copy.parent)  # the .keras file holds the vocabulary itself
    loaded = keras.saving.load_model(tmp_path / "p.keras")
    texts = tf.constant(["A sentence, with 1,000 words."])
    np.testing.assert_array_equal(loaded(texts)["input_ids"], model(texts)["input_ids"])
    restored = [layer for layer in loaded.layers if isinstance(layer, AlbertPreprocessor)][0]
    assert (restored.sequence_length, restored.do_lower_case, restored.tokenizer_kind) == (
        9, True, "sentencepiece")


def test_bad_input_in_one_line(tmp_path, official_spm):
    with pytest.raises(UserFileNotFoundError, match="vocabulary_file=.*nope.model: no such"):
        AlbertPreprocessor(str(tmp_path / "nope.model"))
    with pytest.raises(UserValueError, match="sequence_length must be at least 3"):
        AlbertPreprocessor(official_spm, sequence_length=2)
    preprocessor = AlbertPreprocessor(official_spm, sequence_length=8)
    with pytest.raises(UserValueError, match="texts must be strings, got int32"):
        preprocessor(tf.constant([1, 2]))
    with pytest.raises(UserValueError, match="'text' \\(and 'text_pair'\\)"):
        preprocessor({"sentence": ["a"]})
    with pytest.raises(UserValueError, match="no vocabulary"):
        AlbertPreprocessor(sequence_length=8)(["a"])
