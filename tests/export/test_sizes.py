"""Exported files store each ALBERT weight once: model.onnx and model.tflite take at most
1.05x the float32 parameter bytes, the int8 files at most 0.3x, model.fp16.tflite at most
0.55x, for a classifier and for the pretrainer (whose masked-LM decoder is tied to the word
embeddings), at a shape where sharing matters: 12 layers applying one shared group, and a
vocabulary whose table is 30% of the weights. The de-duplicated ONNX graph computes what
the Keras model computes.

The hidden size is 512 rather than smaller because a file's graph takes bytes of its own,
whatever the weights (20-30 KB per layer, mostly tf2onnx's tensor names): at hidden 64 the
graph alone is 0.2x (float32) to 0.3x (int8) the parameter bytes, and the ratios would
measure the graph instead of how the weights are stored.
"""
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import export
from albert_tf.export import hub as hub_export, litert, onnx as onnx_export
from albert_tf.modeling import models
from tests.modeling.test_numerics import tiny_config

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

SEQ = 16
FLOAT_LIMIT, INT8_LIMIT, FP16_LIMIT = 1.05, 0.3, 0.55


def sharing_config():
    """12 layers sharing one group; the word embeddings (8000 x 128) are 1.0 M of 3.5 M
    parameters, so a second copy of them would add 0.3x."""
    return tiny_config(vocab_size=8000, embedding_size=128, hidden_size=512,
                       intermediate_size=1024, num_attention_heads=8, num_hidden_layers=12,
                       num_hidden_groups=1, inner_group_num=1, max_position_embeddings=SEQ)


def token_features(batch=3):
    """int32 [batch, SEQ] token features with padded rows and two segments; ids spread
    over the whole vocabulary."""
    rng = np.random.default_rng(0)
    features = {"input_ids": rng.integers(5, 8000, (batch, SEQ)).astype(np.int32),
                "input_mask": np.ones((batch, SEQ), np.int32),
                "segment_ids": np.zeros((batch, SEQ), np.int32)}
    features["input_mask"][1, 10:] = 0
    features["input_mask"][2, 6:] = 0
    features["segment_ids"][:, 5:] = 1
    return features


POSITIONS = np.array([[1, 3, 7], [2, 5, 9], [0, 4, 5]], np.int32)


@pytest.fixture(scope="module")
def classifier():
    """Keras' own initialisation: weights of truncated-normal std 0.02, as pretraining
    starts, so that int8 errors are those of a realistic weight scale."""
    keras.utils.set_random_seed(0)
    model = models.AlbertClassifier(sharing_config(), num_labels=3)
    model(token_features(), training=False)
    return model


@pytest.fixture(scope="module")
def pretrainer():
    keras.utils.set_random_seed(0)
    model = models.AlbertPretrainer(sharing_config())
    model(dict(token_features(), masked_lm_positions=POSITIONS), training=False)
    return model


def parameter_bytes(model) -> int:
    return 4 * model.count_params()


def assert_ratio(path, model, limit):
    ratio = os.path.getsize(path) / parameter_bytes(model)
    assert ratio <= limit, f"{os.path.basename(path)}: {ratio:.3f}x the parameter bytes"


def run_onnx(path, features):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {i.name: features[i.name]
                                              for i in session.get_inputs()})))


def table_copies(path, vocab_size=8000):
    """How many initializers of an ONNX file hold vocab_size x E values (the word
    embeddings, float or int8)."""
    model = onnx.load(path)
    return sum(1 for init in model.graph.initializer
               if len(init.dims) == 2 and vocab_size in init.dims)


@pytest.mark.slow  # 12 layers of H=512: seconds per conversion
def test_classifier_onnx_sizes_and_outputs(classifier, tmp_path):
    features = token_features()
    fn = onnx_export.model_function(classifier, ["logits"], argmax_of="logits")
    written = onnx_export.export_model_dir(str(tmp_path), fn, export.token_input_signature(),
                                           {"task": "classifier"}, int8=True)
    assert_ratio(written["onnx"], classifier, FLOAT_LIMIT)
    assert_ratio(written["onnx_int8"], classifier, INT8_LIMIT)
    assert table_copies(written["onnx_int8"]) == 1  # the lookup reads int8 rows
    expected = classifier(features, training=False)["logits"]
    np.testing.assert_allclose(run_onnx(written["onnx"], features)["logits"], expected,
                               atol=1e-5)
    int8 = run_onnx(written["onnx_int8"], features)["logits"]
    assert np.abs(int8 - expected).max() < 0.1 * np.abs(expected).max() + 1e-3


