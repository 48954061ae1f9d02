"""The regression metric over a whole set, pairs given as rows, bytes texts, run directories
of other families refused, a pretraining run read as an official directory, a task object's
copy, a model saved before fit keeping its pending schedule, and one-line refusals."""
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.checkpoints import keras_hub
from albert_tf.errors import UserValueError
from albert_tf.keras_tasks.metrics import PearsonCorrelation
from albert_tf.training import run_dir
from tests.helpers import hf_models

TEXTS = ["a good film", "a bad film", "good, very good", "bad and boring"]


def test_pearson_is_over_the_whole_set_not_per_sample():
    rng = np.random.default_rng(0)
    labels, scores = rng.normal(size=40), rng.normal(size=40)
    scores += labels  # correlated
    metric = PearsonCorrelation()
    for start in range(0, 40, 16):  # three batches, the last one short
        metric.update_state(labels[start:start + 16], scores[start:start + 16, None])
    np.testing.assert_allclose(float(metric.result()), np.corrcoef(labels, scores)[0, 1],
                               rtol=1e-5)
    metric.reset_state()
    assert float(metric.result()) == 0.0


@pytest.mark.slow  # 22 s on AMD EPYC Zen 3: the default suite's 10 minutes
def test_pairs_as_rows_bytes_and_non_texts(models):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=24)
    columns = classifier.predict((TEXTS[:2], TEXTS[2:]), verbose=0)
    rows = classifier.predict([(TEXTS[0], TEXTS[2]), (TEXTS[1], TEXTS[3])], verbose=0)
    np.testing.assert_allclose(rows, columns, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(classifier.predict(["café"], verbose=0),
                               classifier.predict(["café".encode()], verbose=0), rtol=1e-6)
    for bad, message in ((["ok", None], "x must be texts \\(strings\\), got None"),
                         ((["ok"], [float("nan")]), "the second texts must be texts"),
                         ([b"caf\xe9"], "a bytes text is not UTF-8")):
        with pytest.raises(UserValueError, match=message):
            classifier.predict(bad, verbose=0)


def test_run_directories_of_other_families_without_an_export_are_refused(tmp_path):
    config = hf_models.small_config(64)
    record = run_dir.RunIdentity.of(run_dir.FINETUNING, "squad v2.0", config, metric="f1")
    (tmp_path / "albert_tf_run.json").write_text(json.dumps(record.to_json()))
    with pytest.raises(UserValueError, match="a run of 'squad v2.0' without an export/: "
                                             "from_pretrained reads run_classifier.py's, "
                                             "run_ner.py's and run_race.py's best weights, "
                                             "and any run's export"):
        albert_tf.from_pretrained(str(tmp_path))


def test_a_pretraining_run_is_read_as_an_official_directory(models, official_spm, tmp_path):
    directory = str(tmp_path / "pretrained")
    pretrainer = hf_models.write_official_dir(directory, models["mlm"], official_spm)
    record = run_dir.RunIdentity.of(run_dir.PRETRAINING, run_dir.PRETRAINING,
                                    pretrainer.config)
    with open(os.path.join(directory, "albert_tf_run.json"), "w") as handle:
        json.dump(record.to_json(), handle)
    classifier = albert_tf.from_pretrained(directory, "text-classification", num_classes=2)
    np.testing.assert_array_equal(classifier.network.encoder.get_weights()[0],
                                  pretrainer.encoder.get_weights()[0])


@pytest.mark.slow  # 14 s on AMD EPYC Zen 3
def test_a_task_objects_copy_trains_alone(models):
    original = albert_tf.from_pretrained(models["sentiment"], sequence_length=16)
    before = [w.copy() for w in original.get_weights()]
    copy = albert_tf.from_pretrained(original)
    copy.compile(learning_rate=1e-3)
    copy.fit(TEXTS, [1, 0, 1, 0], batch_size=2, verbose=0)
    for weight, kept in zip(original.get_weights(), before):
        np.testing.assert_array_equal(weight, kept)


@pytest.mark.slow  # 14 s on AMD EPYC Zen 3
def test_a_model_saved_before_fit_schedules_over_its_first_fit(models, tmp_path):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=16)
    classifier.compile(learning_rate=1e-3, warmup_steps=1)
    path = str(tmp_path / "unfit.keras")
    classifier.save(path)
    loaded = keras.saving.load_model(path)
    loaded.fit(TEXTS * 2, [1, 0, 1, 0] * 2, batch_size=2, epochs=2, shuffle=False, verbose=0)
    schedule = loaded.optimizer.learning_rate_schedule
    # The original's schedule over this fit's 8 steps (linear decay to 0 at step 8, the
    # first step warmed up), not the placeholder's 1-step one (0 from step 1 on).
    assert float(schedule(1)) == pytest.approx(1e-3 * 7 / 8, rel=1e-5)
    assert float(schedule(4)) == pytest.approx(1e-3 * 4 / 8, rel=1e-5)


def test_more_one_line_refusals(models, tmp_path):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=16)
    other = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    other.save(str(tmp_path / "other.keras"))
    regression = albert_tf.from_pretrained(models["regression"], sequence_length=16)
    cases = [
        (lambda: classifier.compile(num_train_steps=0), "num_train_steps must be at least 1"),
        (lambda: classifier.compile(num_train_steps=4, warmup_steps=9),
         "warmup_steps must be in \\[0, num_train_steps\\]"),
        (lambda: albert_tf.from_pretrained(models["sentiment"], dropout=1.5),
         "dropout must be in \\[0, 1\\)"),
        (lambda: albert_tf.from_pretrained(str(tmp_path / "other.keras")),
         "a Sequential, not a task model of albert_tf"),
        (lambda: regression.fit(TEXTS, np.zeros((4, 2))),
         "regression labels are one score per text, got shape \\[4, 2\\]"),
        (lambda: classifier.export(str(tmp_path / "e"), input_signature=[1]),
         "it takes no input_signature"),
        (lambda: classifier.export(str(tmp_path / "e"), formats="onnx"),
         "unknown option\\(s\\) formats"),
        (lambda: classifier.fit(tf.data.Dataset.from_tensor_slices((TEXTS, ["a"] * 4))),
         "a dataset of two strings is read as \\(text_a, text_b\\) pairs without labels"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message):
            call()


def test_keras_hub_files_of_the_wrong_shape(models, tmp_path):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=16)
    directory = str(tmp_path / "preset")
    classifier.save_to_preset(directory)
    keras_hub.write_preset(directory, classifier.config,
                           keras_hub.tf1_arrays(classifier.network.encoder),
                           classifier.preprocessor.write_vocabulary(str(tmp_path)))
    assert not os.path.exists(os.path.join(directory, "task.json"))  # a backbone now
    assert isinstance(albert_tf.from_pretrained(directory), albert_tf.AlbertFeatureExtractor)
    with open(os.path.join(directory, "task.json"), "w") as handle:
        json.dump([1, 2], handle)
    with pytest.raises(UserValueError, match="task.json: expected a JSON object, got list"):
        albert_tf.from_pretrained(directory)
