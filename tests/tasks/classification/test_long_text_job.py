"""--long_text=windows end to end (tiny model, a custom task made of the GoEmotions sample read
at 16 tokens a window): evaluation and prediction per text, and the SavedModel, the ONNX file
and the pipeline reading texts the same way as the job."""
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import errors, pipeline, tokenization
from albert_tf.config import AlbertConfig
from albert_tf.finetuning import FinetuningOptions
from albert_tf.tasks.classification import glue, long_text
from albert_tf.tasks.classification.job import ClassificationOptions, run_glue

CONFIG = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
RULE = long_text.LongText("windows", doc_stride=5, aggregation="max")


def options_for(data, out, spm, **changes):
    values = dict(task_name="custom", data_dir=str(data), spm_model_file=str(spm),
                  albert_config=CONFIG, max_seq_length=16, eval_batch_size=8,
                  predict_batch_size=8, long_text=RULE.mode, doc_stride=RULE.doc_stride,
                  window_aggregation=RULE.aggregation,
                  custom=glue.CustomTaskOptions("text", "label", id_column="id"),
                  export_dir=str(out / "export"), export_format=("saved_model", "onnx"),
                  finetuning=FinetuningOptions(output_dir=str(out), do_train=True, do_eval=True,
                                               do_predict=True, train_batch_size=16,
                                               learning_rate=3e-3, train_step=30,
                                               warmup_step=5, save_checkpoints_steps=30,
                                               iterations_per_loop=10, seed=3))
    values.update(changes)
    return ClassificationOptions(**values)


@pytest.fixture(scope="module")
def run(shared_data, tmp_path_factory):
    source = shared_data / "multilabel" / "goemotions"
    spm = shared_data / "spm" / "albert_style_pd8k.model"
    if not (source / "train.tsv").exists() or not spm.exists():
        pytest.skip(f"{source} or {spm} not found")
    root = tmp_path_factory.mktemp("windows")
    data, out = root / "data", root / "out"
    data.mkdir()
    rows = [line.split("\t") for line in
            (source / "dev.tsv").read_text(encoding="utf-8").splitlines()
            + (source / "train.tsv").read_text(encoding="utf-8").splitlines()[:400]
            if not line.startswith('"')]  # the custom TSV reader keeps quotes as text
    # Neutral (27) or not: a binary single-label task.
    for name, part in (("train", rows[500:]), ("dev", rows[:150]), ("test", rows[150:200])):
        (data / f"{name}.tsv").write_text("text\tlabel\tid\n" + "".join(
            f"{text}\t{'neutral' if ids == '27' else 'emotion'}\t{guid}\n"
            for text, ids, guid in part), encoding="utf-8")
    options = options_for(data, out, spm)
    results = run_glue(options)
    test = glue.read_custom_examples(options.custom, str(data), "test")
    return {"results": results, "out": out, "test": test, "options": options,
            "spm": spm, "data": data}


def window_counts(run):
    tokenizer = tokenization.load_tokenizer(spm_model_file=str(run["spm"]))
    ids = tokenizer.encode_ids([tokenizer.preprocess(e.text_a) for e in run["test"]])
    return [len(long_text.window_starts(len(row), 14, 5)) for row in ids]


def test_evaluation_and_prediction_are_per_text(run):
    counts = window_counts(run)
    assert max(counts) > 2 and min(counts) == 1  # long and short texts both
    best = json.loads((run["out"] / "best_eval.json").read_text())
    assert best["eval_examples"] == 150
    probabilities = np.loadtxt(run["out"] / "test_results.tsv")
    assert probabilities.shape == (50, 2)
    submission = (run["out"] / "submit_results.tsv").read_text().splitlines()[1:]
    assert [line.split("\t")[0] for line in submission] == [e.guid for e in run["test"]]


def test_the_exports_read_texts_as_the_job(run):
    import tensorflow_text  # noqa: F401
    out, test = run["out"], run["test"]
    expected = np.loadtxt(out / "test_results.tsv")
    served = tf.saved_model.load(str(out / "export")).signatures["serving_default"](
        text_a=tf.constant([e.text_a for e in test]))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=2e-5)
    assert served["num_windows"].numpy().tolist() == window_counts(run)
    record = json.loads((out / "export" / "albert_tf_export.json").read_text())
    assert (record["long_text"], record["doc_stride"], record["window_aggregation"]) == \
        ("windows", 5, "max")
    labels = record["labels"]
    for model in (out / "export", out / "export" / "model.onnx"):
        classify = pipeline("text-classification", model=str(model))
        answers = classify([e.text_a for e in test], top_k=None)
        got = np.array([[{a["label"]: a["score"] for a in answer}[name] for name in labels]
                        for answer in answers])
        # Windows batched differently from the job's: float32 rounding of the same sums.
        np.testing.assert_allclose(got, expected, atol=1e-4)
    # Told to truncate, the pipeline reads each text's first window only (and says so
    # for a text too long).
    classify = pipeline("text-classification", model=str(out / "export" / "model.onnx"))
    with pytest.raises(errors.UserValueError, match="the model reads 16: pass truncation=True, "
                                                    "or long_text='windows' or 'head_tail'"):
        classify(test[int(np.argmax(window_counts(run)))].text_a, long_text="truncate")


def test_pairs_and_a_stride_longer_than_a_window_are_refused(run, tmp_path):
    data = tmp_path / "pairs"
    data.mkdir()
    for name in ("train", "dev"):
        (data / f"{name}.tsv").write_text("a\tb\tlabel\nx\ty\tp\nz\tw\tq\n")
    options = options_for(data, tmp_path / "out", run["spm"],
                          custom=glue.CustomTaskOptions("a", "label", text_b_column="b"))
    with pytest.raises(errors.UserValueError, match="--long_text=windows reads single-text "
                                                    "tasks; custom is a sentence-pair task"):
        run_glue(options)
    with pytest.raises(ValueError, match="--doc_stride 15 exceeds the 14 text tokens"):
        run_glue(options_for(run["data"], tmp_path / "out2", run["spm"], doc_stride=15))
