"""run_classifier.py end to end on a few hundred SST-2 rows: train, evaluate, predict, export,
reload the SavedModel in a process without albert_tf, and compare raw-text predictions."""
import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO_ROOT
from tests.helpers.cluster import last_line, wait_for_checkpoint

CONFIG = {"vocab_size": 8000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64}


@pytest.fixture(scope="module")
def sst2(shared_data, tmp_path_factory):
    """SST-2 train/dev/test files made from rows of the real dev.tsv (outside the repo)."""
    source = shared_data / "glue" / "SST-2" / "dev.tsv"
    spm = shared_data / "spm" / "albert_style_pd8k.model"
    if not source.exists() or not spm.exists():
        pytest.skip("SST-2 dev.tsv or the SentencePiece model is missing")
    lines = source.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    root = tmp_path_factory.mktemp("sst2")
    (root / "SST-2").mkdir()
    (root / "SST-2" / "train.tsv").write_text("\n".join([header] + rows[:320]) + "\n")
    (root / "SST-2" / "dev.tsv").write_text("\n".join([header] + rows[320:400]) + "\n")
    test_sentences = [r.split("\t")[0] for r in rows[400:424]]
    test_sentences[0] = "  Caf\u00e9 NOIR , the 1999, film   is GREAT ! "  # normalisation path
    (root / "SST-2" / "test.tsv").write_text(
        "index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, s in enumerate(test_sentences)))
    config = root / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return {"data_dir": str(root), "spm": str(spm), "config": str(config),
            "test_sentences": test_sentences}


def cli_argv(sst2, output_dir, **extra):
    """The run_classifier.py command line of these tests (`extra` flags added)."""
    args = {"task_name": "sst-2", "data_dir": sst2["data_dir"], "spm_model_file": sst2["spm"],
            "albert_config_file": sst2["config"], "output_dir": str(output_dir),
            "max_seq_length": 32, "train_batch_size": 16, "eval_batch_size": 16,
            "predict_batch_size": 8, "learning_rate": 1e-3, "train_step": 40,
            "warmup_step": 4, "save_checkpoints_steps": 20, "iterations_per_loop": 10,
            "seed": 3}
    args.update(extra)
    argv = [f"--{k}" if v is True else f"--no{k}" if v is False else f"--{k}={v}"
            for k, v in args.items()]
    return [sys.executable, str(REPO_ROOT / "run_classifier.py")] + argv


def run_cli(sst2, output_dir, **extra):
    return subprocess.run(cli_argv(sst2, output_dir, **extra), capture_output=True, text=True,
                          cwd=REPO_ROOT)


LOADER = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text_a=tf.constant(json.loads(sys.argv[2])))
print("RESULT" + json.dumps({
    "probabilities": out["probabilities"].numpy().tolist(),
    "predictions": out["predictions"].numpy().astype(str).tolist(),
    "albert_tf": any(m.startswith("albert_tf") for m in sys.modules)}))
