"""Hugging Face ALBERT directories (config.json + model.safetensors) written with NumPy only.

The Hugging Face parameter names and transposes are spelled out here from
transformers' modeling_albert.py (independently of albert_tf.checkpoints.hf).
"""
import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from albert_tf import (AlbertClassifier, AlbertEncoder, AlbertMultipleChoice, AlbertPretrainer,
                       AlbertSpanLabeler, AlbertSquadV2, checkpoints)
from albert_tf.checkpoints import hf as hf_weights, names as tf1_names
from albert_tf.checkpoints import CheckpointMismatchError
from albert_tf.errors import UserValueError
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from tests.helpers import numpy_reference as ref
from tests.checkpoints.test_tf1 import POSITIONS, official_weights, write_tf1_checkpoint
from tests.modeling.test_numerics import random_batch, randomize, tiny_config

TOL = 1e-5
BLOCK = {"attention_1/self/query": "attention.query", "attention_1/self/key": "attention.key",
         "attention_1/self/value": "attention.value",
         "attention_1/output/dense": "attention.dense", "LayerNorm": "attention.LayerNorm",
         "ffn_1/intermediate/dense": "ffn", "ffn_1/intermediate/output/dense": "ffn_output",
         "LayerNorm_1": "full_layer_layer_norm"}


def hf_state(w, cfg, pooler=True, base_prefix="albert."):
    """The state dict Hugging Face's AlbertFor* classes hold for official weights `w`."""
    a = base_prefix
    s = {a + "embeddings.word_embeddings.weight": w["bert/embeddings/word_embeddings"],
         a + "embeddings.position_embeddings.weight": w["bert/embeddings/position_embeddings"],
         a + "embeddings.token_type_embeddings.weight":
             w["bert/embeddings/token_type_embeddings"],
         a + "embeddings.LayerNorm.weight": w["bert/embeddings/LayerNorm/gamma"],
         a + "embeddings.LayerNorm.bias": w["bert/embeddings/LayerNorm/beta"],
         a + "embeddings.position_ids": np.arange(cfg["max_position_embeddings"])[None]}
    proj = "bert/encoder/embedding_hidden_mapping_in/"
    if proj + "kernel" in w:
        s[a + "encoder.embedding_hidden_mapping_in.weight"] = w[proj + "kernel"].T
        s[a + "encoder.embedding_hidden_mapping_in.bias"] = w[proj + "bias"]
    else:  # Hugging Face always has the projection; identity when E == H
        s[a + "encoder.embedding_hidden_mapping_in.weight"] = np.eye(cfg["hidden_size"],
                                                                    dtype="float32")
        s[a + "encoder.embedding_hidden_mapping_in.bias"] = np.zeros(cfg["hidden_size"],
                                                                    "float32")
    for g in range(cfg["num_hidden_groups"]):
        for k in range(cfg["inner_group_num"]):
            tf1 = f"bert/encoder/transformer/group_{g}/inner_group_{k}/"
            hf = f"{a}encoder.albert_layer_groups.{g}.albert_layers.{k}."
            for scope, module in BLOCK.items():
                if scope.startswith("LayerNorm"):
                    s[hf + module + ".weight"] = w[tf1 + scope + "/gamma"]
                    s[hf + module + ".bias"] = w[tf1 + scope + "/beta"]
                else:
                    s[hf + module + ".weight"] = w[tf1 + scope + "/kernel"].T
                    s[hf + module + ".bias"] = w[tf1 + scope + "/bias"]
    if pooler:
        s[a + "pooler.weight"] = w["bert/pooler/dense/kernel"].T
        s[a + "pooler.bias"] = w["bert/pooler/dense/bias"]
    if "cls/predictions/output_bias" in w:
        s["predictions.dense.weight"] = w["cls/predictions/transform/dense/kernel"].T
        s["predictions.dense.bias"] = w["cls/predictions/transform/dense/bias"]
        s["predictions.LayerNorm.weight"] = w["cls/predictions/transform/LayerNorm/gamma"]
        s["predictions.LayerNorm.bias"] = w["cls/predictions/transform/LayerNorm/beta"]
        s["predictions.bias"] = w["cls/predictions/output_bias"]
        s["predictions.decoder.bias"] = w["cls/predictions/output_bias"]  # tied copy
    if "cls/seq_relationship/output_weights" in w:
        s["sop_classifier.classifier.weight"] = w["cls/seq_relationship/output_weights"]
        s["sop_classifier.classifier.bias"] = w["cls/seq_relationship/output_bias"]
    if "output_weights" in w:
        s["classifier.weight"] = w["output_weights"]
        s["classifier.bias"] = w["output_bias"]
    if "cls/squad/output_weights" in w:
        s["qa_outputs.weight"] = w["cls/squad/output_weights"]
        s["qa_outputs.bias"] = w["cls/squad/output_bias"]
    return {k: np.ascontiguousarray(v) for k, v in s.items()}


