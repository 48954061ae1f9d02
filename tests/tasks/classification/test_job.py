"""run_glue in process: STS-B regression end to end, and the custom task's job path."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.finetuning import FinetuningOptions
from albert_tf.tasks.classification import glue, metrics as glue_metrics
from albert_tf.tasks.classification.job import ClassificationOptions, run_glue

CONFIG = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=32)


@pytest.fixture(scope="module")
def spm(shared_data):
    path = shared_data / "spm" / "albert_style_pd8k.model"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return str(path)


@pytest.mark.slow  # 28 s
def test_stsb_regression_train_eval_predict_export(shared_data, spm, tmp_path):
    source = shared_data / "glue" / "STS-B"
    data = tmp_path / "data" / "STS-B"
    data.mkdir(parents=True)
    (data / "train.tsv").symlink_to(source / "train_sample.tsv")
    (data / "dev.tsv").symlink_to(source / "dev_sample.tsv")
    # The GLUE test file has the same columns minus the score.
    rows = (source / "dev_sample.tsv").read_text(encoding="utf-8").splitlines()[1:9]
    (data / "test.tsv").write_text("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2"
                                   "\tsentence1\tsentence2\n" + "".join(
                                       "\t".join(r.split("\t")[:9]) + "\n" for r in rows))
    out = tmp_path / "out"
    options = ClassificationOptions(
        task_name="sts-b", data_dir=str(tmp_path / "data"), spm_model_file=spm,
        albert_config=CONFIG, max_seq_length=32, eval_batch_size=8, predict_batch_size=4,
        export_dir=str(out / "export"), export_format=("saved_model", "onnx"),
        finetuning=FinetuningOptions(output_dir=str(out), do_train=True, do_eval=True,
                                     do_predict=True, train_batch_size=8, learning_rate=1e-3,
                                     train_step=10, warmup_step=2, save_checkpoints_steps=5,
                                     iterations_per_loop=5, seed=4))
    results = run_glue(options)

    best = json.loads((out / "best_eval.json").read_text())
    assert set(best) >= {"pearson", "spearman", "MSE", "eval_loss", "global_step"}
    assert "collapsed" not in best  # no collapse check for regression
    evals = (out / "eval_results.txt").read_text()
    pearsons = [float(l.split(" = ")[1]) for l in evals.splitlines() if l.startswith("pearson")]
    assert len(pearsons) == 2 and best["pearson"] == max(pearsons)  # best by pearson

    scores = np.loadtxt(out / "test_results.tsv").reshape(-1)
    assert scores.shape == (8,)
    submission = (out / "STS-B.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction"
    assert [l.split("\t")[0] for l in submission[1:]] == [r.split("\t")[0] for r in rows]
    np.testing.assert_allclose([float(l.split("\t")[1]) for l in submission[1:]], scores,
                               rtol=1e-6)

    # The dev metrics equal the NumPy definitions on the best model's dev predictions.
    dev = glue.read_examples(glue.TASKS["sts-b"], str(tmp_path / "data"), "dev")
    loaded = tf.saved_model.load(results["export_dir"])
    served = loaded.signatures["serving_default"](
        text_a=tf.constant([e.text_a for e in dev]), text_b=tf.constant([e.text_b for e in dev]))
    predicted = served["predictions"].numpy()
    assert served["predictions"].dtype == tf.float32
    labels = [e.label for e in dev]
    # The barely trained model's scores are nearly constant, which makes Pearson sensitive
    # to float rounding between batch sizes: compare it loosely, MSE tightly.
    assert best["pearson"] == pytest.approx(glue_metrics.pearson(predicted, labels), abs=5e-3)
    assert best["MSE"] == pytest.approx(np.mean((predicted - labels) ** 2), rel=1e-4)

    test = glue.read_examples(glue.TASKS["sts-b"], str(tmp_path / "data"), "test")
    served_test = loaded.signatures["serving_default"](
        text_a=tf.constant([e.text_a for e in test]),
        text_b=tf.constant([e.text_b for e in test]))
    np.testing.assert_allclose(served_test["probabilities"].numpy()[:, 0], scores, atol=1e-5)

    # model.onnx (regression): `predictions` is the score, on the Python features.
    onnxruntime = pytest.importorskip("onnxruntime")
    from albert_tf import tokenization
    features = glue.convert_examples(test, tokenization.FullTokenizer(spm_model_file=spm),
                                     32, None)
    session = onnxruntime.InferenceSession(str(out / "export" / "model.onnx"))
    onnx_scores, = session.run(["predictions"], {k: features[k] for k in
                                                  ("input_ids", "input_mask", "segment_ids")})
    np.testing.assert_allclose(onnx_scores, scores, atol=1e-5)

    # The export describes itself: the pipeline serves it and gives the job's test scores.
    from albert_tf import pipeline

    record = json.loads((out / "export" / "albert_tf_export.json").read_text())
    assert record["task"] == "classifier" and record["vocabulary_file"] == os.path.basename(spm)
    for model in (results["export_dir"], str(out / "export" / "model.onnx")):
        regress = pipeline("text-classification", model=model, truncation=True)
        served = regress([{"text": e.text_a, "text_pair": e.text_b} for e in test], top_k=None)
        np.testing.assert_allclose([r[0]["score"] for r in served], scores, atol=1e-5)


def test_custom_task_job_eval_and_predict(spm, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "dev.csv").write_text("text,tag\n\"good, very good\",pos\nbad,neg\nfine,pos\n")
    (data / "test.csv").write_text("text\nokay\nterrible\n")
    out = tmp_path / "out"
    options = ClassificationOptions(
        task_name="custom", data_dir=str(data), spm_model_file=spm, albert_config=CONFIG,
        max_seq_length=16, eval_batch_size=2, predict_batch_size=2,
        custom=glue.CustomTaskOptions(text_a_column="text", label_column="tag"),
        finetuning=FinetuningOptions(output_dir=str(out), do_eval=True, do_predict=True,
                                     init_checkpoint=None, seed=1))
    with pytest.raises(FileNotFoundError, match="nothing to evaluate"):
        run_glue(options)  # no training, no checkpoint: refuses to evaluate random weights
    options.do_train = True
    options.train_step = 2
    options.save_checkpoints_steps = 2
    options.train_batch_size = 2
    (data / "train.csv").write_text("text,tag\nnice,pos\nawful,neg\n")
    results = run_glue(options)
    assert results["eval"]["eval_examples"] == 3
    assert 0.0 <= results["eval"]["eval_accuracy"] <= 1.0
    assert isinstance(results["eval"]["collapsed"], bool)
    submission = (out / "submit_results.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 3
    assert {l.split("\t")[1] for l in submission[1:]} <= {"neg", "pos"}
    assert [l.split("\t")[0] for l in submission[1:]] == ["test-0", "test-1"]
    # No GLUE leaderboard file for a custom task.
    assert sorted(p.name for p in out.glob("*.tsv")) == ["submit_results.tsv",
                                                         "test_results.tsv"]