"""


@pytest.mark.slow  # 28 s
def test_train_eval_predict_export_and_serve_raw_text(sst2, tmp_path):
    out = tmp_path / "run"
    done = run_cli(sst2, out, do_train=True, do_eval=True, do_predict=True,
                   export_dir=str(out / "export"), export_layer_norm="onednn",
                   export_format="saved_model,onnx,tflite", export_int8=True, export_fp16=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (f"exported to {out / 'export'}: SavedModel, model.onnx, model.int8.onnx, "
            "model.tflite, model.fp16.tflite, model.int8.tflite") in done.stderr
    for name in ("model.int8.onnx", "model.int8.tflite"):  # checked on the 80 dev rows
        assert re.search(rf"{re.escape(name)} predicts as model\.(onnx|tflite) on "
                         r"\d+\.\d\d% of 80 values \(80 evaluation examples\)", done.stderr)
    from albert_tf.export import op_types
    assert "FusedBatchNormV3" in op_types(str(out / "export"))  # as --export_layer_norm asks
    evals = (out / "eval_results.txt").read_text()
    assert [l for l in evals.splitlines() if l.startswith("global_step")] == [
        "global_step = 20", "global_step = 40"]
    assert "eval_accuracy = " in evals and "eval_loss = " in evals
    assert evals.count("collapsed = true") + evals.count("collapsed = false") == 2
    best = json.loads((out / "best_eval.json").read_text())
    assert best["eval_examples"] == 80 and isinstance(best["collapsed"], bool)
    assert (out / "model.ckpt-best.index").exists()

    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (24, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    submission = (out / "SST-2.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 25
    assert (out / "submit_results.tsv").read_text().splitlines() == submission
    labels = [line.split("\t")[1] for line in submission[1:]]
    assert [line.split("\t")[0] for line in submission[1:]] == [str(i) for i in range(24)]
    assert labels == [str(i) for i in probabilities.argmax(axis=1)]

    served = subprocess.run([sys.executable, "-c", LOADER, str(out / "export"),
                             json.dumps(sst2["test_sentences"])], capture_output=True,
                            text=True, cwd="/", env={"TF_CPP_MIN_LOG_LEVEL": "2",
                                                     "PATH": "/usr/bin:/bin"})
    assert served.returncode == 0, served.stderr[-3000:]
    result = json.loads([l for l in served.stdout.splitlines()
                         if l.startswith("RESULT")][-1][len("RESULT"):])
    assert result["albert_tf"] is False
    np.testing.assert_allclose(result["probabilities"], probabilities, atol=1e-5)
    assert result["predictions"] == labels

    # The same directory holds model.onnx (token ids in) and its vocabulary: ONNX Runtime
    # on the Python features of the test sentences gives the same probabilities.
    onnxruntime = pytest.importorskip("onnxruntime")
    from albert_tf.export import onnx as onnx_export
    from albert_tf import tokenization
    from albert_tf.tasks.classification import glue
    metadata = onnx_export.read_metadata(str(out / "export" / "model.onnx"))
    assert metadata["labels"] == ["0", "1"] and metadata["max_seq_length"] == 32
    assert metadata["tokenizer"] == "sentencepiece"
    tokenizer = tokenization.FullTokenizer(
        spm_model_file=str(out / "export" / metadata["vocabulary_file"]))
    features = glue.convert_examples(
        [glue.InputExample(guid=str(i), text_a=s, text_b=None, label=None)
         for i, s in enumerate(sst2["test_sentences"])], tokenizer, 32, None)
    feeds = {name: features[name] for name in ("input_ids", "input_mask", "segment_ids")}
    for name, atol in (("model.onnx", 1e-5), ("model.int8.onnx", 0.05)):
        session = onnxruntime.InferenceSession(str(out / "export" / name))
        served = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        np.testing.assert_allclose(served["probabilities"], probabilities, atol=atol,
                                   err_msg=name)
    clear = np.abs(probabilities[:, 1] - 0.5) > 0.05  # int8 may flip a near-tie only
    np.testing.assert_array_equal(served["predictions"][clear],
                                  probabilities.argmax(axis=1)[clear])

    # model.tflite in a process where TensorFlow cannot be imported, as a phone would run it.
    np.savez(out / "feeds.npz", **feeds)
    lite = subprocess.run([sys.executable, "-c", LITERT_LOADER, str(out / "export"),
                           str(out / "feeds.npz")], capture_output=True, text=True,
                          cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin",
                                              "PYTHONPATH": str(REPO_ROOT)})
    assert lite.returncode == 0, lite.stderr[-3000:]
    result = json.loads([l for l in lite.stdout.splitlines()
                         if l.startswith("RESULT")][-1][len("RESULT"):])
    assert result["tensorflow"] is False and result["labels"] == ["0", "1"]
    np.testing.assert_allclose(result["model.tflite"], probabilities, atol=1e-4)
    for name in ("model.fp16.tflite", "model.int8.tflite"):
        np.testing.assert_allclose(result[name], probabilities, atol=0.05, err_msg=name)


LITERT_LOADER = r"""
import json, os, sys
import numpy as np
sys.modules["tensorflow"] = None  # `import tensorflow` raises ImportError from here on
from albert_tf.export.litert_runtime import LiteRTModel
feeds = dict(np.load(sys.argv[2]))
result = {}
for name in ("model.tflite", "model.fp16.tflite", "model.int8.tflite"):
    model = LiteRTModel(os.path.join(sys.argv[1], name))
    result[name] = model(**feeds)["probabilities"].tolist()
    result["labels"] = model.metadata["labels"]
result["tensorflow"] = any(m.startswith("tensorflow") and sys.modules[m] is not None
                           for m in sys.modules)
