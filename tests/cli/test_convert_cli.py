"""`python -m albert_tf.convert` between TF1, Hugging Face and Keras formats, and the
--init_checkpoint / --init_from_group0 flags of the fine-tuning CLIs."""
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertPretrainer, checkpoints, convert
from albert_tf.checkpoints import names as tf1_names
from tests.conftest import REPO_ROOT
from tests.checkpoints.test_tf1 import checkpoint_arrays, official_weights, write_tf1_checkpoint
from tests.modeling.test_numerics import tiny_config

CONFIG = tiny_config()


@pytest.fixture()
def official_download(tmp_path):
    """An official-download-like directory: albert_config.json + model.ckpt-best.*."""
    weights = official_weights(CONFIG.to_dict(), seed=30)
    directory = tmp_path / "albert_tiny"
    write_tf1_checkpoint(str(directory / "model.ckpt-best"), weights, optimizer_slots=True)
    CONFIG.to_json_file(str(directory / "albert_config.json"))
    return directory, weights


def run_convert(*args):
    return subprocess.run([sys.executable, "-m", "albert_tf.convert", *args],
                          capture_output=True, text=True, cwd=REPO_ROOT)


@pytest.mark.slow  # 7 s
def test_cli_tf1_to_hf_to_keras_to_tf1(official_download, tmp_path):
    directory, weights = official_download
    hf_dir = tmp_path / "hf"
    done = run_convert(f"--input={directory}", f"--output={hf_dir}", "--output_format=hf")
    assert done.returncode == 0, done.stderr
    assert f"Loaded {len(weights)} variables from TF1 checkpoint" in done.stdout
    assert "optimizer state / counters ignored: %d" % (2 * len(weights) + 1) in done.stdout
    # The rest of the chain in-process (same functions the CLI's main calls).
    config = convert.find_config(str(hf_dir))
    assert config == CONFIG
    model = convert.build_model("pretrainer", config)
    assert convert.load(model, str(hf_dir)).format == "Hugging Face"
    h5 = str(tmp_path / "k" / "albert.weights.h5")
    convert.save(model, h5)
    again = convert.build_model("pretrainer", config)
    convert.load(again, h5, "keras_h5")
    prefix = str(tmp_path / "tf1" / "model.ckpt-best")
    convert.save(again, prefix, "tf1", global_step=9)
    written = checkpoint_arrays(prefix)
    assert written.pop("global_step") == 9
    assert sorted(written) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    assert (tmp_path / "tf1" / "albert_config.json").exists()


def test_cli_reports_a_config_mismatch(official_download, tmp_path):
    directory, _ = official_download
    wrong = tmp_path / "wrong_config.json"
    CONFIG.replace(hidden_size=64, intermediate_size=48).to_json_file(str(wrong))
    done = run_convert(f"--input={directory}", f"--albert_config_file={wrong}",
                       f"--output={tmp_path / 'out.weights.h5'}")
    assert done.returncode == 2  # a user error (albert_tf/errors.py)
    assert "hidden_size is 64 in the config but 32 in the checkpoint" in done.stderr
    assert not (tmp_path / "out.weights.h5").exists()


def test_fine_tuned_classifier_to_hf(official_download, tmp_path):
    directory, _ = official_download
    model = convert.build_model("classifier", CONFIG, num_labels=3)
    report = convert.load(model, str(directory), "tf1")
    assert report.missing == ["output_weights", "output_bias"]
    convert.save(model, str(tmp_path / "hf"), "hf")
    back = AlbertClassifier(CONFIG, num_labels=3)
    convert.load(back, str(tmp_path / "hf"), "hf")
    for name, var in tf1_names.variables_for(back).items():
        np.testing.assert_array_equal(var.numpy(),
                                      tf1_names.variables_for(model)[name].numpy())


