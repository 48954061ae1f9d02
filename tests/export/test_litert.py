"""LiteRT export (albert_tf.export.litert): every task model's model.tflite, run by the
ai_edge_litert interpreter in a process where TensorFlow cannot be imported, computes what
the model's serving function computes; batch and sequence length resize at run time and a
fixed dimension is checked by name; the metadata rides in the file; int8 files that drift
are removed; conversion failures are one line."""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import export
from albert_tf.export import litert, litert_runtime, portable
from albert_tf.modeling import models
from albert_tf.tasks.classification import glue
from albert_tf.tasks.classification.export import classifier_portable_model
from albert_tf.tasks.classification.job import ClassificationOptions
from albert_tf.tasks.multiple_choice import export as race_export
from albert_tf.tasks.span_qa import export as squad_export
from albert_tf.tasks.tagging import export as tagging_export, schemes
from tests import conftest
from tests.conftest import REPO_ROOT
from tests.export.test_onnx import SEQ, built, config, real_features

pytest.importorskip("ai_edge_litert")

# Runs every exported file with TensorFlow made unimportable: the interpreter, the metadata
# reader and albert_tf.export.litert_runtime must not need it.
RUNNER = r"""
import json, sys
import numpy as np
sys.modules["tensorflow"] = None  # `import tensorflow` now raises ImportError
from albert_tf.export import litert_runtime
request = json.load(open(sys.argv[1]))
result = {}
for name, case in request.items():
    model = litert_runtime.LiteRTModel(case["path"])
    features = dict(np.load(case["features"]))
    outputs = model(**features)
    np.savez(case["outputs"], **outputs)
    result[name] = {"metadata": model.metadata, "inputs": model.input_names,
                    "outputs": model.output_names}
result["loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in
                          ("tensorflow", "keras", "tf_keras") and sys.modules[m] is not None)
print("RESULT" + json.dumps(result))
"""


def tagging_case(spm_model, use_crf, scheme):
    from tests.tasks.tagging.test_export import build_model, label_list
    labels = label_list("english", scheme)
    model = build_model("english", use_crf, labels, scheme, seed=1 + use_crf)
    features = real_features(spm_model)
    features["word_mask"] = features["input_mask"].copy()
    features["word_mask"][:, [0, 3]] = 0  # [CLS] and a continuation sub-token
    spec = tagging_export.portable_model(model, labels, scheme, max_seq_length=SEQ,
                                         do_lower_case=True)
    return spec, features


def classifier_case(spm_model):
    features = real_features(spm_model)
    model = built(models.AlbertClassifier(config(), num_labels=3), features)
    spec = dataclasses.replace(glue.TASKS["mnli"], labels=("a", "b", "c"))
    options = ClassificationOptions(task_name="mnli", data_dir="unused", albert_config=config(),
                          spm_model_file=spm_model, output_dir="unused", max_seq_length=SEQ)
    return classifier_portable_model(model, options, spec), features


def multilabel_case(spm_model):
    features = real_features(spm_model)
    model = built(models.AlbertClassifier(config(), num_labels=3, multi_label=True), features)
    custom = glue.CustomTaskOptions("text", "labels", multi_label=True)
    spec = glue.custom_spec(custom, ("x", "y", "z"))
    options = ClassificationOptions(task_name="custom", data_dir="unused", albert_config=config(),
                                    spm_model_file=spm_model, output_dir="unused",
                                    max_seq_length=SEQ, custom=custom)
    # Thresholds around the random model's sigmoids (about 0.5), so rows differ.
    return classifier_portable_model(model, options, spec, [0.49, 0.5, 0.51]), features


def embedding_case(spm_model):
    import argparse

    from albert_tf.modeling.sentence_encoder import AlbertSentenceEncoder
    from albert_tf.tasks.embeddings import export as embeddings_export

    features = real_features(spm_model)
    model = built(AlbertSentenceEncoder(config(), pooling=["mean", "max"], normalize=True),
                  features)
    options = argparse.Namespace(task_name="sts-b", max_seq_length=SEQ, do_lower_case=True)
    return embeddings_export.portable_model(model, options), features


def squad_case(spm_model, v2):
    features = real_features(spm_model)
    if v2:
        features["p_mask"] = 1 - features["input_mask"]
        features["p_mask"][:, 1:4] = 1
    model = built(models.AlbertSquadV2(config(), start_n_top=3, end_n_top=3) if v2
                  else models.AlbertSpanLabeler(config()), features)
    spec = squad_export.portable_model(model, squad_export.ExportOptions(
        max_seq_length=SEQ, version_2_with_negative=v2))
    return spec, features