print("RESULT" + json.dumps(result))
"""


def test_training_reads_the_train_split_when_dev_is_evaluated_too(sst2, tmp_path):
    """With --do_eval the dev split's cache is built after the training one's; training must
    still read train.tsv (320 rows), the evaluation and int8 check dev.tsv (80)."""
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.classification.job import ClassificationJob, ClassificationOptions

    options = ClassificationOptions(task_name="sst-2", data_dir=sst2["data_dir"],
                          albert_config=AlbertConfig.from_dict(CONFIG),
                          spm_model_file=sst2["spm"], output_dir=str(tmp_path),
                          do_train=True, do_eval=True, max_seq_length=32, train_batch_size=16)
    job = ClassificationJob(options)
    seen = set()
    for batch in job.train_dataset(None).take(80):  # 1,280 rows: every row, many times
        seen.update(tuple(row) for row in batch["input_ids"].numpy())
    dev = {tuple(row) for row in job.eval_features()["input_ids"]}
    assert len(dev) > 70 and len(seen) > 290 and not seen & dev


@pytest.mark.slow
def test_predict_only_rerun_reuses_caches_and_best_checkpoint(sst2, tmp_path):
    out = tmp_path / "run"
    assert run_cli(sst2, out, do_train=True, do_eval=True, do_predict=True).returncode == 0
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    caches = sorted(p.name for p in out.glob("*.tf_record"))
    again = run_cli(sst2, out, do_predict=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "reusing cached features" in again.stderr
    assert sorted(p.name for p in out.glob("*.tf_record")) == caches
    np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv", delimiter="\t"),
                               probabilities, atol=1e-6)


@pytest.mark.slow
def test_cli_reports_bad_flags_in_one_line(sst2, tmp_path):
    done = run_cli(sst2, tmp_path / "x", do_train=True, task_name="sts")
    assert done.returncode != 0
    assert "--task_name 'sts' is not one of cola, mismnli, mnli" in done.stderr
    assert "Traceback" not in done.stderr


def glue_options(sst2, tmp_path, **changes):
    from albert_tf.config import AlbertConfig
    from albert_tf.finetuning import FinetuningOptions
    from albert_tf.tasks.classification.job import ClassificationOptions

    values = dict(task_name="sst-2", data_dir=sst2["data_dir"], spm_model_file=sst2["spm"],
                  albert_config=AlbertConfig.from_dict(CONFIG), max_seq_length=32,
                  finetuning=FinetuningOptions(output_dir=str(tmp_path), do_train=True))
    values.update(changes)
    return ClassificationOptions(**values)


@pytest.mark.parametrize("extra, message", [
    ({"max_seq_length": 128}, "--max_seq_length 128 exceeds the model's "
                              "max_position_embeddings 64"),
    ({"data_dir": "/nonexistent"}, "/nonexistent/SST-2/train.tsv: file not found"),
    ({"task_name": "custom"}, "--task_name=custom needs --text_a_column and --label_column"),
    ({"eval_batch_size": 0}, "--eval_batch_size 0 must be a positive multiple"),
    ({"classifier_dropout": 1.0}, "--classifier_dropout must be in"),
    ({"spm_model_file": "/no/such.model"}, "--spm_model_file '/no/such.model' does not exist"),
    ({"export_layer_norm": "fast"}, "--export_layer_norm must be one of auto, onednn, plain"),
    ({"multi_label_threshold": "1.5"}, "--multi_label_threshold must be 'tuned' or a number in "
                                       r"\(0, 1\), got '1.5'"),
    ({"multi_label_threshold": "best"}, "--multi_label_threshold must be 'tuned'"),
])
def test_option_errors_are_clear(sst2, tmp_path, extra, message):
    from albert_tf.tasks.classification.job import run_glue

    options = glue_options(sst2, tmp_path, **extra)
    with pytest.raises(ValueError, match=message):
        run_glue(options)


@pytest.mark.slow  # 40 s
def test_sigterm_saves_the_current_step_and_a_rerun_goes_on_from_there(sst2, tmp_path):
    """A fine-tuning run preempted (SIGTERM) between its scheduled checkpoints: exit 143 with
    a checkpoint at the step reached; the rerun resumes there and evaluates only the
    scheduled checkpoints, as an uninterrupted run does."""
    out = tmp_path / "run"
    args = dict(do_train=True, do_eval=True, train_step=400, save_checkpoints_steps=100,
                iterations_per_loop=50)
    with open(tmp_path / "log", "w") as log:
        proc = subprocess.Popen(cli_argv(sst2, out, **args), stdout=subprocess.DEVNULL,
                                stderr=log, cwd=REPO_ROOT,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        try:
            wait_for_checkpoint(out / "checkpoints", 100, [proc])
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 143
        finally:
            proc.kill()
    line = last_line((tmp_path / "log").read_text())
    step = int(re.search(r"at step (\d+) of 400", line).group(1))
    assert line == (f"run_classifier.py: preempted: received SIGTERM; saved checkpoint "
                    f"{out / 'checkpoints' / f'ckpt-{step}'} at step {step} of 400: rerun the "
                    "same command to resume there")
    done = run_cli(sst2, out, **args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resumed from {out / 'checkpoints' / f'ckpt-{step}'} at step {step}" in done.stderr
    evaluated = re.findall(r"global_step = (\d+)", (out / "eval_results.txt").read_text())
    assert sorted(map(int, evaluated)) == [100, 200, 300, 400]
