"""ONNX export (albert_tf.export.onnx): every task model's ONNX graph computes what the Keras
model computes, on token ids of real text, run by ONNX Runtime; int8 stays close; the
files are written atomically, with metadata and the vocabulary beside them; bad
requests fail with a message naming the flag or the op."""
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import export, tokenization
from albert_tf.export import hub as hub_export, int8_arithmetic, onnx as onnx_export, portable
from albert_tf.modeling import models
from albert_tf.tasks.multiple_choice import export as race_export
from albert_tf.tasks.span_qa import export as squad_export
from tests.conftest import REPO_ROOT
from tests.modeling.test_numerics import randomize, tiny_config

ort = pytest.importorskip("onnxruntime")

SEQ = 24
HELDOUT = sorted((REPO_ROOT / "demo_corpus" / "heldout").glob("*.txt"))[0]
SENTENCES = [line.strip() for line in HELDOUT.read_text(encoding="utf-8").splitlines()
             if len(line.split()) > 8][:6]  # real text from the shipped demo corpus


def config():
    return tiny_config(vocab_size=8000, max_position_embeddings=SEQ)


def real_features(spm_model, rows=3, choices=None):
    """[CLS] A [SEP] B [SEP] features of real sentences (int32 [rows, SEQ], or
    [rows, choices, SEQ]), padded: the rows have different lengths."""
    tokenizer = tokenization.FullTokenizer(spm_model_file=spm_model)
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)) for s in SENTENCES]
    count = rows * (choices or 1)
    features = {name: np.zeros((count, SEQ), np.int32) for name in export.TOKEN_FEATURES}
    for row in range(count):
        a = ids[row % len(ids)][:6 + row % 5]
        b = ids[(row + 1) % len(ids)][:5 + row % 4]
        packed = [tokenizer.vocab["[CLS]"]] + a + [tokenizer.vocab["[SEP]"]] + b + \
            [tokenizer.vocab["[SEP]"]]
        features["input_ids"][row, :len(packed)] = packed
        features["input_mask"][row, :len(packed)] = 1
        features["segment_ids"][row, len(a) + 2:len(packed)] = 1
    if choices:
        features = {k: v.reshape(rows, choices, SEQ) for k, v in features.items()}
    return features


def run_onnx(path, feeds):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {i.name: feeds[i.name]
                                              for i in session.get_inputs()})))


def built(model, features):
    model(features, training=False)
    randomize(model.weights)
    return model


def realistic(model, features, seed=0):
    """`model` built, its weights drawn at the scale of a trained ALBERT's (matrices with a
    standard deviation of 0.04, biases and LayerNorm offsets of 0.02): what int8 files are
    made from. `built`'s larger random weights (0.3) make dynamic int8 quantization's
    error depend on the CPU's int8 kernels: 1.6% of the logits' spread with exact sums,
    30% where pairs saturate (int8_arithmetic; an AVX2-only EPYC measured 40% of the
    largest logit), which says nothing about a trained model."""
    model(features, training=False)
    randomize(model.weights, seed, matrix_scale=0.04, vector_scale=0.02)
    return model


def test_classifier_onnx_matches_keras_with_metadata_vocabulary_and_int8(spm_model, tmp_path):
    features = real_features(spm_model)
    model = realistic(models.AlbertClassifier(config(), num_labels=3), features)
    expected = model(features, training=False)
    fn = onnx_export.model_function(model, ["probabilities", "logits"], argmax_of="logits")
    written = onnx_export.export_model_dir(str(tmp_path), fn, export.token_input_signature(),
                                           {"task": "classifier", "labels": ["x", "y", "z"]},
                                           int8=True, spm_model_file=spm_model)
    assert written == {"onnx": str(tmp_path / "model.onnx"),
                       "onnx_int8": str(tmp_path / "model.int8.onnx")}
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["model.onnx", "model.int8.onnx", os.path.basename(spm_model)])  # no temp files
    got = run_onnx(written["onnx"], features)
    assert sorted(got) == ["logits", "predictions", "probabilities"]
    np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-6)
    np.testing.assert_array_equal(got["predictions"], expected["predictions"])
    assert got["predictions"].dtype == np.int32
    assert onnx_export.read_metadata(written["onnx"]) == {
        "task": "classifier", "labels": ["x", "y", "z"],
        "vocabulary_file": os.path.basename(spm_model), "tokenizer": "sentencepiece"}

    import onnx
    quantized = onnx.load(written["onnx_int8"])
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= {n.op_type for n in quantized.graph.node}
    # The file as both kinds of CPU compute it (int8_arithmetic: exact int32 sums with VNNI,
    # pairs saturated to int16 without), whatever CPU runs the test: with 7-bit weights
    # (Int8Settings.reduce_range) no pair saturates, so both give the same logits, which
    # this CPU's own ONNX Runtime reproduces. The error, 0.5% of the logits' spread
    # measured, on weights at a trained model's scale (see `realistic`); the same file with
    # 8-bit weights: 0.5% with exact sums, 2.5% where pairs saturate.
    int8 = run_onnx(written["onnx_int8"], features)
    emulated = {}
    for arithmetic in int8_arithmetic.ARITHMETICS:
        path = str(tmp_path / f"emulated_{arithmetic}.onnx")
        onnx.save(int8_arithmetic.emulate(quantized, arithmetic), path)
        emulated[arithmetic] = run_onnx(path, features)["logits"]
    np.testing.assert_array_equal(emulated["exact"], emulated["saturating"])
    np.testing.assert_allclose(int8["logits"], emulated["exact"], atol=1e-5)
    error = np.abs(int8["logits"] - got["logits"]).max()
    assert 0 < error < 0.03 * np.ptp(got["logits"]), error / np.ptp(got["logits"])