def multiple_choice_case(spm_model, task):
    features = real_features(spm_model, rows=3, choices=4)
    if task == "c3":
        features["choice_mask"] = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], np.int32)
    model = built(models.AlbertMultipleChoice(config()), features)
    return race_export.portable_model(model, task, SEQ, 8), features


CASES = {
    "classifier": classifier_case,
    "multilabel": multilabel_case,
    "sentence_embedding": embedding_case,
    "squad_v1": lambda spm: squad_case(spm, False),
    "squad_v2": lambda spm: squad_case(spm, True),
    "race": lambda spm: multiple_choice_case(spm, "race"),
    "c3": lambda spm: multiple_choice_case(spm, "c3"),
    "ner_softmax": lambda spm: tagging_case(spm, False, "iob2"),
    "ner_crf": lambda spm: tagging_case(spm, True, "bioes"),
}


@pytest.fixture(scope="module")
def exported(request, spm_model, tmp_path_factory):
    """name -> {spec, features, expected (the serving function's outputs), written, got
    (the LiteRT outputs, from a process without TensorFlow), served (its metadata and
    names)}, for the cases the run's tests use."""
    root = tmp_path_factory.mktemp("litert")
    cases, runs = {}, {}
    wanted = conftest.selected_cases(request, CASES,
                                     read_by_name=("classifier", "race", "ner_crf"))
    for name, make in CASES.items():
        if name not in wanted:
            continue
        spec, features = make(spm_model)
        directory = root / name
        written = portable.export_model_dir(str(directory), spec, ["tflite"],
                                            spm_model_file=spm_model)
        expected = {k: np.asarray(v) for k, v in spec.fn(
            {k: tf.constant(features[k]) for k in spec.input_signature}).items()}
        np.savez(directory / "features.npz", **{k: features[k] for k in spec.input_signature})
        cases[name] = dict(spec=spec, features=features, expected=expected, written=written)
        runs[name] = {"path": written["tflite"], "features": str(directory / "features.npz"),
                      "outputs": str(directory / "outputs.npz")}
    (root / "request.json").write_text(json.dumps(runs))
    done = subprocess.run([sys.executable, "-c", RUNNER, str(root / "request.json")],
                          capture_output=True, text=True, cwd=REPO_ROOT,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads([line for line in done.stdout.splitlines()
                         if line.startswith("RESULT")][-1][len("RESULT"):])
    assert result.pop("loaded") == []  # no TensorFlow, no Keras
    for name, served in result.items():
        cases[name]["served"] = served
        cases[name]["got"] = dict(np.load(runs[name]["outputs"]))
    return cases


# c3's case is slow (22 s); squad_v1's, squad_v2's and ner_softmax's too, so that their exports
# leave the default suite's fixture (test_metadata_and_vocabulary_ride_with_the_file reads the
# others').
SLOW_CASES = ("c3", "ner_softmax", "squad_v1", "squad_v2")


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow)
                                  if name in SLOW_CASES else name for name in sorted(CASES)])