@pytest.mark.slow  # 12 layers of H=512: seconds per conversion
def test_pretrainer_onnx_stores_the_tied_embeddings_once(pretrainer, tmp_path):
    features = dict(token_features(), mlm_positions=POSITIONS)
    written = hub_export.export_pretrainer_onnx(pretrainer, str(tmp_path), int8=True)
    assert_ratio(written["onnx"], pretrainer, FLOAT_LIMIT)
    assert_ratio(written["onnx_int8"], pretrainer, INT8_LIMIT)
    assert table_copies(written["onnx"]) == 1 and table_copies(written["onnx_int8"]) == 1

    expected = pretrainer(dict(token_features(), masked_lm_positions=POSITIONS),
                          training=False)
    got = run_onnx(written["onnx"], features)
    for name in ("sequence_output", "pooled_output", "mlm_logits"):
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, err_msg=name)
    np.testing.assert_allclose(got["sop_log_probs"],
                               tf.nn.log_softmax(expected["sop_logits"]), atol=1e-5)

    # Quantized, and close. Over seeds 0-5 (AMD EPYC Zen 3) the mean error is 2.7-3.2% of
    # the mean |logit| and the correlation 0.9995; the largest single error is 5-14% of the
    # largest |logit|, too spread to bound.
    int8, floats = run_onnx(written["onnx_int8"], features)["mlm_logits"], got["mlm_logits"]
    error = np.abs(int8 - floats)
    assert 0 < error.mean() < 0.06 * np.abs(floats).mean()
    assert np.corrcoef(int8.ravel(), floats.ravel())[0, 1] > 0.998


@pytest.mark.slow  # 12 layers of H=512: seconds per conversion
def test_classifier_tflite_sizes(classifier, tmp_path):
    fn = onnx_export.model_function(classifier, ["logits"], argmax_of="logits")
    written = litert.export_model_dir(str(tmp_path), fn, export.token_input_signature(),
                                      {"task": "classifier"}, fp16=True, int8=True)
    assert_ratio(written["tflite"], classifier, FLOAT_LIMIT)
    assert_ratio(written["tflite_fp16"], classifier, FP16_LIMIT)
    assert_ratio(written["tflite_int8"], classifier, INT8_LIMIT)


@pytest.fixture(scope="module")
def pretrainer_tflite(pretrainer, tmp_path_factory):
    """The pretrainer's three LiteRT files, converted from one trace."""
    export_dir = tmp_path_factory.mktemp("pretrainer_tflite")
    return hub_export.export_pretrainer_tflite(pretrainer, str(export_dir), fp16=True,
                                               int8=True)


@pytest.mark.slow  # 12 layers of H=512: seconds per conversion
def test_pretrainer_tflite_float_and_fp16_sizes_and_outputs(pretrainer, pretrainer_tflite):
    from albert_tf.export import litert_runtime
    assert sorted(pretrainer_tflite) == ["tflite", "tflite_fp16", "tflite_int8"]
    assert_ratio(pretrainer_tflite["tflite"], pretrainer, FLOAT_LIMIT)
    assert_ratio(pretrainer_tflite["tflite_fp16"], pretrainer, FP16_LIMIT)

    features = dict(token_features(), mlm_positions=POSITIONS)
    model = litert_runtime.LiteRTModel(pretrainer_tflite["tflite"])
    got = model(**{name: features[name] for name in model.input_names})
    expected = pretrainer(dict(token_features(), masked_lm_positions=POSITIONS),
                          training=False)
    np.testing.assert_allclose(got["mlm_logits"], expected["mlm_logits"], atol=1e-5)
    assert litert_runtime.read_metadata(pretrainer_tflite["tflite"])["task"] == "pretrainer"


def read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def int8_tables(data, vocab_size=8000):
    """The (shape, scale count) of each stored (non-empty) constant int8 table of a
    LiteRT flatbuffer's bytes holding vocab_size x E values (the word embeddings)."""
    schema = litert._schema()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))
    return [(tuple(tensor.shape), len(tensor.quantization.scale))
            for subgraph in model.subgraphs for tensor in subgraph.tensors
            if tensor.type == schema.TensorType.INT8 and tensor.shape is not None
            and len(tensor.shape) == 2 and vocab_size in tensor.shape
            and model.buffers[tensor.buffer].data is not None
            and len(model.buffers[tensor.buffer].data)]


@pytest.mark.slow  # 12 layers of H=512: seconds per conversion
def test_pretrainer_tflite_int8_stores_the_tied_embeddings_once(pretrainer, pretrainer_tflite):
    """The lookup and the decoder read one int8 table with a scale per row
    (`litert_tables`), and the outputs stay within int8's error of the float32 file's."""
    from albert_tf.export import litert_runtime
    assert_ratio(pretrainer_tflite["tflite_int8"], pretrainer, INT8_LIMIT)
    assert int8_tables(read_bytes(pretrainer_tflite["tflite_int8"])) == [
        ((8000, 128), 8000)]

    features = dict(token_features(), mlm_positions=POSITIONS)
    runs = {}
    for key in ("tflite", "tflite_int8"):
        model = litert_runtime.LiteRTModel(pretrainer_tflite[key])
        runs[key] = model(**{name: features[name] for name in model.input_names})
    for name, expected in runs["tflite"].items():
        error = np.abs(runs["tflite_int8"][name] - expected).max()
        assert 0 < error < 0.1 * np.abs(expected).max(), name  # quantized, and close
    assert litert_runtime.read_metadata(pretrainer_tflite["tflite_int8"])[
        "quantization"] == "int8"


