"""`albert_tf.distill`: the student of a Keras task model, trained with Keras' fit on texts
in memory, for each family; its loss is the CLI's, term by term."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.distillation import keras_distiller, objective
from albert_tf.errors import UserValueError
from tests.helpers.hf_models import NER_LABELS, write_hf_dir

TEXTS = ["a gripping film", "dull and slow", "wonderful acting", "a waste of time"] * 4
LABELS = [1, 0, 1, 0] * 4
WORDS = [["Alice", "lives", "in", "Paris", "."], ["Bob", "met", "Carol", "in", "Rome"]] * 2
TAGS = [["B-PER", "O", "O", "B-LOC", "O"], ["B-PER", "O", "B-PER", "O", "B-LOC"]] * 2


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, official_spm):
    path = write_hf_dir(str(tmp_path_factory.mktemp("hf") / "cls"), "classifier",
                        official_spm, labels=["neg", "pos"], seed=2)
    return albert_tf.from_pretrained(path, sequence_length=16)


@pytest.mark.slow  # 7 s
def test_the_student_is_the_teachers_task_with_the_students_config(classifier):
    student = keras_distiller.student_task(classifier, "layers:1")
    assert type(student) is type(classifier)
    assert student.labels == classifier.labels
    assert student.preprocessor is classifier.preprocessor
    assert student.config.num_hidden_layers == 1
    classifier.network.inference_layers = 1  # the same shared layer, once
    try:
        np.testing.assert_allclose(student.predict(TEXTS[:4], verbose=0),
                                   classifier.predict(TEXTS[:4], verbose=0), atol=1e-5)
    finally:
        classifier.network.inference_layers = None


def test_the_loss_is_the_clis_terms(classifier):
    """alpha x the task's compiled loss + (1 - alpha) x the soft loss's mean + each
    encoder term's weight x its mean, against the terms computed here."""
    student = keras_distiller.student_task(classifier, "tiny")
    student.compile(num_train_steps=2)
    distiller = keras_distiller.Distiller(student, classifier, temperature=3.0, alpha=0.25,
                                          hidden_weight=0.5, attention_weight=0.3)
    assert distiller.projection is not None  # H=312 against the teacher's 64
    x = student.features(TEXTS[:4])
    y = tf.constant(LABELS[:4])
    got, logits = distiller.distillation_loss(x, y, training=False)
    hard = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, logits)
    mine = student.network(x, training=False)
    theirs = classifier.network(x, training=False)
    soft = objective.soft_loss(logits, tf.cast(theirs["logits"], tf.float32), 3.0,
                               "single_label")
    hidden = objective.hidden_loss(mine["encoder_outputs"], theirs["encoder_outputs"],
                                   x["input_mask"], distiller.projection)
    heads = objective.relation_heads(student.config, classifier.config)
    relations = objective.relation_loss(
        objective.self_attention_relations(
            *objective.last_attention_input(student.network, mine), x["input_mask"], heads),
        objective.self_attention_relations(
            *objective.last_attention_input(classifier.network, theirs), x["input_mask"],
            heads), x["input_mask"])
    expected = 0.25 * float(hard) + 0.75 * float(tf.reduce_mean(soft)) + 0.5 * float(
        tf.reduce_mean(hidden)) + 0.3 * float(tf.reduce_mean(relations))
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)


@pytest.mark.slow  # 20 s
def test_distill_trains_a_classifier_student(classifier, tmp_path):
    keras.utils.set_random_seed(1)
    student = albert_tf.distill(classifier, TEXTS, LABELS, student="layers:1", epochs=3,
                                batch_size=4, alpha=0.0, learning_rate=1e-3,
                                validation_data=(TEXTS[:4], LABELS[:4]), verbose=0)
    losses = student.history.history["loss"]
    assert losses[-1] < losses[0]
    assert {"accuracy", "val_loss", "val_accuracy"} <= set(student.history.history)
    path = str(tmp_path / "student.keras")
    student.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(TEXTS[:4], verbose=0),
                               student.predict(TEXTS[:4], verbose=0), atol=1e-5)


@pytest.mark.slow  # 15 s
def test_distill_trains_tagger_and_multiple_choice_students(tmp_path, official_spm):
    ner = albert_tf.from_pretrained(write_hf_dir(str(tmp_path / "ner"), "token_classifier",
                                                 official_spm, labels=NER_LABELS, seed=5),
                                    sequence_length=16)
    tagger = albert_tf.distill(ner, WORDS, TAGS, student="tiny", epochs=1, batch_size=2,
                               hidden_weight=1.0, verbose=0)
    assert type(tagger).__name__ == "AlbertTagger" and tagger.config.hidden_size == 312
    assert np.isfinite(tagger.history.history["loss"]).all()
    assert len(tagger.predict(WORDS[:1], verbose=0)[0]) == len(WORDS[0])
    race = albert_tf.from_pretrained(write_hf_dir(str(tmp_path / "mc"), "multiple_choice",
                                                  official_spm, seed=4), sequence_length=32)
    x = {"article": ["Tom has a red ball."] * 4, "question": ["What colour is the ball?"] * 4,
         "options": [["red", "blue", "green", "black"]] * 4}
    chooser = albert_tf.distill(race, x, ["A"] * 4, student="layers:1", epochs=1,
                                batch_size=2, verbose=0)
    assert type(chooser).__name__ == "AlbertMultipleChoiceTask"
    assert np.isfinite(chooser.history.history["loss"]).all()


def test_bad_calls_are_one_line(classifier, tmp_path, official_spm):
    with pytest.raises(UserValueError, match=r"alpha must be in \[0, 1\], got 2"):
        albert_tf.distill(classifier, TEXTS, LABELS, alpha=2, verbose=0)
    with pytest.raises(UserValueError, match="^student=layers:9: layers:k needs k from 1 to"):
        albert_tf.distill(classifier, TEXTS, LABELS, student="layers:9", verbose=0)
    qa = write_hf_dir(str(tmp_path / "qa"), "span", official_spm, seed=1)
    with pytest.raises(UserValueError, match="the teacher is an AlbertQuestionAnswerer; it "
                                             "distils AlbertTextClassifier"):
        albert_tf.distill(qa, TEXTS, LABELS, verbose=0)
