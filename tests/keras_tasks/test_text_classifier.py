"""AlbertTextClassifier through plain Keras: from_pretrained on every classifier problem,
compile() defaults, fit / evaluate / predict on raw text, labels in their natural forms and
refused in one line, .keras saving, callbacks, mixed precision, XLA and a strategy scope."""
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf import pipeline
from albert_tf.errors import UserValueError
from albert_tf.keras_tasks import AlbertTextClassifier
from albert_tf.modeling.models import classifier_losses
from albert_tf.training import optimization
from tests.helpers import hf_models

TEXTS = ["a good film", "a bad film", "good, very good", "bad and boring", "so good",
         "truly bad", "good acting", "bad plot"]
LABELS = np.array([1, 0, 1, 0, 1, 0, 1, 0])


@pytest.mark.slow  # 17 s on AMD EPYC Zen 3: the default suite's 10 minutes
def test_hugging_face_heads_give_the_pipelines_scores(models):
    """from_pretrained and pipeline read one directory the same way (single-label,
    multi-label and regression heads)."""
    for name, problem in (("sentiment", "single_label_classification"),
                          ("multilabel", "multi_label_classification"),
                          ("regression", "regression")):
        classifier = albert_tf.from_pretrained(models[name])
        assert isinstance(classifier, AlbertTextClassifier)
        assert classifier.problem_type == problem
        logits = classifier.predict(TEXTS, verbose=0)
        scores = pipeline("text-classification", model=models[name], top_k=None)(TEXTS)
        for row, answers in zip(logits, scores):
            if problem == "regression":
                np.testing.assert_allclose(answers[0]["score"], row[0], rtol=1e-4, atol=1e-5)
                continue
            probabilities = (1 / (1 + np.exp(-row)) if problem.startswith("multi")
                             else np.exp(row) / np.exp(row).sum())
            got = {a["label"]: a["score"] for a in answers}
            want = dict(zip(classifier.labels, probabilities))
            assert got.keys() == want.keys()
            for label in got:
                np.testing.assert_allclose(got[label], want[label], rtol=1e-4, atol=1e-6)


@pytest.mark.slow  # 17 s on AMD EPYC Zen 3
def test_compile_defaults_are_the_original_optimizer_and_the_tasks_loss(models):
    classifier = albert_tf.from_pretrained(models["sentiment"])
    classifier.compile()
    classifier.fit(TEXTS, LABELS, batch_size=4, epochs=3, verbose=0)  # 6 steps
    optimizer = classifier.optimizer
    assert type(optimizer) is optimization.AdamWeightDecay
    assert optimizer.global_clipnorm == 1.0 and optimizer.weight_decay_rate == 0.01
    schedule = optimizer.learning_rate_schedule.schedule
    assert (schedule.init_lr, schedule.num_train_steps, schedule.num_warmup_steps) == (
        5e-5, 6, 0)
    assert int(optimizer.iterations) == 6
    # The loss Keras reports is run_classifier.py's on the same batch.
    features = classifier.preprocessor(TEXTS)
    want = classifier_losses({"logits": classifier(features)}, {"label_ids": LABELS})["loss"]
    got = classifier.evaluate(TEXTS, LABELS, batch_size=8, verbose=0, return_dict=True)
    np.testing.assert_allclose(got["loss"], float(want), rtol=1e-5)
    lamb = albert_tf.from_pretrained(models["sentiment"])
    lamb.compile(optimizer="lamb", learning_rate=1e-3, num_train_steps=100, warmup_steps=10)
    assert type(lamb.optimizer) is optimization.Lamb


@pytest.mark.slow  # 29 s on AMD EPYC Zen 3
def test_fit_learns_a_text_task_from_a_new_head(models):
    """A new head (the source is a masked LM) learns held-out words' sentiment."""
    keras.utils.set_random_seed(0)
    classifier = albert_tf.from_pretrained(models["mlm"], "text-classification",
                                           labels=["neg", "pos"], dropout=0.0)
    classifier.compile(learning_rate=1e-3)
    classifier.fit(TEXTS, ["pos" if y else "neg" for y in LABELS], batch_size=4, epochs=15,
                   verbose=0)
    held_out = ["good", "bad", "very good", "very bad"]
    predictions = classifier.predict(held_out, verbose=0).argmax(-1)
    assert predictions.tolist() == [1, 0, 1, 0]