@pytest.mark.slow  # 12 layers of H=512: seconds per conversion
def test_share_tied_tables_is_a_no_op_without_a_tied_table(classifier, pretrainer_tflite):
    """A classifier's int8 file (an int8 lookup table and no decoder reading it) and a
    file the pass already changed come back byte for byte."""
    from albert_tf.export import litert_tables
    fn = onnx_export.model_function(classifier, ["logits"], argmax_of="logits")
    data = litert.to_tflite(fn, export.token_input_signature(), quantization="int8")
    assert litert_tables.share_tied_tables(data, litert._schema()) is data
    assert int8_tables(data) == [((8000, 128), 1)]  # the lookup's, per tensor
    shared = read_bytes(pretrainer_tflite["tflite_int8"])
    assert litert_tables.share_tied_tables(shared, litert._schema()) is shared


def test_tables_are_shared_only_when_both_round_one_float_table():
    """The per-row and per-tensor int8 tables of one float table match; a per-row table
    of another float table (a row negated) does not."""
    from albert_tf.export.litert_tables import _same_float_table
    rng = np.random.default_rng(3)
    table = rng.normal(0, 0.02, (200, 16))
    table[5] *= 20
    row_scale = np.abs(table).max(axis=1) / 127
    tensor_scale = np.abs(table).max() / 127
    per_row = np.round(table / row_scale[:, None]).astype(np.int8)
    per_tensor = np.round(table / tensor_scale).astype(np.int8)
    row_q = (row_scale, np.zeros(200), 0)
    tensor_q = (np.array([tensor_scale]), np.zeros(1), 0)
    assert _same_float_table(per_row, row_q, per_tensor, tensor_q)
    other = per_row.copy()
    other[17] = -other[17]
    assert not _same_float_table(other, row_q, per_tensor, tensor_q)


def small_graph(table, extra):
    """An ONNX graph looking rows up in `table` [V, E] (Gather) and multiplying them by
    `extra` [E, V] (MatMul): ids int64 [N] -> logits float32 [N, V]."""
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"]),
             helper.make_node("MatMul", ["rows", "extra"], ["logits"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, table.shape[0]])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(extra, "extra")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_proto(model, ids):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"ids": ids})[0]


@pytest.mark.parametrize("relation", ["transposed", "equal", "different"])
def test_share_weights_replaces_only_exact_copies(relation):
    rng = np.random.default_rng(1)
    table = rng.normal(0, 0.02, (64, 64)).astype(np.float32)
    extra = {"transposed": table.T, "equal": table,
             "different": np.nextafter(table.T, 1, dtype=np.float32)}[relation]
    model = small_graph(table, np.ascontiguousarray(extra))
    ids = np.array([3, 0, 63], np.int64)
    before = run_proto(model, ids)
    saved = onnx_export.share_weights(model.graph)
    onnx.checker.check_model(model)
    assert [init.name for init in model.graph.initializer] == (
        ["table", "extra"] if relation == "different" else ["table"])  # the lookup's kept
    assert saved == (0 if relation == "different" else table.nbytes)
    np.testing.assert_array_equal(run_proto(model, ids), before)


def test_quantize_lookups_stores_a_tied_table_once_as_int8():
    """The lookup and the tied decoder read one int8 table with a scale per row; rows are
    within half a step of the float rows."""
    rng = np.random.default_rng(2)
    table = rng.normal(0, 0.02, (500, 32)).astype(np.float32)
    table[7] *= 30  # a row of another scale keeps its own precision
    model = small_graph(table, np.ascontiguousarray(table.T))
    ids = np.array([7, 0, 499, 7], np.int64)
    before = run_proto(model, ids)
    assert onnx_export.quantize_lookups(model.graph) == ["table"]
    onnx.checker.check_model(model)
    from onnx import numpy_helper
    stored = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    large = [value for value in stored.values() if value.size >= table.size]
    assert [(value.shape, value.dtype) for value in large] == [((500, 32), np.int8)]
    ops = {node.op_type for node in model.graph.node}
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= ops and "MatMul" not in ops
    after = run_proto(model, ids)
    np.testing.assert_allclose(after, before, atol=0.02 * np.abs(before).max())
    np.testing.assert_array_equal(after.argmax(-1), before.argmax(-1))
