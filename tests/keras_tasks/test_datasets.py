"""A batched tf.data.Dataset feeds the tasks whose inputs are made in Python (the tagger,
the span reader, multiple choice, the embedder, the masked LM) as the same data in memory
does: fit leaves the same weights, predict gives the same outputs; bad datasets get one
line."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.errors import UserValueError
from tests.helpers.hf_models import NER_LABELS

WORDS = [["Alice", "lives", "in", "Paris", "."], ["EU", "rejects", "German", "lamb", "."],
         ["Bob", "left", "."]]
TAGS = [["B-PER", "O", "O", "B-LOC", "O"], ["B-ORG", "O", "B-LOC", "O", "O"],
        ["B-PER", "O", "O"]]
CONTEXT = "The Eiffel Tower was built in 1889 by Gustave Eiffel in Paris."
QUESTIONS = {"question": ["When was the tower built?", "Who built the tower?"],
             "context": [CONTEXT, CONTEXT]}
ANSWERS = {"text": ["1889", "Gustave Eiffel"], "answer_start": [30, 38]}
CHOICES = {"article": ["Tom has a red ball.", "The sun rises in the east."],
           "question": ["What colour is the ball?", "Where does the sun rise?"],
           "options": [["red", "blue", "green", "black"], ["west", "east", "north", "south"]]}
PAIRS = (["A man plays a guitar.", "A dog runs.", "The sun is bright."],
         ["Someone plays music.", "A cat sleeps.", "It is a sunny day."])
DOCUMENTS = ["The cat sat on the mat.\nIt was a sunny day.\nThe dog barked at the cat.",
             "Paris is the capital of France.\nIt has many museums.\nPeople visit it."]


def _fit_both(make, memory, dataset, **fit):
    """Weights after one fit on in-memory data and one on the dataset, from equal starts."""
    trained = []
    for x, y in (memory, (dataset, None)):
        keras.utils.set_random_seed(0)
        model = make()
        model.compile(learning_rate=1e-3)
        model.fit(x, y, shuffle=False, verbose=0, **fit)
        trained.append(model)
    for mine, theirs in zip(trained[0].network.weights, trained[1].network.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=mine.path)
    return trained[1]


@pytest.mark.slow  # ~12 s on AMD EPYC Zen 3: two fits
def test_tagger_fits_and_predicts_on_datasets(models):
    make = lambda: albert_tf.from_pretrained(models["mlm"], "token-classification",  # noqa
                                             labels=NER_LABELS, sequence_length=16)
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant(WORDS), tf.ragged.constant(TAGS))).batch(2)
    tagger = _fit_both(make, (WORDS, TAGS), dataset, batch_size=2)
    texts = [" ".join(words) for words in WORDS]
    assert tagger.predict_tags(tf.data.Dataset.from_tensor_slices(texts).batch(2),
                               verbose=0) == tagger.predict_tags(texts, verbose=0)
    padded = tf.data.Dataset.from_tensor_slices(  # words padded with "" read the same
        tf.ragged.constant(WORDS).to_tensor(default_value="")).batch(3)
    assert tagger.predict_tags(padded, verbose=0) == tagger.predict_tags(WORDS, verbose=0)
    assert tagger.score(dataset, verbose=0) == tagger.score(WORDS, TAGS, verbose=0)


@pytest.mark.slow  # ~25 s on AMD EPYC Zen 3: four fits
def test_span_reader_and_multiple_choice_on_datasets(models):
    make = lambda: albert_tf.from_pretrained(models["mlm"], "question-answering",  # noqa
                                             sequence_length=48)
    dataset = tf.data.Dataset.from_tensor_slices((QUESTIONS, ANSWERS)).batch(1)
    answers = [{"text": t, "answer_start": s} for t, s in zip(*ANSWERS.values())]
    reader = _fit_both(make, (QUESTIONS, answers), dataset, batch_size=1)
    assert reader.predict(tf.data.Dataset.from_tensor_slices(QUESTIONS).batch(2),
                          verbose=0) == reader.predict(QUESTIONS, verbose=0)

    make = lambda: albert_tf.from_pretrained(models["mlm"], "multiple-choice",  # noqa
                                             sequence_length=32)
    dataset = tf.data.Dataset.from_tensor_slices((CHOICES, [0, 1])).batch(2)
    chooser = _fit_both(make, (CHOICES, [0, 1]), dataset, batch_size=2)
    np.testing.assert_array_equal(
        chooser.predict(tf.data.Dataset.from_tensor_slices(CHOICES).batch(1), verbose=0),
        chooser.predict(CHOICES, verbose=0))


@pytest.mark.slow  # ~25 s on AMD EPYC Zen 3: six fits
def test_embedder_and_masked_lm_on_datasets(models):
    make = lambda: albert_tf.from_pretrained(models["mlm"], "sentence-embedding",  # noqa
                                             sequence_length=24)
    scores = [4.0, 0.5, 3.0]
    dataset = tf.data.Dataset.from_tensor_slices((PAIRS, scores)).batch(3)
    embedder = _fit_both(make, (PAIRS, scores), dataset, batch_size=3)
    _fit_both(make, (PAIRS, None), tf.data.Dataset.from_tensor_slices(PAIRS).batch(3),
              batch_size=3)  # pairs alone: the ranking loss
    np.testing.assert_array_equal(
        embedder.predict(tf.data.Dataset.from_tensor_slices(PAIRS[0]).batch(2), verbose=0),
        embedder.predict(PAIRS[0], verbose=0))

    make = lambda: albert_tf.from_pretrained(models["mlm"], "fill-mask",  # noqa
                                             sequence_length=24)
    _fit_both(make, (DOCUMENTS, None), tf.data.Dataset.from_tensor_slices(DOCUMENTS).batch(1),
              batch_size=2)


def test_bad_datasets_get_one_line(models):
    tagger = albert_tf.from_pretrained(models["mlm"], "token-classification",
                                       labels=NER_LABELS, sequence_length=16)
    texts = tf.data.Dataset.from_tensor_slices(["Alice lives here.", "Bob left."])
    cases = [
        (lambda: tagger.predict(texts), "a dataset of single examples: batch it first"),
        (lambda: tagger.predict(texts.batch(2).repeat()), "the dataset repeats forever"),
        (lambda: tagger.fit(texts.batch(2), [["B-PER", "O", "O"], ["B-PER", "O"]]),
         "y is given inside a tf.data.Dataset"),
        (lambda: tagger.score(WORDS), "score needs tags"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message):
            call()