@pytest.mark.slow  # 23 s on AMD EPYC Zen 3
def test_multi_label_and_regression_losses_are_run_classifiers(models):
    multi = albert_tf.from_pretrained(models["multilabel"])
    hot = np.eye(4, dtype=np.int64)[[0, 1, 2, 3, 0, 1, 2, 3]]
    hot[0, 2] = 1
    multi.compile()
    multi.fit(TEXTS, hot, batch_size=4, verbose=0)
    want = classifier_losses({"logits": multi(multi.preprocessor(TEXTS))}, {"label_ids": hot})
    got = multi.evaluate(TEXTS, hot, batch_size=8, verbose=0, return_dict=True)
    np.testing.assert_allclose(got["loss"], float(want["loss"]), rtol=1e-5)
    scores = np.linspace(0, 5, 8).astype(np.float32)
    regression = albert_tf.from_pretrained(models["regression"])
    regression.compile()
    regression.fit(TEXTS, scores, batch_size=4, verbose=0)
    want = classifier_losses({"logits": regression(regression.preprocessor(TEXTS))},
                             {"label_ids": scores})
    got = regression.evaluate(TEXTS, scores, batch_size=8, verbose=0, return_dict=True)
    np.testing.assert_allclose(got["loss"], float(want["loss"]), rtol=1e-5)
    predicted = regression.predict(TEXTS, verbose=0)[:, 0]
    np.testing.assert_allclose(got["pearson"], np.corrcoef(predicted, scores)[0, 1], rtol=1e-4)


@pytest.mark.slow  # 45 s on AMD EPYC Zen 3
def test_pairs_and_datasets(models):
    classifier = albert_tf.from_pretrained(models["mlm"], "text-classification", num_classes=3)
    classifier.compile()
    first, second = TEXTS[:4], TEXTS[4:]
    classifier.fit((first, second), [0, 1, 2, 1], batch_size=2, verbose=0)
    by_name = classifier.predict({"text": first, "text_pair": second}, verbose=0)
    np.testing.assert_allclose(classifier.predict((first, second), verbose=0), by_name)
    unbatched = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS))
    classifier.fit(unbatched, batch_size=4, verbose=0)  # batched here
    classifier.fit(unbatched.batch(3), verbose=0)
    np.testing.assert_allclose(classifier.predict(tf.data.Dataset.from_tensor_slices(TEXTS)
                                                  .batch(3), verbose=0),
                               classifier.predict(TEXTS, verbose=0), rtol=1e-5, atol=1e-6)
    features = classifier.preprocessor(TEXTS)  # token features skip the preprocessor
    np.testing.assert_allclose(classifier.predict({k: v.numpy() for k, v in features.items()},
                                                  verbose=0),
                               classifier.predict(TEXTS, verbose=0), rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # 32 s on AMD EPYC Zen 3
def test_keras_file_round_trip_predicts_the_same_and_keeps_training(models, tmp_path):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=24)
    classifier.compile()
    classifier.fit(TEXTS, LABELS, batch_size=4, epochs=2, verbose=0)
    path = str(tmp_path / "sentiment.keras")
    classifier.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, AlbertTextClassifier)
    assert loaded.labels == hf_models.SENTIMENT_LABELS
    assert loaded.preprocessor.sequence_length == 24
    np.testing.assert_array_equal(loaded.predict(TEXTS, verbose=0),
                                  classifier.predict(TEXTS, verbose=0))
    assert int(loaded.optimizer.iterations) == 4  # the optimizer's state came back too
    np.testing.assert_array_equal(loaded.optimizer.variables[-1].numpy(),
                                  classifier.optimizer.variables[-1].numpy())
    again = albert_tf.from_pretrained(path)  # a .keras file is a source too
    np.testing.assert_array_equal(again.predict(TEXTS, verbose=0),
                                  classifier.predict(TEXTS, verbose=0))


@pytest.mark.slow  # 24 s on AMD EPYC Zen 3
def test_standard_callbacks(models, tmp_path):
    classifier = albert_tf.from_pretrained(models["sentiment"])
    classifier.compile(learning_rate=1e-4, num_train_steps=40)
    best = str(tmp_path / "best.keras")
    weights = str(tmp_path / "ckpt-{epoch}.weights.h5")
    history = classifier.fit(
        TEXTS, LABELS, batch_size=4, epochs=20, validation_data=(TEXTS[:4], LABELS[:4]),
        verbose=0, callbacks=[
            keras.callbacks.ModelCheckpoint(best, save_best_only=True),
            keras.callbacks.ModelCheckpoint(weights, save_weights_only=True),
            keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=10.0),
            keras.callbacks.TensorBoard(str(tmp_path / "logs"))])
    assert len(history.history["loss"]) == 2  # stopped early: no epoch improves by 10
    assert os.path.exists(best) and os.path.exists(tmp_path / "ckpt-2.weights.h5")
    assert any(name.startswith("events") for _, _, files in os.walk(tmp_path / "logs")
               for name in files)
    restored = albert_tf.from_pretrained(models["sentiment"])
    restored.load_weights(str(tmp_path / "ckpt-2.weights.h5"))
    np.testing.assert_array_equal(restored.predict(TEXTS, verbose=0),
                                  classifier.predict(TEXTS, verbose=0))