def squad_case(spm_model, v2):
    features = real_features(spm_model)
    if v2:
        features["p_mask"] = 1 - features["input_mask"]
        features["p_mask"][:, 1:4] = 1
    model = built(models.AlbertSquadV2(config(), start_n_top=3, end_n_top=3) if v2
                  else models.AlbertSpanLabeler(config()), features)
    return model, features, lambda path: portable.export_model_dir(
        path, squad_export.portable_model(
            model, squad_export.ExportOptions(version_2_with_negative=v2)), ["onnx"])


def multiple_choice_case(spm_model, task):
    features = real_features(spm_model, rows=3, choices=4)
    if task == "c3":
        features["choice_mask"] = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], np.int32)
    model = built(models.AlbertMultipleChoice(config()), features)
    return model, features, lambda path: portable.export_model_dir(
        path, race_export.portable_model(model, task, SEQ, 8), ["onnx"])


@pytest.mark.slow  # squad_v2 10 s, c3 7 s, race 5 s, squad_v1 4 s
@pytest.mark.parametrize("case", ["squad_v1", "squad_v2", "race", "c3"])
def test_task_onnx_matches_the_saved_model_token_signature(spm_model, tmp_path, case):
    if case.startswith("squad"):
        model, features, write = squad_case(spm_model, case == "squad_v2")
        module = squad_export.SquadServingModule(model, spm_model, squad_export.ExportOptions(
            max_seq_length=SEQ, version_2_with_negative=case == "squad_v2"))
        p_mask = features.get("p_mask", np.zeros_like(features["input_ids"]))
        expected = module.serve_tokens({k: tf.constant(v) for k, v in
                                        dict(features, p_mask=p_mask).items()})
    else:
        model, features, write = multiple_choice_case(spm_model, case)
        tokenizer = tokenization.in_graph_tokenizer(spm_model_file=spm_model)
        module = (race_export.C3ServingModule(model, tokenizer, SEQ) if case == "c3"
                  else race_export.RaceServingModule(model, tokenizer, SEQ, 8))
        expected = module.serve_tokens({k: tf.constant(v) for k, v in features.items()})
        expected = {"probabilities": expected["probabilities"],
                    "predictions": expected["prediction_ids"]}
    got = run_onnx(write(str(tmp_path))["onnx"], features)
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        value = np.asarray(value)
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[name], value, atol=2e-5, rtol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)
    if case == "c3":
        assert got["probabilities"][1, 2:].max() == 0 and got["predictions"][1] in (0, 1)
    metadata = onnx_export.read_metadata(str(tmp_path / "model.onnx"))
    assert metadata["task"] in ("squad_v1", "squad_v2", "multiple_choice")


@pytest.mark.slow  # 7 s
def test_pretrainer_onnx_matches_keras(spm_model, tmp_path):
    features = real_features(spm_model)
    positions = np.array([[1, 3], [2, 5], [4, 6]], np.int32)
    model = built(models.AlbertPretrainer(config()),
                  dict(features, masked_lm_positions=positions))
    expected = model(dict(features, masked_lm_positions=positions), training=False)
    # The hub layout's one vocab_file is told apart by content, not by its name.
    renamed = tmp_path / "vocab.txt"
    shutil.copyfile(spm_model, renamed)
    written = hub_export.export_pretrainer_onnx(model, str(tmp_path / "export"),
                                                vocab_file=str(renamed))
    got = run_onnx(written["onnx"], dict(features, mlm_positions=positions))
    for name in ("sequence_output", "pooled_output", "mlm_logits"):
        np.testing.assert_allclose(got[name], expected[name], atol=3e-5, rtol=1e-5,
                                   err_msg=name)
    np.testing.assert_allclose(got["sop_log_probs"],
                               tf.nn.log_softmax(expected["sop_logits"]), atol=1e-5)
    metadata = onnx_export.read_metadata(written["onnx"])
    assert metadata["albert_config"]["vocab_size"] == 8000
    assert metadata["tokenizer"] == "sentencepiece" and metadata["vocabulary_file"] == "vocab.txt"