@pytest.mark.slow  # 8 s
def test_cli_writes_a_ner_run_as_hugging_face_token_classification(tmp_path):
    """run_ner.py's softmax model (TF1, `output_weights` [K, H] on every token) ->
    AlbertForTokenClassification with the tag names, and back."""
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    source = AlbertTokenClassifier(CONFIG, num_labels=3)
    source.build()
    for variable in source.weights:
        variable.assign(np.random.default_rng(31).normal(size=variable.shape) * 0.02)
    checkpoints.save_tf1_checkpoint(source, str(tmp_path / "ner" / "model.ckpt-best"))
    CONFIG.to_json_file(str(tmp_path / "ner" / "albert_config.json"))
    done = run_convert(f"--input={tmp_path / 'ner' / 'model.ckpt-best'}",
                       f"--output={tmp_path / 'hf'}", "--output_format=hf",
                       "--model=token_classifier", "--num_labels=3", "--labels=O,B-PER,I-PER")
    assert done.returncode == 0, done.stderr[-2000:]
    import json
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["architectures"] == ["AlbertForTokenClassification"]
    assert written["id2label"] == {"0": "O", "1": "B-PER", "2": "I-PER"}
    back = convert.build_model("token_classifier", CONFIG, num_labels=3)
    convert.load(back, str(tmp_path / "hf"), "hf")
    for name, var in tf1_names.variables_for(back).items():
        if "pooler" not in name:
            np.testing.assert_array_equal(var.numpy(),
                                          tf1_names.variables_for(source)[name].numpy())
    wrong = run_convert(f"--input={tmp_path / 'ner' / 'model.ckpt-best'}",
                        f"--output={tmp_path / 'hf2'}", "--output_format=hf",
                        "--model=token_classifier", "--num_labels=3", "--labels=O,B-PER")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().splitlines()[-1].endswith(
        "labels ['O', 'B-PER']: the model has 3 outputs; give 3 distinct label names")


def test_tf_checkpoint_output_is_verified(tmp_path):
    model = AlbertPretrainer(CONFIG)
    model.build()
    tracked = len([v for v in tf.train.list_variables(
        tf.train.Checkpoint(model=model).write(str(tmp_path / "probe")))
        if v[0].startswith("model/")])
    if tracked == len(model.weights):
        convert.save(model, str(tmp_path / "ckpt"), "tf_checkpoint")
        assert checkpoints.detect_format(str(tmp_path / "ckpt")) == "tf_checkpoint"
    else:  # the encoder's block lists are not tracked by TensorFlow's object graph
        with pytest.raises(ValueError, match=r"stored \d+ of the model's \d+ variables"):
            convert.save(model, str(tmp_path / "ckpt"), "tf_checkpoint")


@pytest.mark.parametrize("script", ["run_classifier.py"] + [  # the other three: 7 s each
    pytest.param(script, marks=pytest.mark.slow)
    for script in ("run_squad.py", "run_race.py", "run_pretraining.py")])
def test_run_scripts_accept_init_flags(script):
    helped = subprocess.run([sys.executable, str(REPO_ROOT / script), "--help"],
                            capture_output=True, text=True, cwd=REPO_ROOT)
    assert "--init_checkpoint" in helped.stdout and "init_from_group0" in helped.stdout
    assert "Hugging Face" in helped.stdout