def write_hf_dir(path, config, state, **overrides):
    values = {"model_type": "albert", "architectures": ["AlbertForPreTraining"],
              "hidden_act": "gelu_new", "layer_norm_eps": 1e-12,
              "position_embedding_type": "absolute"}
    values.update({k: v for k, v in config.to_dict().items()
                   if k not in ("hidden_act", "down_scale_factor")})
    if config.hidden_act != "gelu":
        values["hidden_act"] = config.hidden_act
    values.update(overrides)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(values))
    save_file(state, str(path / "model.safetensors"))
    return str(path)


CONFIG = tiny_config()


def test_hf_pretraining_dir_equals_tf1_path_and_numpy(tmp_path):
    weights = official_weights(CONFIG.to_dict(), seed=20)
    hf_dir = write_hf_dir(tmp_path / "hf", CONFIG, hf_state(weights, CONFIG.to_dict()))
    write_tf1_checkpoint(str(tmp_path / "tf1" / "model.ckpt-best"), weights)
    from_hf, from_tf1 = AlbertPretrainer(CONFIG), AlbertPretrainer(CONFIG)
    report = hf_weights.load_hf_checkpoint(from_hf, hf_dir)
    checkpoints.load_tf1_checkpoint(from_tf1, str(tmp_path / "tf1"))
    assert sorted(report.loaded) == sorted(weights) and not report.missing
    assert not report.unused
    assert "albert.embeddings.position_ids" in report.skipped
    for a, b in zip(from_hf.weights, from_tf1.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    batch = random_batch(CONFIG)
    out = from_hf(dict(batch, masked_lm_positions=POSITIONS))
    mlm, sop = ref.pretrainer_forward(weights, CONFIG.to_dict(), batch["input_ids"],
                                      batch["input_mask"], batch["segment_ids"], POSITIONS)
    np.testing.assert_allclose(out["mlm_logits"].numpy(), mlm, atol=10 * TOL, rtol=TOL)
    np.testing.assert_allclose(out["sop_logits"].numpy(), sop, atol=TOL, rtol=TOL)
    assert hf_weights.config_from_hf_dir(hf_dir) == CONFIG
    assert checkpoints.detect_format(hf_dir) == "huggingface"
    assert len(checkpoints.restore_for_training(AlbertPretrainer(CONFIG), hf_dir).loaded) == \
        len(weights)


@pytest.mark.parametrize("heads,factory,pooler", [
    (("classifier",), lambda c: AlbertClassifier(c, num_labels=3), True),
    (("squad",), lambda c: AlbertSpanLabeler(c), False),   # AlbertForQuestionAnswering: no pooler
    (("race",), lambda c: AlbertMultipleChoice(c), True),
    # AlbertForTokenClassification: the classifier on every token, no pooler.
    (("classifier",), lambda c: AlbertTokenClassifier(c, num_labels=3), False),
])
def test_hf_task_heads(tmp_path, heads, factory, pooler):
    weights = official_weights(CONFIG.to_dict(), heads=heads, seed=21)
    hf_dir = write_hf_dir(tmp_path, CONFIG, hf_state(weights, CONFIG.to_dict(), pooler=pooler))
    model = factory(CONFIG)
    report = hf_weights.load_hf_checkpoint(model, hf_dir)
    pooler_names = ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
    assert report.missing == ([] if pooler else pooler_names)
    for name, var in tf1_names.variables_for(model).items():
        if name not in report.missing:
            np.testing.assert_array_equal(var.numpy(), weights[name], err_msg=name)


def test_hf_base_model_without_prefix_and_equal_sizes(tmp_path):
    config = tiny_config(embedding_size=32, num_hidden_groups=1, inner_group_num=1)
    weights = official_weights(config.to_dict(), heads=(), seed=22)
    state = hf_state(weights, config.to_dict(), base_prefix="")
    hf_dir = write_hf_dir(tmp_path / "ok", config, state)
    model = AlbertEncoder(config)
    report = hf_weights.load_hf_checkpoint(model, hf_dir)
    assert sorted(report.loaded) == sorted(weights)
    batch = random_batch(config)
    seq, _, _, _ = ref.encoder_forward(weights, config.to_dict(), **batch)
    np.testing.assert_allclose(model(batch)["sequence_output"].numpy(), seq, atol=TOL, rtol=TOL)
    state["encoder.embedding_hidden_mapping_in.weight"] = state[
        "encoder.embedding_hidden_mapping_in.weight"] * 2
    bad_dir = write_hf_dir(tmp_path / "bad", config, state)
    with pytest.raises(CheckpointMismatchError, match="not the identity"):
        hf_weights.load_hf_checkpoint(AlbertEncoder(config), bad_dir)


def test_hf_config_mismatch_and_exact_gelu(tmp_path):
    weights = official_weights(CONFIG.to_dict(), seed=23)
    state = hf_state(weights, CONFIG.to_dict())
    heads_dir = write_hf_dir(tmp_path / "heads", CONFIG, state, num_attention_heads=8)
    with pytest.raises(CheckpointMismatchError,
                       match="num_attention_heads is 4 in the config but 8 in config.json"):
        hf_weights.load_hf_checkpoint(AlbertPretrainer(CONFIG), heads_dir)
    gelu_dir = write_hf_dir(tmp_path / "gelu", CONFIG, state, hidden_act="gelu")
    with pytest.raises(ValueError, match="exact \\(erf\\) GELU"):
        hf_weights.load_hf_checkpoint(AlbertPretrainer(CONFIG), gelu_dir)


def test_hf_truncated_file(tmp_path):
    weights = official_weights(CONFIG.to_dict(), seed=24)
    hf_dir = write_hf_dir(tmp_path, CONFIG, hf_state(weights, CONFIG.to_dict()))
    data = tmp_path / "model.safetensors"
    data.write_bytes(data.read_bytes()[:-100])
    with pytest.raises(ValueError, match="model.safetensors.*truncated"):
        hf_weights.load_hf_checkpoint(AlbertPretrainer(CONFIG), hf_dir)


@pytest.mark.parametrize("factory,architecture", [
    (lambda c: AlbertPretrainer(c), "AlbertForPreTraining"),
    (lambda c: AlbertClassifier(c, num_labels=1), "AlbertForSequenceClassification"),
    (lambda c: AlbertSpanLabeler(c), "AlbertForQuestionAnswering"),
    (lambda c: AlbertMultipleChoice(c), "AlbertForMultipleChoice"),
    (lambda c: AlbertEncoder(c), "AlbertModel"),
    (lambda c: AlbertTokenClassifier(c, num_labels=5), "AlbertForTokenClassification"),
])
def test_hf_export_round_trip_bit_exact(tmp_path, factory, architecture):
    source = factory(CONFIG)
    names = tf1_names.variables_for(source)
    randomize(source.weights, seed=25)
    assert hf_weights.save_hf_checkpoint(source, str(tmp_path)) == []
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["architectures"] == [architecture] and written["hidden_act"] == "gelu_new"
    from safetensors.numpy import load_file
    state = load_file(str(tmp_path / "model.safetensors"))
    weights = {name: var.numpy() for name, var in names.items()}
    prefix = "" if architecture == "AlbertModel" else "albert."
    pooler = architecture != "AlbertForTokenClassification"  # Hugging Face's has none
    expected = hf_state(weights, CONFIG.to_dict(), pooler=pooler, base_prefix=prefix)
    expected.pop(prefix + "embeddings.position_ids")
    expected.pop("predictions.decoder.bias", None)
    assert sorted(state) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(state[key], value, err_msg=key)
    target = factory(CONFIG)
    report = hf_weights.load_hf_checkpoint(target, str(tmp_path))
    for name, var in tf1_names.variables_for(target).items():
        if name not in report.missing:
            np.testing.assert_array_equal(var.numpy(), weights[name], err_msg=name)
    assert report.missing == ([] if pooler else ["bert/pooler/dense/kernel",
                                                 "bert/pooler/dense/bias"])


def test_hf_export_of_squad_v2_lists_the_head(tmp_path):
    with pytest.raises(ValueError, match="no Hugging Face counterpart"):
        hf_weights.save_hf_checkpoint(AlbertSquadV2(CONFIG), str(tmp_path))


def test_hf_label_names_round_trip_through_config_json(tmp_path):
    """id2label / label2id carry the label names (Hugging Face's placeholders LABEL_<i> by
    default, which read back as no names)."""
    tags = ["O", "B-PER", "I-PER"]
    hf_weights.save_hf_checkpoint(AlbertTokenClassifier(CONFIG, num_labels=3), str(tmp_path),
                                  labels=tags)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["id2label"] == {"0": "O", "1": "B-PER", "2": "I-PER"}
    assert written["label2id"] == {"O": 0, "B-PER": 1, "I-PER": 2}
    assert hf_weights.labels_from_hf_config(written) == tags
    hf_weights.save_hf_checkpoint(AlbertClassifier(CONFIG, num_labels=2), str(tmp_path / "c"))
    plain = json.loads((tmp_path / "c" / "config.json").read_text())
    assert plain["id2label"] == {"0": "LABEL_0", "1": "LABEL_1"}
    assert plain["problem_type"] == "single_label_classification"
    assert hf_weights.labels_from_hf_config(plain) is None
    assert hf_weights.labels_from_hf_config({}) is None
    assert hf_weights.labels_from_hf_config({"id2label": {1: "b", 0: "a"}}) == ["a", "b"]


def test_hf_label_and_head_mistakes_are_one_line(tmp_path):
    with pytest.raises(UserValueError, match=r"the model has 3 outputs; give 3 distinct"):
        hf_weights.save_hf_checkpoint(AlbertTokenClassifier(CONFIG, num_labels=3),
                                      str(tmp_path), labels=["O", "B-PER"])
    with pytest.raises(UserValueError, match="a CRF tagging head .* has no Hugging Face"):
        hf_weights.save_hf_checkpoint(AlbertTokenClassifier(CONFIG, num_labels=3, use_crf=True),
                                      str(tmp_path))
    with pytest.raises(UserValueError, match=r"config.json: id2label must number the outputs "
                                             r"0..1, got \[0, 2\]"):
        hf_weights.labels_from_hf_config({"id2label": {"0": "a", "2": "b"}})
    with pytest.raises(UserValueError, match="id2label keys must be output indices"):
        hf_weights.labels_from_hf_config({"id2label": {"a": "b"}})