def test_litert_outputs_equal_the_serving_function_without_tensorflow(exported, name):
    case = exported[name]
    got, expected = case["got"], case["expected"]
    assert sorted(got) == sorted(expected) == case["served"]["outputs"]
    assert case["served"]["inputs"] == sorted(case["spec"].input_signature)
    for key, value in expected.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[key], value, atol=1e-4, rtol=1e-4, err_msg=key)
        else:
            assert got[key].dtype == value.dtype, key
            np.testing.assert_array_equal(got[key], value, err_msg=key)
    if name == "c3":  # absent choices masked out, as the SavedModel does
        assert got["probabilities"][1, 2:].max() == 0 and got["predictions"][1] in (0, 1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_metadata_and_vocabulary_ride_with_the_file(exported, name, spm_model):
    case = exported[name]
    metadata = case["served"]["metadata"]
    want = dict(case["spec"].metadata, vocabulary_file=os.path.basename(spm_model),
                tokenizer="sentencepiece", quantization="float32",
                inputs=litert.input_shapes(case["spec"].input_signature))
    assert metadata == json.loads(json.dumps(want))  # JSON round trip: tuples become lists
    directory = os.path.dirname(case["written"]["tflite"])
    assert sorted(f for f in os.listdir(directory) if not f.endswith(".npz")) == sorted(
        ["model.tflite", os.path.basename(spm_model)])  # no temporary files left


def test_batch_and_sequence_length_resize_and_fixed_dimensions_are_checked(exported):
    case = exported["classifier"]
    model = litert_runtime.LiteRTModel(case["written"]["tflite"])
    assert model.input_shapes == {name: (-1, -1) for name in export.TOKEN_FEATURES}
    fn = case["spec"].fn
    for rows, length in ((1, 5), (3, SEQ), (2, 11), (1, 5)):
        features = {k: v[:rows, :length] for k, v in real_features_like(case).items()}
        got = model(**features)
        want = fn({k: tf.constant(v) for k, v in features.items()})
        np.testing.assert_allclose(got["logits"], want["logits"].numpy(), atol=1e-4)

    race = litert_runtime.LiteRTModel(exported["race"]["written"]["tflite"])
    assert race.input_shapes["input_ids"] == (-1, 4, SEQ)
    features = dict(exported["race"]["features"])
    features["input_ids"] = features["input_ids"][:, :, :10]
    with pytest.raises(ValueError, match=r"input 'input_ids' has shape \[3, 4, 10\], the model "
                                         rf"takes \[\?, 4, {SEQ}\] \(\? = any size\)"):
        race(**features)
    with pytest.raises(ValueError, match="takes input_ids, input_mask, segment_ids; missing "
                                         "segment_ids"):
        model(input_ids=features["input_ids"][:, 0], input_mask=features["input_mask"][:, 0])


def real_features_like(case):
    return {k: case["features"][k] for k in export.TOKEN_FEATURES}


def test_fp16_and_int8_files_stay_close_and_state_their_quantization(exported, tmp_path):
    case = exported["classifier"]
    written = portable.export_model_dir(str(tmp_path), case["spec"], ["tflite"], fp16=True,
                                        int8=True)
    sizes = {key: os.path.getsize(written[key]) for key in ("tflite", "tflite_fp16",
                                                            "tflite_int8")}
    assert sizes["tflite_int8"] < sizes["tflite_fp16"] < sizes["tflite"]
    features = real_features_like(case)
    for key, quantization, atol in (("tflite_fp16", "float16", 0.02),
                                    ("tflite_int8", "int8", 0.25)):
        model = litert_runtime.LiteRTModel(written[key])
        assert model.metadata["quantization"] == quantization
        got = model(**features)
        # Random weights at scale 0.3 make large logits: the bound is relative to them.
        scale = np.abs(case["expected"]["logits"]).max()
        assert np.abs(got["logits"] - case["expected"]["logits"]).max() < atol * scale, key


def test_int8_files_that_disagree_are_removed_with_one_warning(tmp_path, caplog):
    float_path, int8_path = tmp_path / "model.tflite", tmp_path / "model.int8.tflite"
    float_path.write_bytes(b"f")
    int8_path.write_bytes(b"q")
    predictions = {str(float_path): np.array([0, 1, 2, 1, -1]),
                   str(int8_path): np.array([0, 1, 0, 1, 2])}  # 3 of the 4 scored agree

    def runner(path):
        return lambda features: {"predictions": predictions[path][features["input_ids"][:, 0]]}
    features = {"input_ids": np.arange(5)[:, None]}
    result = portable.check_int8(str(float_path), str(int8_path), runner,
                                 (("predictions", "values"),), features, 0.75)
    assert result == {"agreement": 0.75, "compared": 4, "kept": True} and int8_path.exists()
    with caplog.at_level("WARNING"):
        result = portable.check_int8(str(float_path), str(int8_path), runner,
                                     (("predictions", "values"),), features, 0.8)
    assert result["kept"] is False and not int8_path.exists() and float_path.exists()
    warning = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning == ["model.int8.tflite agrees with model.tflite on 75.00% of 4 predictions "
                       "(5 evaluation examples), below --int8_min_agreement=0.8: removed it; "
                       "serve the float32 file"]


def test_prediction_agreement_rules():
    reference = {"logits": np.array([[0.1, 0.9], [0.8, 0.2]]),
                 "top": np.array([[3, 1], [2, 0]]), "tags": np.array([[1, -1, 2], [0, 0, -1]])}
    other = {"logits": np.array([[0.2, 0.7], [0.3, 0.6]]),
             "top": np.array([[3, 0], [1, 2]]), "tags": np.array([[1, 5, 0], [0, 0, 4]])}
    assert portable.prediction_agreement(reference, other, (("logits", "argmax"),)) == (0.5, 2)
    assert portable.prediction_agreement(reference, other, (("top", "first"),)) == (0.5, 2)
    assert portable.prediction_agreement(reference, other, (("tags", "values"),)) == (0.75, 4)
    assert portable.prediction_agreement(reference, other, ()) == (1.0, 0)
    # SQuAD v1: the argmax over the passage (p_mask 0, [CLS] excluded), not the window.
    spans = {"start": np.array([[9.0, 0.1, 5.0, 0.3, 0.2], [9.0, 3.0, 0.0, 0.4, 0.5]])}
    moved = {"start": np.array([[8.0, 0.1, 5.0, 0.2, 0.3], [8.0, 3.0, 0.0, 0.5, 0.4]])}
    p_mask = np.array([[0, 1, 1, 0, 0], [0, 1, 1, 0, 0]])
    assert portable.prediction_agreement(spans, moved, (("start", "argmax"),)) == (1.0, 2)
    assert portable.prediction_agreement(spans, moved, (("start", "context_argmax"),),
                                         {"p_mask": p_mask}) == (0.0, 2)


def test_ops_without_a_litert_kernel_fail_in_one_line_and_write_nothing(tmp_path):
    def fn(features):  # a string op: no LiteRT builtin, only the TensorFlow (Flex) runtime
        ids = tf.strings.as_string(features["input_ids"])
        return {"lengths": tf.strings.length(ids)}
    signature = {"input_ids": tf.TensorSpec([None, None], tf.int32)}
    with pytest.raises(litert.LiteRTConversionError) as caught:
        litert.write_tflite(fn, signature, str(tmp_path / "model.tflite"))
    message = str(caught.value)
    assert "\n" not in message and "--export_format=tflite" in message
    assert "AsString" in message or "StringLength" in message, message
    assert os.listdir(tmp_path) == []


def test_export_flag_mistakes_name_the_flag(tmp_path, monkeypatch):
    from albert_tf.export import formats
    check = formats.check_export_formats
    with pytest.raises(ValueError, match="--export_fp16 writes a float16 LiteRT model: add "
                                         "tflite to --export_format"):
        check(("saved_model", "onnx"), False, export_dir="out", fp16=True)
    with pytest.raises(ValueError, match="--int8_min_agreement is a fraction between 0 and 1; "
                                         "got 1.5"):
        check(("tflite",), True, export_dir="out", int8_min_agreement=1.5)
    with pytest.raises(ValueError, match=r"^--export_format=tflite exports a float32 graph"):
        check(("tflite",), False, export_dir="out", mixed_precision="mixed_float16")
    a_file = tmp_path / "export"
    a_file.write_text("not a directory")
    with pytest.raises(ValueError, match=f"--export_dir {a_file} is a file; give a directory"):
        check(("saved_model", "tflite"), False, export_dir=str(a_file))
    with pytest.raises(ValueError, match=r"^--export_format=saved_model,tflite and "
                                         r"--export_fp16: nothing is exported without "
                                         r"--export_dir"):
        check(("saved_model", "tflite"), False, export_dir=None, fp16=True)
    check(("saved_model", "tflite"), True, export_dir="out", fp16=True)

    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ai_edge_litert" else real(name, *a))
    with pytest.raises(ValueError, match="--int8_min_agreement=0.98 runs model.int8.tflite "
                                         "beside model.tflite, which needs ai-edge-litert, not "
                                         "installed"):
        check(("tflite",), True, export_dir="out", int8_min_agreement=0.98)
    check(("tflite",), True, export_dir="out", int8_min_agreement=0)  # no check, no need
    check(("tflite",), False, export_dir="out", int8_min_agreement=0.98)


def test_tagging_constraints_survive_conversion(exported):
    """Constrained Viterbi in LiteRT never outputs an invalid tag sequence."""
    case = exported["ner_crf"]
    labels = case["spec"].metadata["labels"]
    got = case["got"]["predictions"]
    for row, mask in zip(got, case["features"]["word_mask"]):
        tags = [labels[i] for i, on in zip(row, mask) if on]
        assert schemes.is_valid(tags, "bioes"), tags
    assert len(set(got[case["features"]["word_mask"] == 1].tolist())) > 1  # not all one tag


@pytest.mark.parametrize("before", [0, 20])  # NOTSET (the default) and an INFO the user set
def test_the_quiet_converter_gives_the_absl_logger_its_own_level_back(before):
    """The converter's chatter is kept to errors while it runs, and the absl logger's level
    is restored as it was: pinned at the root's WARNING, a library user's later INFO
    lines (and pytest's caplog) would be silenced."""
    from absl import logging as absl_logging

    absl_logger = absl_logging.get_absl_logger()
    saved = absl_logger.level
    absl_logger.setLevel(before)
    try:
        with litert._quiet_converter():
            assert absl_logger.level == 40
        assert absl_logger.level == before
    finally:
        absl_logger.setLevel(saved)
