"""SQuAD job, run_squad.py and the SavedModel export against the Python path."""
import json
import os
import subprocess
import sys

import keras
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.tasks.span_qa import (data as squad_data, export as squad_export, job as squad_job,
                                     postprocess as squad_postprocess)

from tests.conftest import REPO_ROOT

CONFIG = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=128)

LOADER = """
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401  (only these two)
loaded = tf.saved_model.load(sys.argv[1])
items = json.load(open(sys.argv[2]))
out = loaded.signatures["serving_default"](
    question=tf.constant([q for q, _ in items]), context=tf.constant([c for _, c in items]))
print(json.dumps({k: [x.decode() if isinstance(x, bytes) else float(x) for x in v.numpy()]
                  for k, v in out.items()}))
assert "albert_tf" not in sys.modules
"""


def subset(shared_data, tmp_path, name, paragraphs=3):
    data = json.loads((shared_data / "squad" / name).read_text())
    article = data["data"][0]
    small = {"version": data.get("version"),
             "data": [{"title": article["title"], "paragraphs": article["paragraphs"][:paragraphs]}]}
    path = tmp_path / name
    path.write_text(json.dumps(small))
    return str(path)


def load_in_subprocess(export_dir, items, tmp_path):
    (tmp_path / "items.json").write_text(json.dumps(items))
    (tmp_path / "loader.py").write_text(LOADER)
    done = subprocess.run([sys.executable, str(tmp_path / "loader.py"), export_dir,
                           str(tmp_path / "items.json")], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # 22 s
@pytest.mark.parametrize("v2", [False, True])
def test_saved_model_answers_equal_the_python_path(shared_data, tmp_path, v2):
    """An untrained (random, seeded) model gives arbitrary spans: a strict comparison."""
    name = "dev-v2.0.sample2.json" if v2 else "dev-v1.1.json"
    path = subset(shared_data, tmp_path, name, paragraphs=2)
    spm = str(shared_data / "spm" / "albert_style_pd8k.model")
    options = squad_job.SpanQaOptions(
        albert_config=CONFIG, spm_model_file=spm, output_dir=str(tmp_path / "out"),
        predict_file=path, do_predict=True, max_seq_length=96, doc_stride=32,
        max_query_length=24, version_2_with_negative=v2, start_n_top=3, end_n_top=2,
        n_best_size=5, max_answer_length=12)
    keras.utils.set_random_seed(3)
    model = squad_job.build_model(options)
    model.build()
    from albert_tf.tokenization import SentencePieceTokenizer

    examples = squad_data.read_squad_examples(path)
    feature_path = str(tmp_path / "predict.tf_record")
    squad_job.prepare_features(feature_path, examples, SentencePieceTokenizer(spm), options,
                               False, path)
    from albert_tf.tasks.span_qa import features as squad_features

    raw = squad_job.predict_raw(model, feature_path, 96, 16, v2)
    predictions = squad_postprocess.postprocess(
        examples, squad_features.read_feature_arrays(feature_path, 96), raw,
        options.postprocess_options())
    export_dir = str(tmp_path / "export")
    squad_export.export_saved_model(model, export_dir, spm, squad_export.ExportOptions(
        max_seq_length=96, doc_stride=32, max_query_length=24, n_best_size=5,
        max_answer_length=12, version_2_with_negative=v2))
    items = [(e.question_text, e.paragraph_text) for e in examples]
    out = load_in_subprocess(export_dir, items, tmp_path)
    want = [predictions.nbest[e.qas_id][0]["text"] for e in examples]
    assert out["answer"] == want
    assert len(set(want)) > 3  # the comparison covers many different spans
    scores = [predictions.nbest[e.qas_id][0]["start_log_prob"]
              + predictions.nbest[e.qas_id][0]["end_log_prob"] for e in examples]
    assert out["score"] == pytest.approx(scores, abs=1e-3)
    if v2:
        assert out["null_score"] == pytest.approx(
            [predictions.null_odds[e.qas_id] for e in examples], abs=1e-4)


def cli(tmp_path, data_file, out, *extra):
    args = [sys.executable, str(REPO_ROOT / "run_squad.py"),
            f"--albert_config_file={tmp_path / 'config.json'}",
            f"--spm_model_file={REPO_ROOT.parent / 'shared' / 'data' / 'spm' / 'albert_style_pd8k.model'}",
            f"--output_dir={out}", f"--train_file={data_file}", f"--predict_file={data_file}",
            "--do_train", "--do_predict", "--max_seq_length=96", "--doc_stride=48",
            "--max_query_length=24", "--train_batch_size=8", "--predict_batch_size=32",
            "--num_train_epochs=1", "--save_checkpoints_steps=4", "--learning_rate=1e-3",
            "--seed=1", f"--export_dir={out}/export", *extra]
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO_ROOT, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("v2", [False, True])
def test_cli_trains_predicts_evaluates_exports(shared_data, tmp_path, v2):
    (tmp_path / "config.json").write_text(CONFIG.to_json_string())
    name = "dev-v2.0.sample2.json" if v2 else "dev-v1.1.json"
    path = subset(shared_data, tmp_path, name, paragraphs=3)
    out = tmp_path / "out"
    extra = ["--version_2_with_negative", "--start_n_top=3", "--end_n_top=3",
             "--null_score_diff_threshold=0.5", "--num_train_epochs=4"] if v2 else []
    extra.append("--export_layer_norm=" + ("onednn" if v2 else "plain"))
    extra.append("--export_format=saved_model,onnx,tflite")
    extra.append("--export_int8")
    done = cli(tmp_path, path, out, *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    steps = [line for line in (out / "eval_results.txt").read_text().splitlines()
             if line.startswith("global_step")]
    assert len(steps) >= 2 and (out / "model.ckpt-best.index").exists()
    # The collapse check is v2's (no answer / an answer almost everywhere) only.
    assert ("collapsed = " in (out / "eval_results.txt").read_text()) is v2
    files = ["predictions.json", "nbest_predictions.json"] + (["null_odds.json"] if v2 else [])
    assert all((out / f).exists() for f in files)
    if v2:
        assert metrics["null_threshold_source"] == "given"
        assert metrics["null_score_diff_threshold"] == 0.5
    # The evaluate command scores the written file exactly as the job did.
    args = [sys.executable, "-m", "albert_tf.tasks.squad", "evaluate", "--data_file", path,
            "--prediction_file", str(out / "predictions.json")]
    scored = json.loads(subprocess.run(args, capture_output=True, text=True, cwd=REPO_ROOT,
                                       check=True).stdout)
    key = "exact" if v2 else "exact_match"
    assert scored[key] == pytest.approx(metrics[key]) and scored["f1"] == pytest.approx(
        metrics["f1"])
    # The SavedModel answers like predictions.json.
    examples = squad_data.read_squad_examples(path)
    answers = json.loads((out / "predictions.json").read_text())
    got = load_in_subprocess(str(out / "export"),
                             [(e.question_text, e.paragraph_text) for e in examples], tmp_path)
    assert got["answer"] == [answers[e.qas_id] for e in examples]
    from albert_tf.export import op_types
    assert ("FusedBatchNormV3" in op_types(str(out / "export"))) == v2  # --export_layer_norm
    from albert_tf.export import onnx as onnx_export
    metadata = onnx_export.read_metadata(str(out / "export" / "model.onnx"))
    assert metadata["task"] == ("squad_v2" if v2 else "squad_v1")
    assert metadata["max_seq_length"] == 96 and metadata["doc_stride"] == 48
    assert metadata["null_score_diff_threshold"] == (0.5 if v2 else None)
    # model.tflite holds the same metadata; the int8 files were checked on the predict
    # file's windows (most likely start and end).
    from albert_tf.export import litert_runtime
    lite = litert_runtime.read_metadata(str(out / "export" / "model.tflite"))
    assert {k: lite[k] for k in metadata} == metadata
    assert "model.int8.tflite" in done.stderr and "model.int8.onnx" in done.stderr
    # Flag errors are one clear line.
    bad = subprocess.run([sys.executable, str(REPO_ROOT / "run_squad.py"),
                          f"--albert_config_file={tmp_path / 'config.json'}",
                          "--spm_model_file=x", f"--output_dir={tmp_path}/o2", "--do_train"],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert bad.returncode != 0 and "--do_train needs --train_file" in bad.stderr


@pytest.mark.slow  # ~40 s
def test_two_seeds_export_the_best_seed(shared_data, tmp_path):
    """--num_seeds with --export_dir: each seed trains and scores predict_file, then the best
    seed's weights are exported (the export job keeps --do_predict: run_squad.py refuses a
    job without --do_train or --do_predict)."""
    (tmp_path / "config.json").write_text(CONFIG.to_json_string())
    path = subset(shared_data, tmp_path, "dev-v1.1.json", paragraphs=2)
    out = tmp_path / "out"
    done = cli(tmp_path, path, out, "--num_seeds=2", "--export_format=saved_model")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "seed_results.json").read_text())
    assert [record["seed"] for record in summary["seeds"]] == [1, 2]
    assert summary["export_dir"] == f"{out}/export"
    assert (out / "export" / "saved_model.pb").exists()
