"""`AlbertSentenceEmbedder`: fit on scored pairs leaves run_embeddings.py's weights (CoSENT);
its rows are the CLI's; the ranking and SimCSE losses train; predict pools as the network;
score is run_embeddings.py's correlation; bad input gets one line."""
import shutil

import keras
import numpy as np
import pytest

import albert_tf
from albert_tf import tokenization
from albert_tf.errors import UserValueError
from albert_tf.tasks.embeddings import datasets, features as embedding_features
from albert_tf.tasks.embeddings.job import EmbeddingJob, EmbeddingOptions
from albert_tf.tasks.embeddings.metrics import cosine_similarities, similarity_metrics
from tests.helpers.hf_models import small_config, write_hf_dir

LENGTH, BATCH, STEPS = 32, 8, 3
PAIRS = (["A man plays a guitar.", "A dog runs in the park.", "The sun is bright."],
         ["Someone plays music.", "A cat sleeps on a sofa.", "It is a sunny day."])


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory, official_spm):
    return write_hf_dir(str(tmp_path_factory.mktemp("hf") / "mlm"), "masked_lm", official_spm,
                        seed=7)


@pytest.fixture(scope="module")
def embedder(mlm_dir):
    return albert_tf.from_pretrained(mlm_dir, "sentence-embedding", sequence_length=LENGTH,
                                     pooling="mean,cls", normalize=True)


@pytest.mark.slow  # 18 s on AMD EPYC Zen 3: a CLI run with its export
def test_cosent_fit_leaves_the_cli_weights(tmp_path, shared_data, official_spm, mlm_dir):
    source = shared_data / "glue" / "STS-B"
    if not (source / "train_sample.tsv").exists():
        pytest.skip(f"{source} not found")
    (tmp_path / "data" / "STS-B").mkdir(parents=True)
    shutil.copy(source / "train_sample.tsv", tmp_path / "data" / "STS-B" / "train.tsv")
    config = small_config(64)
    job = EmbeddingJob(EmbeddingOptions(
        task_name="sts-b", data_dir=str(tmp_path / "data"), spm_model_file=official_spm,
        albert_config=config, max_seq_length=LENGTH, output_dir=str(tmp_path / "run"),
        do_train=True, do_eval=False, init_checkpoint=mlm_dir, train_batch_size=BATCH,
        learning_rate=1e-3, train_step=STEPS, warmup_step=1, save_checkpoints_steps=STEPS,
        iterations_per_loop=STEPS, optimizer="adamw", seed=3, pooling="mean,cls",
        normalize=True, export_dir=str(tmp_path / "run" / "export")))
    trained = job.run()["model"]
    batches = list(job.train_dataset(None).take(STEPS).as_numpy_iterator())
    examples = datasets.read_stsb(str(tmp_path / "data"), "train")
    tokenizer = tokenization.load_tokenizer(spm_model_file=official_spm)
    packed = embedding_features.convert_examples(examples, tokenizer, LENGTH)
    row_of = {tuple(ids) + tuple(other): i for i, (ids, other) in enumerate(
        zip(packed["input_ids_a"].tolist(), packed["input_ids_b"].tolist()))}
    order = [row_of[tuple(a) + tuple(b)] for batch in batches
             for a, b in zip(batch["input_ids_a"].tolist(), batch["input_ids_b"].tolist())]

    embedder = albert_tf.from_pretrained(mlm_dir, "sentence-embedding", sequence_length=LENGTH,
                                         pooling="mean,cls", normalize=True)
    texts = ([examples[i].text_a for i in order], [examples[i].text_b for i in order])
    mine = embedder.packed(texts)
    for name in ("input_ids_a", "input_mask_a", "input_ids_b"):  # the CLI's rows
        np.testing.assert_array_equal(mine[name], np.concatenate([b[name] for b in batches]))
    embedder.compile(optimizer="adamw", learning_rate=1e-3, num_train_steps=STEPS,
                     warmup_steps=1)
    embedder.fit(texts, [examples[i].score for i in order], batch_size=BATCH, shuffle=False,
                 verbose=0)
    compared = 0
    for weight, theirs in zip(embedder.network.weights, trained.weights):
        if "pooler" in weight.path:  # unused by mean / cls pooling; see the tagger's test
            continue
        np.testing.assert_allclose(weight.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=weight.path)
        compared += 1
    assert compared > 10
    # The run directory is a source, through its export: the CLI's weights and pooling.
    from_run = albert_tf.from_pretrained(str(tmp_path / "run"))
    assert tuple(from_run.network.pooling) == ("cls", "mean") and from_run.network.normalize
    for weight, theirs in zip(from_run.network.weights, trained.weights):
        np.testing.assert_array_equal(weight.numpy(), theirs.numpy(), err_msg=weight.path)


