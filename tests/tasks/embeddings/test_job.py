"""run_embeddings end to end on the shared STS-B sample (tiny model): the reported Spearman is
SciPy's over the exported model's embeddings, the exports and the pipeline give the model's
embeddings, and the ranking and SimCSE losses train from custom files."""
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import errors, pipeline
from albert_tf.config import AlbertConfig
from albert_tf.export import portable
from albert_tf.tasks.embeddings import __main__ as evaluate_command
from albert_tf.tasks.embeddings import datasets
from albert_tf.tasks.embeddings.job import EmbeddingOptions, run_embeddings

stats = pytest.importorskip("scipy.stats")
CONFIG = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


def options(data, out, spm, **changes):
    values = dict(task_name="sts-b", data_dir=str(data), spm_model_file=str(spm),
                  albert_config=CONFIG, max_seq_length=32, eval_batch_size=8,
                  predict_batch_size=8, output_dir=str(out), do_train=True, do_eval=True,
                  train_batch_size=16, learning_rate=1e-3, train_step=20, warmup_step=2,
                  save_checkpoints_steps=10, iterations_per_loop=10, seed=1)
    values.update(changes)
    return EmbeddingOptions(**values)


@pytest.fixture(scope="module")
def spm(shared_data):
    path = shared_data / "spm" / "albert_style_pd8k.model"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture(scope="module")
def run(shared_data, spm, tmp_path_factory):
    source = shared_data / "glue" / "STS-B"
    root = tmp_path_factory.mktemp("sts")
    data, out = root / "data", root / "out"
    (data / "STS-B").mkdir(parents=True)
    shutil.copy(source / "train_sample.tsv", data / "STS-B" / "train.tsv")
    shutil.copy(source / "dev_sample.tsv", data / "STS-B" / "dev.tsv")
    rows = (source / "dev_sample.tsv").read_text(encoding="utf-8").splitlines()
    (data / "STS-B" / "test.tsv").write_text(
        "".join("\t".join(row.split("\t")[:9]) + "\n" for row in rows[:21]), encoding="utf-8")
    run_options = options(data, out, spm, pooling="mean,cls", normalize=True, do_predict=True,
                          export_dir=str(out / "export"), export_format=("saved_model", "onnx"))
    results = run_embeddings(run_options)
    return {"results": results, "data": data, "out": out,
            "dev": datasets.read_stsb(str(data), "dev")}


def saved_model_embeddings(out, texts):
    import tensorflow_text  # noqa: F401
    loaded = tf.saved_model.load(str(out / "export"))
    return loaded.signatures["serving_default"](text=tf.constant(texts))["embedding"].numpy()


def test_reported_spearman_is_scipys_over_the_exported_models_embeddings(run):
    best = json.loads((run["out"] / "best_eval.json").read_text())
    dev = run["dev"]
    a = saved_model_embeddings(run["out"], [e.text_a for e in dev])
    b = saved_model_embeddings(run["out"], [e.text_b for e in dev])
    assert a.shape == (30, 64)  # mean + cls of 32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, rtol=1e-5)
    cosines = (a * b).sum(axis=1)
    gold = [e.score for e in dev]
    assert best["spearman"] == pytest.approx(stats.spearmanr(cosines, gold).statistic, abs=1e-6)
    assert best["pearson"] == pytest.approx(stats.pearsonr(cosines, gold).statistic, abs=1e-5)
    assert best["eval_examples"] == 30


def test_the_evaluate_command_scores_a_similarities_file(run, tmp_path, capsys):
    dev = run["dev"]
    a = saved_model_embeddings(run["out"], [e.text_a for e in dev])
    b = saved_model_embeddings(run["out"], [e.text_b for e in dev])
    path = tmp_path / "similarities.tsv"
    path.write_text("index\tsimilarity\n" + "".join(
        f"{e.guid}\t{float(s)!r}\n" for e, s in zip(dev, (a * b).sum(axis=1))))
    status = evaluate_command.main(["evaluate", "--task_name", "sts-b", "--data_dir",
                                    str(run["data"]), "--prediction_file", str(path)])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert status == 0
    best = json.loads((run["out"] / "best_eval.json").read_text())
    assert result["spearman"] == pytest.approx(best["spearman"], abs=1e-6)
    path.write_text("index\tsimilarity\n" + f"{dev[0].guid}\tclose\n")
    assert evaluate_command.main(["evaluate", "--task_name", "sts-b", "--data_dir",
                                  str(run["data"]), "--prediction_file", str(path)]) == 2
    assert "similarities.tsv:2: expected index<TAB>similarity" in capsys.readouterr().err


