"""Per-layer exits in the Keras tasks: `from_pretrained(..., exit_heads=...)`, fit with
PABEE's depth-weighted loss, early exit at predict, and the settings kept by `.keras`
files and exports."""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.errors import UserValueError
from albert_tf.modeling import early_exit
from tests.helpers.hf_models import NER_LABELS, write_hf_dir

TEXTS = ["a gripping film", "dull and slow", "wonderful acting", "a waste of time"] * 2
LABELS = [1, 0, 1, 0] * 2
WORDS = [["Alice", "lives", "in", "Paris", "."], ["Bob", "met", "Carol", "in", "Rome"]]
TAGS = [["B-PER", "O", "O", "B-LOC", "O"], ["B-PER", "O", "B-PER", "O", "B-LOC"]]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, official_spm):
    return write_hf_dir(str(tmp_path_factory.mktemp("hf") / "cls"), "classifier",
                        official_spm, labels=["neg", "pos"], seed=2)


@pytest.mark.parametrize("exit_heads", ["shared", "per_layer"])
def test_the_training_loss_weighs_each_exit_by_depth(classifier_dir, exit_heads):
    task = albert_tf.from_pretrained(classifier_dir, sequence_length=16, exit_heads=exit_heads)
    assert task.network.exit_heads == exit_heads
    assert (task.network.exits is not None) == (exit_heads == "per_layer")
    task.compile(num_train_steps=2)
    x, y = task.features(TEXTS[:4]), tf.constant(LABELS[:4])
    y_pred = task(x, training=True)
    exits = task._exit_store().logits  # what this call's exits said
    assert exits.shape[:2] == (2, 4)
    np.testing.assert_allclose(y_pred, exits[-1], rtol=1e-6)
    got = task.compute_loss(x, y, y_pred, training=True)
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    per_exit = [float(cross_entropy(y, exits[index])) for index in range(2)]
    np.testing.assert_allclose(float(got), (1 * per_exit[0] + 2 * per_exit[1]) / 3, rtol=1e-5)
    # Evaluation: the answer layer's loss alone.
    answer = task(x, training=False)
    np.testing.assert_allclose(float(task.compute_loss(x, y, answer, training=False)),
                               float(cross_entropy(y, answer)), rtol=1e-6)


@pytest.mark.slow  # 35 s: fits, saves, exports
def test_fit_trains_the_exits_and_predict_exits_early(classifier_dir, tmp_path):
    keras.utils.set_random_seed(0)
    task = albert_tf.from_pretrained(classifier_dir, sequence_length=16, exit_heads="shared")
    task.compile(learning_rate=1e-3)
    history = task.fit(TEXTS, LABELS, batch_size=4, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    full = task.predict(TEXTS, verbose=0)
    task.network.early_exit = {"patience": 5}  # beyond the depth: every layer
    np.testing.assert_allclose(task.predict(TEXTS, verbose=0), full, atol=1e-5)
    task.network.early_exit = {"confidence": 0.01}  # every row at the first layer
    first = task.predict(TEXTS, verbose=0)
    task.network.early_exit = None
    task.network.inference_layers = 1
    np.testing.assert_allclose(first, task.predict(TEXTS, verbose=0), atol=1e-5)
    task.network.inference_layers = None
    # The settings go with the task: a .keras file, an export and what reads it.
    task.network.early_exit = {"patience": 1}
    path = str(tmp_path / "exits.keras")
    task.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.network.exit_heads == "shared"
    assert loaded.network.early_exit == early_exit.EarlyExit(patience=1)
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0),
                               task.predict(TEXTS, verbose=0), atol=1e-5)
    exported = task.export(str(tmp_path / "export"))["export_dir"]
    record = json.loads(open(f"{exported}/albert_tf_export.json").read())
    assert record["exit_heads"] == "shared" and record["early_exit"]["patience"] == 1
    again = albert_tf.from_pretrained(exported)
    assert again.network.early_exit == early_exit.EarlyExit(patience=1)
    classify = albert_tf.pipeline("text-classification", model=exported)
    assert all(1 <= result["exit_layer"] <= 2 for result in classify(TEXTS[:3]))


@pytest.mark.slow  # 6 s: an export
def test_per_layer_exits_are_kept_by_what_reads_them(classifier_dir, tmp_path):
    task = albert_tf.from_pretrained(classifier_dir, sequence_length=16,
                                     exit_heads="per_layer")
    exported = task.export(str(tmp_path / "export"))["export_dir"]
    again = albert_tf.from_pretrained(exported)
    assert again.network.exit_heads == "per_layer"
    np.testing.assert_array_equal(again.network.exits.get_weights()[0],
                                  task.network.exits.get_weights()[0])
    plain = albert_tf.from_pretrained(exported, exit_heads="none")
    assert plain.network.exits is None


@pytest.mark.slow  # 13 s
def test_tagger_and_multiple_choice_fit_with_exits(tmp_path, official_spm):
    ner = write_hf_dir(str(tmp_path / "ner"), "token_classifier", official_spm,
                       labels=NER_LABELS, seed=5)
    tagger = albert_tf.from_pretrained(ner, sequence_length=16, exit_heads="shared")
    tagger.compile(learning_rate=1e-3)
    history = tagger.fit(WORDS * 2, TAGS * 2, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    tagger.network.early_exit = {"confidence": 0.01}
    assert len(tagger.predict(WORDS[:1], verbose=0)[0]) == len(WORDS[0])
    race = write_hf_dir(str(tmp_path / "mc"), "multiple_choice", official_spm, seed=4)
    chooser = albert_tf.from_pretrained(race, sequence_length=32, exit_heads="per_layer")
    chooser.compile(learning_rate=1e-3)
    x = {"article": ["Tom has a red ball."] * 2, "question": ["What colour is it?"] * 2,
         "options": [["red", "blue", "green", "black"]] * 2}
    history = chooser.fit(x, ["A", "A"], batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_a_bad_exit_heads_is_one_line(classifier_dir):
    with pytest.raises(UserValueError, match="exit_heads must be one of none, shared, "
                                             "per_layer; got 'every'"):
        albert_tf.from_pretrained(classifier_dir, exit_heads="every")
