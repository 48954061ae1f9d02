"""run_race.py end to end on the shared RACE samples: fine-tune, evaluate (middle, high,
all), keep the best, predict, export, reload; flag and data errors."""
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModel uses)

from albert_tf import checkpoints
from tests.cli.test_errors import assert_user_error
from albert_tf.config import AlbertConfig
from albert_tf.training import best_checkpoint
from albert_tf.tasks.multiple_choice import race, job as race_job
from albert_tf.tokenization import SentencePieceTokenizer
from tests.conftest import REPO_ROOT

CONFIG = dict(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


@pytest.fixture(scope="module")
def setup(shared_data, tmp_path_factory):
    """data_dir = the shared train and dev samples, with dev also serving as test
    (assembled in a temporary directory; nothing is copied into the repository)."""
    root = tmp_path_factory.mktemp("race_cli")
    data = root / "data"
    shutil.copytree(shared_data / "race/RACE/train", data / "RACE/train")
    shutil.copytree(shared_data / "race/RACE/dev", data / "RACE/dev")
    shutil.copytree(shared_data / "race/RACE/dev", data / "RACE/test")
    config = root / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return {"root": root, "data": str(data), "config": str(config),
            "spm": str(shared_data / "spm/albert_style_pd8k.model")}


def run_cli(setup, output_dir, **extra):
    args = {"data_dir": setup["data"], "albert_config_file": setup["config"],
            "spm_model_file": setup["spm"], "output_dir": str(output_dir),
            "max_seq_length": 64, "max_qa_length": 24, "train_batch_size": 4,
            "eval_batch_size": 5, "predict_batch_size": 3, "learning_rate": 1e-3,
            "train_step": 6, "warmup_step": 1, "save_checkpoints_steps": 3, "seed": 3}
    args.update(extra)
    flags = [f"--{k}" if v is True else f"--no{k}" if v is False else f"--{k}={v}"
             for k, v in args.items()]
    return subprocess.run([sys.executable, str(REPO_ROOT / "run_race.py")] + flags,
                          capture_output=True, text=True, cwd=REPO_ROOT)


def read_blocks(path):
    blocks, current = [], {}
    for line in path.read_text().splitlines():
        key, value = line.split(" = ")
        current[key] = best_checkpoint.parse_value(value)
        if key == "global_step":
            blocks.append(current)
            current = {}
    return blocks


@pytest.mark.slow  # 30 s
def test_train_eval_predict_export_reload(setup, tmp_path):
    out = tmp_path / "out"
    done = run_cli(setup, out, do_predict=True, export_dir=str(out / "export"),
                   export_layer_norm="plain", export_format="saved_model,onnx,tflite")
    assert done.returncode == 0, done.stderr[-3000:]
    from albert_tf.export import op_types
    assert "FusedBatchNormV3" not in op_types(str(out / "export"))  # --export_layer_norm
    log = done.stderr
    assert "RACE train/middle: 10 questions from 2 files" in log
    assert "*** Example ***" in log and "step 6/6" in log

    # Evaluated at steps 3 and 6 with accuracy for all, middle and high.
    blocks = read_blocks(out / "eval_results.txt")
    assert [b["global_step"] for b in blocks] == [3, 6]
    for block in blocks:
        assert block["eval_examples"] == 17 and block["eval_examples_middle"] == 11
        assert block["eval_examples_high"] == 6
        middle, high = block["eval_accuracy_middle"], block["eval_accuracy_high"]
        assert block["eval_accuracy"] == pytest.approx((11 * middle + 6 * high) / 17)
        assert isinstance(block["collapsed"], bool)  # `collapsed = true` / `false`
    best = json.loads((out / "best_eval.json").read_text())
    assert best["eval_accuracy"] == max(b["eval_accuracy"] for b in blocks)

    # Predictions (test = a copy of dev) come from model.ckpt-best.
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 17
    assert records[0]["id"] == "middle13.txt" and records[0]["question_index"] == 0
    assert set(records[0]) == {"id", "question_index", "level", "prediction", "probabilities",
                               "answer"}
    probs = np.array([r["probabilities"] for r in records])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
    assert [r["prediction"] for r in records] == ["ABCD"[i] for i in probs.argmax(1)]
    correct = sum(r["prediction"] == r["answer"] for r in records)
    results = dict(line.split(" = ") for line in
                   (out / "predict_results.txt").read_text().splitlines())
    assert float(results["accuracy"]) == pytest.approx(correct / 17)
    assert float(results["accuracy"]) == pytest.approx(best["eval_accuracy"])  # same data

    config = AlbertConfig.from_dict(CONFIG)
    model = race_job.build_model(config, 0.1)
    checkpoints.load_tf1_checkpoint(model, str(out / "model.ckpt-best"))
    examples = race.read_examples(setup["data"], "test")
    feats = list(race.featurize(examples, SentencePieceTokenizer(setup["spm"]), 64, 24))
    batch = {k: np.stack([f[k] for f in feats]) for k in ("input_ids", "input_mask",
                                                          "segment_ids")}
    np.testing.assert_allclose(model(batch)["probabilities"].numpy(), probs, atol=1e-5)
    # model.onnx (best weights, --export_format=saved_model,onnx) on the same token ids.
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(str(out / "export" / "model.onnx"))
    onnx_probs, onnx_ids = session.run(["probabilities", "predictions"], batch)
    np.testing.assert_allclose(onnx_probs, probs, atol=1e-5)
    assert ["ABCD"[i] for i in onnx_ids] == [r["prediction"] for r in records]
    assert not (out / "export" / "model.int8.onnx").exists()  # not asked for
    # model.tflite: the same probabilities, and a sequence length it was not exported with
    # is refused by name.
    from albert_tf.export.litert_runtime import LiteRTModel
    lite = LiteRTModel(str(out / "export" / "model.tflite"))
    np.testing.assert_allclose(lite(**batch)["probabilities"], probs, atol=1e-4)
    with pytest.raises(ValueError, match=r"the model takes \[\?, 4, 64\]"):
        lite(**{k: v[:, :, :32] for k, v in batch.items()})

    # The SavedModel (best weights) serves raw text with the same probabilities.
    served = tf.saved_model.load(str(out / "export")).signatures["serving_default"]
    raw = []
    for path in sorted((setup["root"] / "data/RACE/test/middle").glob("*.txt"),
                       key=lambda p: int(p.stem)):
        data = json.loads(path.read_text())
        raw += [(data["article"], q, o) for q, o in zip(data["questions"], data["options"])]
    assert len(raw) == 11
    outputs = served(article=tf.constant([r[0] for r in raw]),
                     question=tf.constant([r[1] for r in raw]),
                     options=tf.constant([r[2] for r in raw]))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probs[:11], atol=1e-5)
    assert [p.decode() for p in outputs["predictions"].numpy()] == [
        r["prediction"] for r in records[:11]]

    # Re-running eval only reuses the caches and evaluates the latest checkpoint.
    again = run_cli(setup, out, do_train=False, high_only=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "rebuilding RACE feature cache" in again.stderr  # --high_only changed the examples
    last = read_blocks(out / "eval_results.txt")[-1]
    assert last["global_step"] == 6 and last["eval_examples"] == 6
    assert "eval_accuracy_middle" not in last


@pytest.mark.parametrize("changes, message", [
    ({"max_qa_length": 62}, "--max_qa_length 62 leaves no room in --max_seq_length 64"),
    ({"max_seq_length": 128}, "--max_seq_length 128 exceeds the model's "
                              "max_position_embeddings 64 (--albert_config_file)"),
    ({"high_only": True, "middle_only": True}, "--high_only and --middle_only"),
    ({"predict_split": "val"}, "--predict_split must be one of train, dev, test"),
    ({"do_train": False, "do_eval": False}, "at least one of --do_train"),
    ({"classifier_dropout": 1.0}, "--classifier_dropout must be in [0, 1), got 1.0"),
    ({"export_layer_norm": "fast"}, "--export_layer_norm must be one of auto, onednn, plain"),
    ({"export_format": ("onnx", "tfjs")}, "--export_format takes a comma-separated list of "
                                          "saved_model, onnx, tflite; got 'onnx,tfjs'"),
    ({"export_int8": True}, "--export_int8 quantizes the ONNX and LiteRT models"),
    ({"export_format": ("saved_model", "onnx")}, "--export_format=saved_model,onnx: nothing is "
                                                 "exported without --export_dir"),
])
def test_option_errors(setup, changes, message):
    values = dict(data_dir=setup["data"], albert_config=AlbertConfig.from_dict(CONFIG),
                  spm_model_file=setup["spm"], output_dir="unused", max_seq_length=64,
                  max_qa_length=24)
    values.update(changes)
    with pytest.raises(ValueError) as err:
        race_job.MultipleChoiceOptions(**values).validate()
    assert message in str(err.value)


@pytest.mark.slow  # 6 s
def test_cli_flag_error(setup, tmp_path):
    done = run_cli(setup, tmp_path / "out", max_qa_length=62)
    assert done.returncode != 0
    assert "--max_qa_length 62 leaves no room in --max_seq_length 64" in done.stderr
    assert not (tmp_path / "out" / "checkpoints").exists()


def test_malformed_data_names_file_and_question(setup, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(setup["data"], data)
    bad = json.loads((data / "RACE/train/high/132.txt").read_text())
    bad["answers"][2] = "F"
    (data / "RACE/train/high/132.txt").write_text(json.dumps(bad))
    done = run_cli(dict(setup, data=str(data)), tmp_path / "out")
    assert done.returncode != 0
    assert "132.txt:1 (id high132.txt) question 2: answer 'F' is not one of A, B, C, D" in \
        done.stderr, done.stderr[-2000:]


def test_the_old_dropout_flag_is_accepted_with_a_warning(setup, tmp_path):
    """--dropout_prob (the original run_race.py's name) still sets the head's dropout, with a
    warning naming --classifier_dropout; both names with different values are refused."""
    done = run_cli(setup, tmp_path / "out", dropout_prob=1.0, do_train=False, do_eval=False,
                   export_dir=str(tmp_path / "export"))
    assert "--dropout_prob is now --classifier_dropout" in done.stderr
    # The value reached the options: 1.0 is refused there, under its new name.
    assert_user_error(done, "run_race.py", "--classifier_dropout must be in [0, 1), got 1.0")
    both = run_cli(setup, tmp_path / "out", dropout_prob=0.2, classifier_dropout=0.3)
    assert_user_error(both, "run_race.py", "--dropout_prob is the old name of "
                                           "--classifier_dropout; give one of them")


def test_the_old_dropout_keyword_still_builds_the_options(setup):
    with pytest.warns(DeprecationWarning, match="dropout_prob is now classifier_dropout"):
        options = race_job.MultipleChoiceOptions(data_dir=setup["data"], output_dir="unused",
                                       albert_config=AlbertConfig.from_dict(CONFIG),
                                       spm_model_file=setup["spm"], dropout_prob=0.25)
    assert options.classifier_dropout == 0.25
    with pytest.warns(DeprecationWarning, match="dropout_prob is now classifier_dropout"):
        assert options.dropout_prob == 0.25  # reading the old attribute: the new value
