"""The two doors agree: `fit` on raw text leaves the weights run_classifier.py's job leaves,
after the same steps on the same batches (the original's AdamW, warmup and decay, global-norm
clipping at 1.0; dropout 0; one seed)."""
import csv

import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.finetuning import FinetuningOptions
from albert_tf.tasks.classification import glue
from albert_tf.tasks.classification.job import ClassificationJob, ClassificationOptions
from tests.helpers.hf_models import small_config, write_hf_dir

STEPS, BATCH, LENGTH = 4, 8, 32


@pytest.fixture(scope="module")
def sst2_rows(shared_data):
    path = shared_data / "glue" / "SST-2" / "dev.tsv"
    if not path.exists():
        pytest.skip(f"{path} not found")
    with open(path, encoding="utf-8") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    unique = {}
    for text, label in rows:
        unique.setdefault(text, label)
    return list(unique.items())[:STEPS * BATCH]


def cli_job(tmp_path, hf_dir, spm, rows, **exported):
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "train.tsv", "w", encoding="utf-8") as handle:
        handle.write("sentence\tlabel\n")
        handle.writelines(f"{text}\t{label}\n" for text, label in rows)
    options = ClassificationOptions(
        task_name="custom", data_dir=str(data), spm_model_file=spm,
        albert_config=small_config(64), max_seq_length=LENGTH, classifier_dropout=0.0,
        custom=glue.CustomTaskOptions(text_a_column="sentence", label_column="label"),
        **exported,
        finetuning=FinetuningOptions(output_dir=str(tmp_path / "run"), do_train=True,
                                     init_checkpoint=str(hf_dir), train_batch_size=BATCH,
                                     learning_rate=1e-3, train_step=STEPS, warmup_step=1,
                                     save_checkpoints_steps=STEPS, iterations_per_loop=STEPS,
                                     optimizer="adamw", seed=3))
    return ClassificationJob(options)


def test_fit_on_raw_text_leaves_the_cli_weights(tmp_path, shared_data, sst2_rows):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    hf_dir = write_hf_dir(str(tmp_path / "hf"), "classifier", spm, labels=["0", "1"])
    job = cli_job(tmp_path, hf_dir, spm, sst2_rows)
    labels = job.spec.labels  # the custom task's label order
    trained = job.run()["model"]
    # The CLI's batches, in its shuffled order: the run seeded TensorFlow (the global seed
    # beside the dataset's own makes the order), and that seed is still set.
    cli_batches = list(job.train_dataset(None).take(STEPS).as_numpy_iterator())

    classifier = albert_tf.from_pretrained(hf_dir, sequence_length=LENGTH, dropout=0.0)
    texts = [text for text, _ in sst2_rows]
    features = classifier.preprocessor(tf.constant(texts))["input_ids"].numpy()
    row_of = {tuple(ids): i for i, ids in enumerate(features)}
    assert len(row_of) == len(texts)
    # Every CLI feature is the preprocessor's feature of one text: the same token ids.
    order = [row_of[tuple(ids)] for batch in cli_batches for ids in batch["input_ids"]]
    assert sorted(order) == list(range(len(texts)))
    cli_labels = np.concatenate([batch["label_ids"] for batch in cli_batches])
    assert [labels[i] for i in cli_labels] == [sst2_rows[i][1] for i in order]

    classifier.compile(optimizer="adamw", learning_rate=1e-3, num_train_steps=STEPS,
                       warmup_steps=1)
    classifier.fit([texts[i] for i in order], cli_labels, batch_size=BATCH, shuffle=False,
                   verbose=0)
    ours = classifier.network.get_weights()
    theirs = trained.get_weights()
    assert len(ours) == len(theirs)
    start = albert_tf.from_pretrained(hf_dir).network.get_weights()
    moved = 0
    for mine, cli, initial in zip(ours, theirs, start):
        np.testing.assert_allclose(mine, cli, rtol=1e-5, atol=1e-6)
        moved += not np.array_equal(mine, initial)
    assert moved > len(ours) // 2  # training changed the weights (not a no-op compared)


@pytest.mark.slow  # ~30 s on AMD EPYC Zen 3: a CLI run with its export
def test_a_run_directory_is_a_source(tmp_path, shared_data, sst2_rows):
    """from_pretrained(run_dir): the run's best weights, labels, vocabulary and length (from
    its export), predicting as the pipeline over the run's export does; without an export
    it needs vocabulary_file, in one line."""
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    hf_dir = write_hf_dir(str(tmp_path / "hf"), "classifier", spm, labels=["0", "1"])
    job = cli_job(tmp_path, hf_dir, spm, sst2_rows, export_dir=str(tmp_path / "run" / "export"))
    job.options.do_eval = False
    job.run()
    classifier = albert_tf.from_pretrained(str(tmp_path / "run"))
    assert classifier.labels == list(job.spec.labels)
    assert classifier.preprocessor.sequence_length == LENGTH
    texts = [text for text, _ in sst2_rows[:6]]
    logits = classifier.predict(texts, verbose=0)
    answers = albert_tf.pipeline("text-classification", model=str(tmp_path / "run" / "export"),
                                 top_k=None)(texts, truncation=True)
    for row, answer in zip(logits, answers):
        probabilities = np.exp(row) / np.exp(row).sum()
        got = {a["label"]: a["score"] for a in answer}
        for label, value in zip(classifier.labels, probabilities):
            np.testing.assert_allclose(got[label], value, rtol=1e-4, atol=1e-6)
    import shutil

    shutil.rmtree(tmp_path / "run" / "export")
    with pytest.raises(albert_tf.errors.UserValueError, match="give vocabulary_file="):
        albert_tf.from_pretrained(str(tmp_path / "run"))
    again = albert_tf.from_pretrained(str(tmp_path / "run"), vocabulary_file=spm,
                                      sequence_length=LENGTH)
    np.testing.assert_allclose(again.predict(texts, verbose=0), logits, rtol=1e-5, atol=1e-6)