def test_model_auto_is_a_hugging_face_inputs_class_and_labels(official_download, tmp_path):
    from albert_tf.checkpoints import hf as hf_weights
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    hf_weights.save_hf_checkpoint(AlbertTokenClassifier(CONFIG, num_labels=3),
                                  str(tmp_path / "ner"), labels=["O", "B-LOC", "I-LOC"])
    assert convert.resolve_model("auto", str(tmp_path / "ner"), 2, False) == (
        "token_classifier", 3, ["O", "B-LOC", "I-LOC"])
    # --num_labels given wins (and the stored names, for another count, are dropped).
    assert convert.resolve_model("auto", str(tmp_path / "ner"), 5, True) == (
        "token_classifier", 5, None)
    hf_weights.save_hf_checkpoint(AlbertClassifier(CONFIG, num_labels=1), str(tmp_path / "sts"))
    assert convert.resolve_model("auto", str(tmp_path / "sts"), 2, False) == ("classifier", 1,
                                                                              None)
    assert convert.resolve_model("encoder", str(tmp_path / "sts"), 2, False)[0] == "encoder"
    hf_weights.save_hf_checkpoint(AlbertPretrainer(CONFIG), str(tmp_path / "pre"))
    assert convert.resolve_model("auto", str(tmp_path / "pre"), 2, False)[:2] == (
        "pretrainer", 2)
    # A TF1 (or any other) input keeps the former default, the pretrainer.
    directory, _ = official_download
    assert convert.resolve_model("auto", str(directory), 2, False) == ("pretrainer", 2, None)
    with pytest.raises(ValueError, match=r"architectures \['BertForMaskedLM'\] is not an "
                                         r"ALBERT class"):
        hf_weights.model_of_hf_config({"architectures": ["BertForMaskedLM"]})


@pytest.mark.slow  # 7 s
def test_cli_converts_a_hugging_face_classifier_with_its_label_names(tmp_path):
    """Default --model: the Hugging Face input's class, label count and names, kept in a
    Hugging Face output."""
    import json

    from albert_tf.checkpoints import hf as hf_weights

    source = AlbertClassifier(CONFIG, num_labels=3)
    hf_weights.save_hf_checkpoint(source, str(tmp_path / "in"),
                                  labels=["contradiction", "entailment", "neutral"])
    done = run_convert(f"--input={tmp_path / 'in'}", f"--output={tmp_path / 'out'}",
                       "--output_format=hf")
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["architectures"] == ["AlbertForSequenceClassification"]
    assert list(written["label2id"]) == ["contradiction", "entailment", "neutral"]


@pytest.mark.slow  # two conversions in subprocesses: 15 s
def test_hf_multi_label_to_tf1_and_back_keeps_what_pipelines_read(tmp_path, shared_data):
    """A Hugging Face multi-label classifier -> TF1 (as a fine-tuned run holds it) -> Hugging
    Face again: the labels, the tokenizer (from --spm_model_file) and, converted straight
    from Hugging Face, problem_type survive, so that the pipelines answer alike."""
    import json

    from albert_tf import pipeline
    from tests.helpers import hf_models

    spm = str(shared_data / "spm_official" / "30k-clean.model")
    source = hf_models.write_hf_dir(str(tmp_path / "hf"), "classifier", spm,
                                    hf_models.GOEMOTIONS_LABELS, seed=3,
                                    problem_type="multi_label_classification")
    direct = tmp_path / "direct"
    done = run_convert(f"--input={source}", f"--output={direct}", "--output_format=hf")
    assert done.returncode == 0, done.stderr
    assert f"(tokenizer from {source}/spiece.model)" in done.stdout
    values = json.loads((direct / "config.json").read_text())
    assert values["problem_type"] == "multi_label_classification"
    assert json.loads((direct / "tokenizer_config.json").read_text())["do_lower_case"] is True
    tf1 = tmp_path / "run" / "model.ckpt-best"
    assert run_convert(f"--input={source}", f"--output={tf1}").returncode == 0
    back = tmp_path / "back"
    done = run_convert(f"--input={tf1}", f"--output={back}", "--output_format=hf",
                       "--model=classifier", "--num_labels=4",
                       f"--labels={','.join(hf_models.GOEMOTIONS_LABELS)}",
                       f"--spm_model_file={spm}")
    assert done.returncode == 0, done.stderr
    assert (back / "spiece.model").read_bytes() == (direct / "spiece.model").read_bytes()
    texts = ["Anna is happy.", "What a sad day."]
    expected = pipeline("text-classification", model=source)(texts, top_k=None)
    assert pipeline("text-classification", model=str(direct))(texts, top_k=None) == expected
    softmax = pipeline("text-classification", model=str(back))(texts, top_k=None)
    assert [r["label"] for r in softmax[0]] and abs(sum(r["score"] for r in softmax[0]) - 1) < 1e-5