class _StopAt(keras.callbacks.Callback):
    """Interrupts training as a crash would, after `batch` batches of epoch `epoch`."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.at, self.epoch = (epoch, batch), None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise KeyboardInterrupt


@pytest.mark.slow  # 29 s on AMD EPYC Zen 3
def test_backup_and_restore_resumes_an_interrupted_fit(models, tmp_path):
    """Interrupted mid-epoch, a rerun resumes from the last epoch's backup and ends where an
    uninterrupted fit ends (Keras restarts the interrupted epoch: with save_freq=N it
    restores mid-epoch weights but runs that epoch's batches again)."""
    def run(callbacks):
        keras.utils.set_random_seed(5)
        classifier = albert_tf.from_pretrained(models["sentiment"], dropout=0.0)
        classifier.compile(num_train_steps=12)
        classifier.fit(TEXTS, LABELS, batch_size=2, epochs=3, shuffle=False, verbose=0,
                       callbacks=callbacks)
        return classifier

    straight = run([])
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with pytest.raises(KeyboardInterrupt):
        run([backup, _StopAt(1, 1)])
    resumed = run([keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))])
    assert int(resumed.optimizer.iterations) == 12
    for mine, want in zip(resumed.get_weights(), straight.get_weights()):
        np.testing.assert_allclose(mine, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # 47 s on AMD EPYC Zen 3
def test_mixed_bfloat16_xla_and_a_strategy_scope(models):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        classifier = albert_tf.from_pretrained(models["sentiment"])
        assert classifier.network.encoder.dtype_policy.name == "mixed_bfloat16"
        classifier.compile()
        history = classifier.fit(TEXTS, LABELS, batch_size=4, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        assert classifier.predict(TEXTS[:2], verbose=0).dtype == np.float32
    finally:
        keras.mixed_precision.set_global_policy("float32")
    # No dropout: XLA and the plain graph draw different random masks.
    xla = albert_tf.from_pretrained(models["sentiment"], dropout=0.0)
    xla.compile(jit_compile=True)
    plain = albert_tf.from_pretrained(models["sentiment"], dropout=0.0)
    plain.compile(jit_compile=False)
    for model in (xla, plain):
        model.fit(TEXTS, LABELS, batch_size=4, shuffle=False, verbose=0)
    for a, b in zip(xla.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        mirrored = albert_tf.from_pretrained(models["sentiment"])
        mirrored.compile()
    mirrored.fit(TEXTS, LABELS, batch_size=4, verbose=0)
    assert int(mirrored.optimizer.iterations.numpy()) == 2


def test_bad_input_in_one_line(models):
    classifier = albert_tf.from_pretrained(models["sentiment"])
    classifier.compile()
    cases = [
        (lambda: classifier.fit(TEXTS), "fit and evaluate need labels"),
        (lambda: classifier.fit(TEXTS, LABELS[:3]), "8 texts but 3 labels"),
        (lambda: classifier.fit(TEXTS, np.full(8, 0.5)), "class ids 0..1, got 0.5"),
        (lambda: classifier.fit(TEXTS, np.full(8, 2)), "class id 2 is outside 0..1"),
        (lambda: classifier.fit(TEXTS, ["yes"] * 8), "'yes' is not one of \\['negative'"),
        (lambda: classifier.fit("one text", [1]), "x is one text"),
        (lambda: classifier.fit([1, 2], [0, 1]), "x must be texts \\(strings\\), got 1"),
        (lambda: albert_tf.from_pretrained(models["regression"]).fit(TEXTS, ["a"] * 8),
         "regression labels are numbers"),
        (lambda: albert_tf.from_pretrained(models["multilabel"]).fit(TEXTS, LABELS),
         "multi-hot rows of 4 0/1 values"),
        (lambda: albert_tf.from_pretrained(models["sentiment"], sequence_length=65),
         "sequence_length=65 is longer than the model's 64 positions"),
        (lambda: albert_tf.from_pretrained(models["mlm"], "text-classification"),
         "needs num_classes=K"),
        (lambda: albert_tf.from_pretrained(models["mlm"], "summarization"),
         "task 'summarization': one of"),
        (lambda: albert_tf.from_pretrained(models["mlm"], "text-classification",
                                           num_classes=2, colour="red"),
         "unknown option\\(s\\) colour"),
        (lambda: albert_tf.from_pretrained(os.path.dirname(models["mlm"])),
         "not a model from_pretrained reads"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message):
            call()


def test_an_official_directory_starts_a_classifier_on_its_encoder(models, official_spm,
                                                                   tmp_path):
    """An official download (TF1 checkpoint, albert_config.json, 30k-clean.model), as the
    demo's pretraining output is laid out: its encoder under a new head (and, with no task
    named, its own masked-LM head)."""
    directory = str(tmp_path / "official")
    pretrainer = hf_models.write_official_dir(directory, models["mlm"], official_spm)
    assert isinstance(albert_tf.from_pretrained(directory), albert_tf.AlbertMaskedLM)
    classifier = albert_tf.from_pretrained(directory, "text-classification", num_classes=3)
    assert classifier.preprocessor.sequence_length == 64  # max_position_embeddings
    for mine, theirs in zip(classifier.network.encoder.get_weights(),
                            pretrainer.encoder.get_weights()):
        np.testing.assert_array_equal(mine, theirs)
    assert classifier.predict(TEXTS[:2], verbose=0).shape == (2, 3)
