"""Early exit inside the portable files: ONNX Runtime and LiteRT run the loop over layers
(each group's layer chosen in the graph), rows leaving the batch as they exit, and give
the Python model's exit layers and logits."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import litert, onnx as onnx_export, saved_model
from albert_tf.modeling.early_exit import EarlyExit
from tests.modeling.test_early_exit import batch_of, classifier, deep_config


@pytest.fixture(scope="module")
def model():
    config = deep_config()
    model = classifier(config, "per_layer", seed=6)
    model.early_exit = EarlyExit(patience=1)
    return model


def check_against_python(model, outputs, batch):
    want = tf.function(model)(batch)
    assert len(set(want["exit_layer"].numpy().tolist())) > 1, "no mix of exits to check"
    np.testing.assert_array_equal(np.asarray(outputs["exit_layer"]), want["exit_layer"])
    np.testing.assert_array_equal(np.asarray(outputs["predictions"]), want["predictions"])
    np.testing.assert_allclose(np.asarray(outputs["logits"]), want["logits"], atol=1e-4,
                               rtol=1e-4)


@pytest.mark.slow  # 25 s: an ONNX and a LiteRT conversion (the default suite's budget)
def test_onnx_and_litert_exit_where_python_does(model, tmp_path):
    batch = batch_of(model.config, rows=16, seed=4)
    fn = onnx_export.model_function(model, ["logits", "exit_layer"], argmax_of="logits")
    signature = saved_model.token_input_signature()
    onnxruntime = pytest.importorskip("onnxruntime")
    onnx_export.write_onnx(fn, signature, str(tmp_path / "model.onnx"))
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"))
    names = [output.name for output in session.get_outputs()]
    check_against_python(model, dict(zip(names, session.run(None, batch))), batch)
    # The layer's weights are read from the enclosing graph, not carried through the loops
    # (`onnx.hoist_loop_constants`: carried, ONNX Runtime pre-packs none of them).
    import onnx
    graph = onnx.load(str(tmp_path / "model.onnx")).graph
    weights = {initializer.name for initializer in graph.initializer
               if len(initializer.dims) >= 2 and initializer.data_type == onnx.TensorProto.FLOAT}
    loops = [node for node in graph.node if node.op_type == "Loop"]
    assert len(loops) == 2  # one per layer group
    assert not [name for loop in loops for name in loop.input[2:] if name in weights]
    # One row at a time: each row's exit does not depend on the others in its batch.
    for row in (0, 5, 11):
        alone = dict(zip(names, session.run(None, {k: v[row:row + 1]
                                                   for k, v in batch.items()})))
        want = tf.function(model)({k: v[row:row + 1] for k, v in batch.items()})
        assert alone["exit_layer"].tolist() == want["exit_layer"].numpy().tolist()

    from albert_tf.export.litert_runtime import LiteRTModel, runtime_available
    if not runtime_available():
        pytest.skip("ai-edge-litert is not installed")
    litert.write_tflite(fn, signature, str(tmp_path / "model.tflite"))
    check_against_python(model, LiteRTModel(str(tmp_path / "model.tflite"))(**batch), batch)


def run_onnx(fn, signature, path, batch):
    onnxruntime = pytest.importorskip("onnxruntime")
    onnx_export.write_onnx(fn, signature, path)
    session = onnxruntime.InferenceSession(path)
    names = [output.name for output in session.get_outputs()]
    feeds = {i.name: batch[i.name] for i in session.get_inputs()}
    return dict(zip(names, session.run(None, feeds)))


def onnx_exits_as_python(model, portable, batch, path):
    """The portable model's ONNX file gives the Python model's exit layers (a mix of them)
    and predictions on `batch`."""
    outputs = run_onnx(portable.fn, portable.input_signature, path, batch)
    want = tf.function(model)(batch)
    assert len(set(want["exit_layer"].numpy().tolist())) > 1
    np.testing.assert_array_equal(outputs["exit_layer"], want["exit_layer"])
    np.testing.assert_array_equal(outputs["predictions"], want["predictions"])


@pytest.mark.slow  # 45 s: two models, two ONNX conversions
def test_multiple_choice_and_tagger_exports_exit_where_python_does(tmp_path):
    from albert_tf import AlbertMultipleChoice
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier
    from albert_tf.tasks.multiple_choice import export as choice_export
    from albert_tf.tasks.tagging import export as tagging_export
    from tests.modeling.test_early_exit import choice_batch
    from tests.modeling.test_numerics import randomize

    config = deep_config()
    chooser = AlbertMultipleChoice(config, num_choices=4, exit_heads="per_layer",
                                   early_exit={"patience": 1})
    chooser.build()
    randomize(chooser.weights, seed=6, matrix_scale=0.5)
    batch = choice_batch(config, questions=8)
    portable = choice_export.portable_model(chooser, "race", max_seq_length=11,
                                            max_qa_length=5, do_lower_case=True)
    onnx_exits_as_python(chooser, portable, batch, str(tmp_path / "mc.onnx"))
    assert portable.metadata["early_exit"]["patience"] == 1

    tagger = AlbertTokenClassifier(config, num_labels=3, exit_heads="shared",
                                   early_exit={"patience": 1})
    tagger.build()
    randomize(tagger.weights, seed=3, matrix_scale=0.5)
    batch = batch_of(config, rows=12, seed=5)
    batch["word_mask"] = batch["input_mask"].copy()
    portable = tagging_export.portable_model(tagger, ["O", "B-X", "I-X"], "iob2",
                                             max_seq_length=11, do_lower_case=True)
    onnx_exits_as_python(tagger, portable, batch, str(tmp_path / "tag.onnx"))