def test_predict_pools_as_the_network_and_score_is_run_embeddings(embedder):
    vectors = embedder.predict(PAIRS[0], verbose=0)
    assert vectors.shape == (3, 2 * embedder.config.hidden_size)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)  # normalize
    features = embedder.packed(PAIRS[0])
    want = embedder.network({"input_ids": features["input_ids_a"],
                             "input_mask": features["input_mask_a"],
                             "segment_ids": np.zeros_like(features["input_ids_a"])})
    np.testing.assert_allclose(vectors, want["embedding"], rtol=1e-5, atol=1e-6)
    scores = [4.0, 0.5, 3.0]
    got = embedder.score(PAIRS, scores, verbose=0)
    expected = similarity_metrics(cosine_similarities(
        vectors, embedder.predict(PAIRS[1], verbose=0)), np.asarray(scores))
    assert got == pytest.approx(expected)


@pytest.mark.parametrize("kind", ["ranking", "triplets"])
def test_the_ranking_losses_train_and_a_saved_embedder_embeds_the_same(mlm_dir, tmp_path, kind):
    keras.utils.set_random_seed(0)
    embedder = albert_tf.from_pretrained(mlm_dir, "sentence-embedding", sequence_length=LENGTH)
    x = {"ranking": PAIRS, "triplets": PAIRS + (PAIRS[1][::-1],)}[kind]
    embedder.compile(learning_rate=1e-3)
    history = embedder.fit(x, epochs=2, batch_size=3, verbose=0).history
    assert np.isfinite(history["loss"]).all()
    path = str(tmp_path / "embedder.keras")
    embedder.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(PAIRS[0], verbose=0),
                               embedder.predict(PAIRS[0], verbose=0), rtol=1e-6, atol=1e-6)


def test_bad_input_gets_one_line(embedder):
    cases = [
        (lambda: embedder.fit(PAIRS, [1.0]), "3 pairs but 1 scores"),
        (lambda: embedder.fit(PAIRS[0], [1.0, 2.0, 3.0]), "scores go with pairs"),
        (lambda: embedder.fit("one text"), "x is one text"),
        (lambda: embedder.fit((PAIRS[0], PAIRS[1][:2])), "text columns of different lengths"),
        (lambda: embedder.evaluate(PAIRS[0]), "evaluate takes pairs"),
        (lambda: embedder.fit(PAIRS[0]), "SimCSE, which needs dropout"),
        (lambda: embedder.predict(PAIRS), "predict embeds a list of texts"),
        (lambda: albert_tf.from_pretrained(embedder, pooling="sum"), "sum"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message):
            call()


@pytest.mark.slow  # ~15 s on AMD EPYC Zen 3: a SavedModel, ONNX and its int8 check
def test_export_embeds_as_predict_in_every_file(embedder, tmp_path):
    export_dir = str(tmp_path / "exported")
    results = embedder.export(export_dir, format=("saved_model", "onnx"), int8=True,
                              check_data=PAIRS[0] + PAIRS[1])
    assert results["int8_agreement"]["model.int8.onnx"] > 0.9
    want = embedder.predict(PAIRS[0], verbose=0)
    for model in (export_dir, results["onnx"], results["sentence_transformers_dir"]):
        got = np.asarray(albert_tf.pipeline("sentence-embedding", model=model)(PAIRS[0]))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # The sentence-transformers directory is a source too, with its pooling.
    again = albert_tf.from_pretrained(results["sentence_transformers_dir"])
    assert isinstance(again, albert_tf.AlbertSentenceEmbedder)
    assert tuple(again.network.pooling) == tuple(embedder.network.pooling) == ("cls", "mean")
    assert again.network.normalize
    np.testing.assert_allclose(again.predict(PAIRS[0], verbose=0), want, rtol=1e-4, atol=1e-5)
    from_export = albert_tf.from_pretrained(export_dir)  # the export itself too
    assert tuple(from_export.network.pooling) == ("cls", "mean")
    np.testing.assert_array_equal(from_export.predict(PAIRS[0], verbose=0), want)