def test_exports_pipeline_and_predictions_agree(run):
    out = run["out"]
    texts = [e.text_a for e in run["dev"][:8]]
    want = saved_model_embeddings(out, texts)
    for model in (out / "export", out / "export" / "model.onnx",
                  out / "export" / "sentence-transformers"):
        got = pipeline("sentence-embedding", model=str(model))(texts)
        np.testing.assert_allclose(got, want, atol=2e-5, err_msg=str(model))
    record = json.loads((out / "export" / "albert_tf_export.json").read_text())
    assert (record["task"], record["pooling"], record["normalize"]) == \
        ("sentence_embedding", ["cls", "mean"], True)
    lines = (out / "similarities.tsv").read_text().splitlines()
    assert lines[0] == "index\tsimilarity" and len(lines) == 21
    assert not (out / "test_metrics.json").exists()  # STS-B's test file has no scores
    with pytest.raises(errors.UserError, match="the export pools in the model"):
        pipeline("sentence-embedding", model=str(out / "export"))(texts, pooling="max")
    assert portable  # (imported for the ONNX runner the pipeline uses)


@pytest.mark.parametrize("files, loss", [
    ({"train.tsv": "q\tp\tn\n" + "".join(f"text {i} a\ttext {i} b\tother {i}\n"
                                           for i in range(24))}, "ranking"),
    ({"train.txt": "".join(f"a plain sentence number {i}\n" for i in range(24))}, "simcse"),
])
def test_ranking_and_simcse_train_from_custom_files(spm, tmp_path, files, loss):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "dev.tsv").write_text("q\tp\tscore\n" + "".join(
        f"text {i} a\ttext {i % 3} b\t{i % 3}\n" for i in range(9)))
    columns = datasets.EmbeddingColumns("q", "p", "score", "n")
    config = AlbertConfig.from_dict(dict(CONFIG.to_dict(), hidden_dropout_prob=0.1))
    if loss == "simcse":  # two dropout masks make the positive: none, nothing to learn
        with pytest.raises(errors.UserError, match="--loss=simcse needs dropout"):
            run_embeddings(options(tmp_path, tmp_path / "out0", spm, task_name="custom",
                                   columns=columns))
    results = run_embeddings(options(tmp_path, tmp_path / "out", spm, task_name="custom",
                                     columns=columns, train_step=6, albert_config=config,
                                     save_checkpoints_steps=6, iterations_per_loop=6))
    assert np.isfinite(results["best"]["spearman"])
    assert json.loads((tmp_path / "out" / "albert_tf_run.json").read_text())["task"] == \
        "embeddings custom"
    with pytest.raises(errors.UserError, match="--loss=cosent trains on pairs with scores"):
        run_embeddings(options(tmp_path, tmp_path / "out2", spm, task_name="custom",
                               columns=columns, loss="cosent"))


def test_lcqmc_trains_with_the_chinese_wordpiece_vocabulary(shared_data, tmp_path):
    vocab = shared_data / "chinese" / "vocab" / "vocab_chinese.txt"
    if not vocab.exists():
        pytest.skip(f"{vocab} not found")
    pairs = [("今天天气怎么样", "今天天气如何", 1), ("我想买手机", "推荐一款手机", 1),
             ("北京是首都", "上海在南方", 0), ("他喜欢篮球", "她讨厌下雨", 0)]
    for split, repeat in (("train", 6), ("dev", 2)):
        (tmp_path / f"{split}.tsv").write_text("".join(
            f"{a}\t{b}\t{label}\n" for a, b, label in pairs * repeat), encoding="utf-8")
    config = AlbertConfig(vocab_size=21128, embedding_size=16, hidden_size=32,
                          num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=64)
    out = tmp_path / "out"
    results = run_embeddings(options(tmp_path, out, None, task_name="lcqmc", spm_model_file=None,
                                     vocab_file=str(vocab), albert_config=config, train_step=6,
                                     save_checkpoints_steps=6, iterations_per_loop=6))
    best = json.loads((out / "best_eval.json").read_text())
    assert best["eval_examples"] == 8 and np.isfinite(best["spearman"])
    assert results["best"]["spearman"] == best["spearman"]


def test_an_unusable_dev_split_is_refused_before_training(spm, tmp_path):
    (tmp_path / "train.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "dev.txt").write_text("four\nfive\n")
    with pytest.raises(errors.UserError, match=r"dev.txt: the dev file holds single texts"):
        run_embeddings(options(tmp_path, tmp_path / "out", spm, task_name="custom",
                               columns=datasets.EmbeddingColumns("q")))
    assert not (tmp_path / "out" / "checkpoints").exists()
    (tmp_path / "dev.txt").unlink()
    (tmp_path / "dev.tsv").write_text("q\tp\nfour\tfive\n")
    with pytest.raises(errors.UserError, match=r"dev.tsv:2: no score; --do_eval scores"):
        run_embeddings(options(tmp_path, tmp_path / "out", spm, task_name="custom",
                               columns=datasets.EmbeddingColumns("q", "p", "score")))