def test_onnx_graph_is_portable_even_after_in_process_calls(spm_model):
    """The in-process graph of the same model holds XLA functions and oneDNN's
    _MklLayerNorm; the ONNX conversion traces the portable graph whatever ran before."""
    features = real_features(spm_model)
    model = built(models.AlbertClassifier(config(), num_labels=2), features)
    tf.function(lambda f: model(f, training=False))(features)  # fused kernels in process
    proto = onnx_export.to_onnx_proto(onnx_export.model_function(model, ["logits"]),
                                      export.token_input_signature())
    import onnx
    onnx.checker.check_model(proto)
    assert [i.name for i in proto.graph.input] == list(export.TOKEN_FEATURES)
    assert [o.name for o in proto.graph.output] == ["logits"]


def test_ops_without_onnx_conversion_fail_by_name_and_keep_the_previous_file(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"previous export")

    def bitcast(features):  # Keras' argmax spells this op on TensorFlow
        return {"bits": tf.bitcast(tf.cast(features["input_ids"], tf.float32), tf.int32)}

    with pytest.raises(ValueError, match="ONNX has no conversion for: Bitcast"):
        onnx_export.write_onnx(bitcast, export.token_input_signature(), str(path))
    assert path.read_bytes() == b"previous export"
    assert os.listdir(tmp_path) == ["model.onnx"]


@pytest.mark.parametrize("formats, int8, message", [
    ((), False,
     "--export_format takes a comma-separated list of saved_model, onnx, tflite; got ''"),
    (("saved_model", "pdf"), False, "got 'saved_model,pdf'"),
    (("saved_model",), True, "--export_int8 quantizes the ONNX and LiteRT models: add onnx "
                             "or tflite to --export_format"),
])
def test_export_format_mistakes_name_the_flag(formats, int8, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        onnx_export.check_export_formats(formats, int8, export_dir="out")
    onnx_export.check_export_formats(("saved_model", "onnx"), True, export_dir="out")


def test_export_choices_without_an_export_dir_are_refused():
    """They would be ignored: the job would train and export nothing."""
    with pytest.raises(ValueError, match=r"^--export_format=saved_model,onnx and --export_int8: "
                                         r"nothing is exported without --export_dir \(set"):
        onnx_export.check_export_formats(("saved_model", "onnx"), True, export_dir=None)
    with pytest.raises(ValueError, match=r"^--export_format=onnx: nothing is exported"):
        onnx_export.check_export_formats(("onnx",), False, export_dir="")
    # The default says nothing about --export_dir: no export, no error.
    onnx_export.check_export_formats(onnx_export.DEFAULT_EXPORT_FORMATS, False, export_dir=None)


def test_missing_onnx_packages_are_reported_before_any_work(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tf2onnx" else real(name, *a))
    with pytest.raises(ValueError, match="--export_format=onnx needs tf2onnx, not installed"):
        onnx_export.check_export_formats(("onnx",), False, export_dir="out")


def test_mixed_precision_and_remote_directories_are_refused_for_onnx():
    with pytest.raises(ValueError, match="--mixed_precision=mixed_bfloat16 may train in 16 bits"):
        onnx_export.check_export_formats(("onnx",), False, mixed_precision="mixed_bfloat16",
                                         export_dir="out")
    with pytest.raises(ValueError, match="writes to a local --export_dir; got gs://b/x"):
        onnx_export.check_export_formats(("onnx",), False, export_dir="gs://b/x")
    onnx_export.check_export_formats(("saved_model",), False, mixed_precision="mixed_bfloat16",
                                     export_dir="gs://b/x")


@pytest.mark.slow  # 10 s
def test_reexport_without_int8_removes_the_stale_int8_file_and_records_the_tokenizer(
        spm_model, tmp_path):
    features = real_features(spm_model)
    model = built(models.AlbertClassifier(config(), num_labels=2), features)
    fn = onnx_export.model_function(model, ["logits"])
    onnx_export.export_model_dir(str(tmp_path), fn, export.token_input_signature(), {},
                                 int8=True, spm_model_file=spm_model)
    assert (tmp_path / "model.int8.onnx").exists()
    assert onnx_export.read_metadata(str(tmp_path / "model.onnx"))["tokenizer"] == "sentencepiece"
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    onnx_export.export_model_dir(str(tmp_path), fn, export.token_input_signature(), {},
                                 vocab_file=str(vocab))
    assert not (tmp_path / "model.int8.onnx").exists()
    assert onnx_export.read_metadata(str(tmp_path / "model.onnx"))["tokenizer"] == "wordpiece"
