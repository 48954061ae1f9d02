"""TF1 checkpoints written with tf.compat.v1 and a Saver under the official names, loaded
into our models and checked against the NumPy reference; round trips; error reports.

The official names and shapes are spelled out here from ../shared/REFERENCE.md §3 and the
original scripts (independently of albert_tf.checkpoints.names): a wrong table fails these tests.
"""
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (AlbertClassifier, AlbertEncoder, AlbertMultipleChoice, AlbertPretrainer,
                       AlbertSpanLabeler, AlbertSquadV2, checkpoints)
from albert_tf.checkpoints import names as tf1_names
from albert_tf.checkpoints import CheckpointMismatchError
from tests.helpers import numpy_reference as ref
from tests.modeling.test_numerics import random_batch, randomize, tiny_config

TOL = 1e-5
POSITIONS = np.array([[1, 3, 0], [2, 5, 6], [0, 1, 3]], "int32")


# --- writing official checkpoints with TF1 machinery ---------------------------------------------


def official_weights(cfg, heads=("mlm", "sop"), num_labels=3, seed=0):
    """name -> random array for the official TF1 names/shapes of `cfg` (a config dict)."""
    rng = np.random.default_rng(seed)
    v, e, h, i = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"], \
        cfg["intermediate_size"]
    shapes = {
        "bert/embeddings/word_embeddings": (v, e),
        "bert/embeddings/token_type_embeddings": (cfg["type_vocab_size"], e),
        "bert/embeddings/position_embeddings": (cfg["max_position_embeddings"], e),
        "bert/embeddings/LayerNorm/gamma": (e,), "bert/embeddings/LayerNorm/beta": (e,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
    }
    if e != h:
        shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] = (e, h)
        shapes["bert/encoder/embedding_hidden_mapping_in/bias"] = (h,)
    for g in range(cfg["num_hidden_groups"]):
        for k in range(cfg["inner_group_num"]):
            p = f"bert/encoder/transformer/group_{g}/inner_group_{k}/"
            for part in ("query", "key", "value"):
                shapes[p + f"attention_1/self/{part}/kernel"] = (h, h)
                shapes[p + f"attention_1/self/{part}/bias"] = (h,)
            shapes[p + "attention_1/output/dense/kernel"] = (h, h)
            shapes[p + "attention_1/output/dense/bias"] = (h,)
            shapes[p + "LayerNorm/gamma"] = shapes[p + "LayerNorm/beta"] = (h,)
            shapes[p + "ffn_1/intermediate/dense/kernel"] = (h, i)
            shapes[p + "ffn_1/intermediate/dense/bias"] = (i,)
            shapes[p + "ffn_1/intermediate/output/dense/kernel"] = (i, h)
            shapes[p + "ffn_1/intermediate/output/dense/bias"] = (h,)
            shapes[p + "LayerNorm_1/gamma"] = shapes[p + "LayerNorm_1/beta"] = (h,)
    if "mlm" in heads:
        shapes.update({"cls/predictions/transform/dense/kernel": (h, e),
                       "cls/predictions/transform/dense/bias": (e,),
                       "cls/predictions/transform/LayerNorm/gamma": (e,),
                       "cls/predictions/transform/LayerNorm/beta": (e,),
                       "cls/predictions/output_bias": (v,)})
    if "sop" in heads:
        shapes.update({"cls/seq_relationship/output_weights": (2, h),
                       "cls/seq_relationship/output_bias": (2,)})
    if "classifier" in heads:
        shapes.update({"output_weights": (num_labels, h), "output_bias": (num_labels,)})
    if "race" in heads:
        shapes.update({"output_weights": (1, h), "output_bias": (1,)})
    if "squad" in heads:
        shapes.update({"cls/squad/output_weights": (2, h), "cls/squad/output_bias": (2,)})
    if "squad_v2" in heads:
        shapes.update({"start_logits/dense/kernel": (h, 1), "start_logits/dense/bias": (1,),
                       "end_logits/dense_0/kernel": (2 * h, h), "end_logits/dense_0/bias": (h,),
                       "end_logits/LayerNorm/gamma": (h,), "end_logits/LayerNorm/beta": (h,),
                       "end_logits/dense_1/kernel": (h, 1), "end_logits/dense_1/bias": (1,),
                       "answer_class/dense_0/kernel": (2 * h, h),
                       "answer_class/dense_0/bias": (h,),
                       "answer_class/dense_1/kernel": (h, 1)})
    weights = {}
    for name, shape in sorted(shapes.items()):
        value = rng.normal(0.0, 0.3 if len(shape) > 1 else 0.5, shape)
        if name.endswith("gamma"):
            value += 1.0
        weights[name] = value.astype("float32")
    return weights


def write_tf1_checkpoint(prefix, weights, scope="", optimizer_slots=False, write_state=False):
    """Saves `weights` as TF1 variables (optionally under `scope`, e.g. TF-Hub's "module/")
    with tf.compat.v1 and a Saver, as the original scripts do."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        for name, value in weights.items():
            v1.get_variable(scope + name, initializer=tf.constant(value))
            if optimizer_slots:
                for slot in ("adam_m", "adam_v"):
                    v1.get_variable(f"{scope}{name}/{slot}", initializer=tf.zeros(value.shape))
        if optimizer_slots:
            v1.train.get_or_create_global_step()
        saver = v1.train.Saver()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False, write_state=write_state)
    return prefix


def checkpoint_arrays(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


CONFIGS = {
    "groups2_inner2_E!=H": tiny_config(),
    "E==H": tiny_config(embedding_size=32, num_hidden_groups=1, inner_group_num=1),
    "relu_groups3": tiny_config(num_hidden_groups=3, inner_group_num=1, hidden_act="relu"),
}


# --- loading official checkpoints ----------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONFIGS))
def test_official_pretraining_checkpoint_matches_numpy(tmp_path, name):
    config = CONFIGS[name]
    weights = official_weights(config.to_dict())
    # The official download layout: model.ckpt-best.* and no `checkpoint` file.
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights)
    assert not (tmp_path / "checkpoint").exists()
    model = AlbertPretrainer(config)
    report = checkpoints.load_tf1_checkpoint(model, str(tmp_path))
    assert sorted(report.loaded) == sorted(weights) and not report.missing and not report.unused
    batch = random_batch(config)
    out = model(dict(batch, masked_lm_positions=POSITIONS))
    mlm, sop = ref.pretrainer_forward(weights, config.to_dict(), batch["input_ids"],
                                      batch["input_mask"], batch["segment_ids"], POSITIONS)
    np.testing.assert_allclose(out["mlm_logits"].numpy(), mlm, atol=10 * TOL, rtol=TOL)
    np.testing.assert_allclose(out["sop_logits"].numpy(), sop, atol=TOL, rtol=TOL)
    seq, pooled, layers, _ = ref.encoder_forward(weights, config.to_dict(), **batch)
    np.testing.assert_allclose(out["sequence_output"].numpy(), seq, atol=TOL, rtol=TOL)
    for got, want in zip(out["encoder_outputs"], layers):
        np.testing.assert_allclose(got.numpy(), want, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("layout", ["prefix", "index_file", "dir_with_state", "tfhub_module",
                                    "tfhub_dir", "optimizer_slots"])
def test_checkpoint_layouts(tmp_path, layout):
    config = CONFIGS["groups2_inner2_E!=H"]
    weights = official_weights(config.to_dict(), seed=1)
    prefix = str(tmp_path / ("variables/variables" if layout == "tfhub_dir" else "model.ckpt-500"))
    write_tf1_checkpoint(prefix, weights, scope="module/" if layout == "tfhub_module" else "",
                         optimizer_slots=layout == "optimizer_slots",
                         write_state=layout == "dir_with_state")
    path = {"prefix": prefix, "index_file": prefix + ".index"}.get(layout, str(tmp_path))
    model = AlbertPretrainer(config)
    report = checkpoints.load_tf1_checkpoint(model, path)
    assert len(report.loaded) == len(weights) and not report.unused and not report.missing
    if layout == "optimizer_slots":
        assert len(report.skipped) == 2 * len(weights) + 1  # adam_m, adam_v, global_step
        assert "global_step" in report.skipped
    if layout == "tfhub_module":
        assert "bert/pooler/dense/kernel" in report.loaded
    for name, var in tf1_names.variables_for(model).items():
        np.testing.assert_array_equal(var.numpy(), weights[name])


def test_directory_prefers_best_then_latest_step(tmp_path):
    config = CONFIGS["E==H"]
    for index, name in enumerate(["model.ckpt-100", "model.ckpt-2000", "model.ckpt-best"]):
        write_tf1_checkpoint(str(tmp_path / name), official_weights(config.to_dict(), seed=index))
    assert checkpoints.resolve_tf1_checkpoint(str(tmp_path)).endswith("model.ckpt-best")
    os.remove(tmp_path / "model.ckpt-best.index")
    assert checkpoints.resolve_tf1_checkpoint(str(tmp_path)).endswith("model.ckpt-2000")


HEAD_CASES = {
    "classifier": (lambda c: AlbertClassifier(c, num_labels=3), ("classifier",),
                   ["output_weights", "output_bias"]),
    "squad_v1": (lambda c: AlbertSpanLabeler(c), ("squad",),
                 ["cls/squad/output_weights", "cls/squad/output_bias"]),
    "squad_v2": (lambda c: AlbertSquadV2(c, start_n_top=3, end_n_top=2), ("squad_v2",), None),
    "race": (lambda c: AlbertMultipleChoice(c, num_choices=4), ("race",),
             ["output_weights", "output_bias"]),
}


@pytest.mark.parametrize("case", list(HEAD_CASES))
def test_fine_tuned_checkpoints_of_the_original_scripts(tmp_path, case):
    factory, heads, _ = HEAD_CASES[case]
    config = CONFIGS["groups2_inner2_E!=H"]
    weights = official_weights(config.to_dict(), heads=heads, seed=2)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights, optimizer_slots=True)
    model = factory(config)
    report = checkpoints.load_tf1_checkpoint(model, str(tmp_path))
    assert sorted(report.loaded) == sorted(weights) and not report.missing and not report.unused
    cfg = config.to_dict()
    batch = random_batch(config)
    if case == "classifier":
        _, pooled, _, _ = ref.encoder_forward(weights, cfg, **batch)
        np.testing.assert_allclose(model(batch)["logits"].numpy(),
                                   ref.classifier_logits(weights, pooled), atol=TOL, rtol=TOL)
    elif case == "squad_v1":
        seq, _, _, _ = ref.encoder_forward(weights, cfg, **batch)
        start, end = ref.squad_v1_logits(weights, seq)
        out = model(batch)
        np.testing.assert_allclose(out["start_logits"].numpy(), start, atol=TOL, rtol=TOL)
        np.testing.assert_allclose(out["end_logits"].numpy(), end, atol=TOL, rtol=TOL)
    elif case == "squad_v2":
        seq, _, _, _ = ref.encoder_forward(weights, cfg, **batch)
        p_mask = np.zeros((3, 11), "int32")
        p_mask[:, 1:3] = 1
        want = ref.squad_v2_forward(weights, seq, p_mask, start_n_top=3, end_n_top=2)
        out = model(dict(batch, p_mask=p_mask))
        np.testing.assert_array_equal(out["end_top_index"].numpy(), want["end_top_index"])
        np.testing.assert_allclose(out["end_top_log_probs"].numpy(), want["end_top_log_probs"],
                                   atol=TOL, rtol=TOL)
        np.testing.assert_allclose(out["cls_logits"].numpy(), want["cls_logits"], atol=TOL,
                                   rtol=TOL)
    else:
        flat = random_batch(config, batch=8, seq=9)
        _, pooled, _, _ = ref.encoder_forward(weights, cfg, **flat)
        out = model({k: v.reshape(2, 4, 9) for k, v in flat.items()})
        np.testing.assert_allclose(out["logits"].numpy(),
                                   ref.classifier_logits(weights, pooled).reshape(2, 4),
                                   atol=TOL, rtol=TOL)


@pytest.mark.parametrize("case", list(HEAD_CASES))
def test_fine_tuning_from_pretrained_reports_absent_heads(tmp_path, case):
    factory, _, _ = HEAD_CASES[case]
    config = CONFIGS["groups2_inner2_E!=H"]
    weights = official_weights(config.to_dict(), seed=3)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights)
    model = factory(config)
    report = checkpoints.load_tf1_checkpoint(model, str(tmp_path))
    head_names = [n for n in tf1_names.variables_for(model) if not n.startswith("bert/")]
    assert report.missing == head_names
    assert sorted(report.unused) == sorted(n for n in weights if n.startswith("cls/"))
    assert "left at initial values: %d" % len(head_names) in report.summary()


def test_init_from_group0(tmp_path):
    one_group = tiny_config(num_hidden_groups=1, inner_group_num=2)
    weights = official_weights(one_group.to_dict(), seed=4)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights)
    model = AlbertPretrainer(tiny_config(num_hidden_groups=3, inner_group_num=2))
    with pytest.raises(CheckpointMismatchError,
                       match=r"num_hidden_groups is 3 in the config but 1 .*init_from_group0"):
        checkpoints.load_tf1_checkpoint(model, str(tmp_path))
    report = checkpoints.load_tf1_checkpoint(model, str(tmp_path), init_from_group0=True)
    assert report.renamed["bert/encoder/transformer/group_2/inner_group_1/LayerNorm_1/beta"] \
        == "bert/encoder/transformer/group_0/inner_group_1/LayerNorm_1/beta"
    batch = random_batch(model.config)
    seq, _, _, _ = ref.encoder_forward(weights, one_group.to_dict(), **batch)
    np.testing.assert_allclose(model(batch)["sequence_output"].numpy(), seq, atol=TOL, rtol=TOL)


# --- round trips ---------------------------------------------------------------------------------


def test_round_trip_tf1_keras_tf1_bit_exact(tmp_path):
    config = CONFIGS["groups2_inner2_E!=H"]
    weights = official_weights(config.to_dict(), seed=5)
    write_tf1_checkpoint(str(tmp_path / "in" / "model.ckpt-best"), weights, optimizer_slots=True)
    model = AlbertPretrainer(config)
    checkpoints.load_tf1_checkpoint(model, str(tmp_path / "in"))
    out_prefix = checkpoints.save_tf1_checkpoint(model, str(tmp_path / "out" / "model.ckpt-1"),
                                                 global_step=1)
    written = checkpoint_arrays(out_prefix)
    assert written.pop("global_step") == 1
    assert sorted(written) == sorted(weights)
    for name, value in weights.items():
        assert written[name].dtype == np.float32 and written[name].shape == value.shape
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    assert sorted(os.listdir(tmp_path / "out")) == ["model.ckpt-1.data-00000-of-00001",
                                                    "model.ckpt-1.index"]


MODEL_FACTORIES = {
    "encoder": lambda c: AlbertEncoder(c),
    "pretrainer": lambda c: AlbertPretrainer(c),
    "classifier": lambda c: AlbertClassifier(c, num_labels=1),
    "span": lambda c: AlbertSpanLabeler(c),
    "squad_v2": lambda c: AlbertSquadV2(c),
    "race": lambda c: AlbertMultipleChoice(c),
}


@pytest.mark.parametrize("kind", list(MODEL_FACTORIES))
def test_round_trip_keras_tf1_keras_bit_exact(tmp_path, kind):
    config = tiny_config(parameter_sharing="none", num_hidden_groups=1, inner_group_num=1) \
        if kind == "encoder" else CONFIGS["groups2_inner2_E!=H"]
    source = MODEL_FACTORIES[kind](config)
    names = tf1_names.variables_for(source)
    randomize(source.weights, seed=6)
    prefix = checkpoints.save_tf1_checkpoint(source, str(tmp_path / "model.ckpt-best"))
    target = MODEL_FACTORIES[kind](config)
    report = checkpoints.load_tf1_checkpoint(target, prefix)
    assert len(report.loaded) == len(names) == len(target.weights)
    for name, var in tf1_names.variables_for(target).items():
        np.testing.assert_array_equal(var.numpy(), names[name].numpy(), err_msg=name)


def test_load_into_mixed_precision_model_keeps_float32_values(tmp_path):
    config = CONFIGS["groups2_inner2_E!=H"]
    weights = official_weights(config.to_dict(), heads=("squad",), seed=16)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights)
    model = AlbertSpanLabeler(config, dtype="mixed_bfloat16")
    checkpoints.load_tf1_checkpoint(model, str(tmp_path))
    for name, var in tf1_names.variables_for(model).items():
        assert var.dtype == "float32"
        np.testing.assert_array_equal(var.numpy(), weights[name], err_msg=name)
    out = checkpoints.save_tf1_checkpoint(model, str(tmp_path / "again" / "model.ckpt-best"))
    for name, value in checkpoint_arrays(out).items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)


def test_save_overwrites_and_leaves_no_temporary_files(tmp_path):
    config = CONFIGS["E==H"]
    model = AlbertEncoder(config)
    tf1_names.variables_for(model)
    prefix = str(tmp_path / "model.ckpt-best")
    checkpoints.save_tf1_checkpoint(model, prefix)
    randomize(model.weights, seed=7)
    checkpoints.save_tf1_checkpoint(model, prefix)
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt-best.data-00000-of-00001",
                                            "model.ckpt-best.index"]
    np.testing.assert_array_equal(checkpoint_arrays(prefix)["bert/pooler/dense/bias"],
                                  model.pooler.bias.numpy())


# --- errors --------------------------------------------------------------------------------------


@pytest.fixture()
def official_dir(tmp_path):
    config = CONFIGS["groups2_inner2_E!=H"]
    weights = official_weights(config.to_dict(), heads=("mlm", "sop", "classifier"), seed=8)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights)
    return tmp_path, config, weights


def test_truncated_data_file(official_dir):
    path, config, _ = official_dir
    data = path / "model.ckpt-best.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    model = AlbertPretrainer(config)
    tf1_names.variables_for(model)
    before = [v.numpy() for v in model.weights]
    with pytest.raises(ValueError, match=r"model.ckpt-best.*truncated or corrupt"):
        checkpoints.load_tf1_checkpoint(model, str(path))
    for var, value in zip(model.weights, before):  # all-or-nothing: nothing was assigned
        np.testing.assert_array_equal(var.numpy(), value)


def test_truncated_index_file(official_dir):
    path, config, _ = official_dir
    index = path / "model.ckpt-best.index"
    index.write_bytes(index.read_bytes()[:50])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        checkpoints.load_tf1_checkpoint(AlbertPretrainer(config), str(path))


def test_missing_data_file(official_dir):
    path, config, _ = official_dir
    os.remove(path / "model.ckpt-best.data-00000-of-00001")
    with pytest.raises(ValueError, match="model.ckpt-best"):
        checkpoints.load_tf1_checkpoint(AlbertPretrainer(config), str(path))


def test_head_shape_mismatch_names_variable_and_both_shapes(official_dir):
    path, config, _ = official_dir
    with pytest.raises(CheckpointMismatchError,
                       match=r"output_weights: checkpoint shape \[3, 32\], model expects "
                             r"\[2, 32\] \(num_labels"):
        checkpoints.load_tf1_checkpoint(AlbertClassifier(config, num_labels=2), str(path))


def test_missing_encoder_variable_is_an_error(tmp_path):
    config = CONFIGS["groups2_inner2_E!=H"]
    weights = official_weights(config.to_dict(), seed=9)
    gone = "bert/encoder/transformer/group_1/inner_group_1/LayerNorm_1/gamma"
    del weights[gone]
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights)
    with pytest.raises(CheckpointMismatchError, match=f"lacks 1 encoder variable.*{gone}"):
        checkpoints.load_tf1_checkpoint(AlbertPretrainer(config), str(tmp_path))


@pytest.mark.parametrize("field,ckpt_value,message", [
    ("hidden_size", 64, r"hidden_size is 32 in the config but 64 in the checkpoint "
                        r"\(bert/pooler/dense/kernel \[64, 64\]\)"),
    ("vocab_size", 70, r"vocab_size is 61 in the config but 70"),
    ("intermediate_size", 40, r"intermediate_size is 48 in the config but 40"),
    ("max_position_embeddings", 512, r"max_position_embeddings is 24 in the config but 512"),
    ("inner_group_num", 1, r"inner_group_num is 2 in the config but 1"),
    ("embedding_size", 32, r"embedding_size is 16 in the config but 32"),
])
def test_config_mismatch_names_the_field(tmp_path, field, ckpt_value, message):
    config = CONFIGS["groups2_inner2_E!=H"]
    cfg = dict(config.to_dict(), **{field: ckpt_value})
    if field == "hidden_size":
        cfg["intermediate_size"] = 48
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), official_weights(cfg, seed=10))
    with pytest.raises(CheckpointMismatchError, match=message):
        checkpoints.load_tf1_checkpoint(AlbertPretrainer(config), str(tmp_path))


def test_projection_in_checkpoint_but_equal_sizes_in_config(tmp_path):
    cfg = dict(CONFIGS["E==H"].to_dict(), embedding_size=16)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), official_weights(cfg, seed=11))
    with pytest.raises(CheckpointMismatchError, match="embedding_hidden_mapping_in"):
        checkpoints.load_tf1_checkpoint(AlbertEncoder(CONFIGS["E==H"]), str(tmp_path))


def test_layer_normalization_naming_is_rejected_with_a_reason(tmp_path):
    config = CONFIGS["E==H"]
    weights = official_weights(config.to_dict(), seed=12)
    renamed = {}
    for name, value in weights.items():
        name = name.replace("group_0/inner_group_0/LayerNorm_1/",
                            "group_0_0/layer_0/inner_group_0/layer_normalization_1/")
        renamed[name.replace("group_0/inner_group_0/LayerNorm/",
                             "group_0_0/layer_0/inner_group_0/layer_normalization/")] = value
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), renamed)
    with pytest.raises(CheckpointMismatchError,
                       match=r"layer_normalization_K` naming .*not supported"):
        checkpoints.load_tf1_checkpoint(AlbertEncoder(config), str(tmp_path))


def test_object_based_checkpoint_is_not_taken_for_tf1(tmp_path):
    written = tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(tmp_path / "ckpt"))
    with pytest.raises(ValueError, match="object-based tf.train.Checkpoint"):
        checkpoints.load_tf1_checkpoint(AlbertEncoder(CONFIGS["E==H"]), written)


def test_no_checkpoint_in_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint in this directory"):
        checkpoints.load_tf1_checkpoint(AlbertEncoder(CONFIGS["E==H"]), str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"model.ckpt-best.index not found"):
        checkpoints.load_tf1_checkpoint(AlbertEncoder(CONFIGS["E==H"]),
                                        str(tmp_path / "model.ckpt-best"))


# --- autodetecting restore and the official directory --------------------------------------------


def test_restore_for_training_detects_formats(tmp_path):
    config = CONFIGS["groups2_inner2_E!=H"]
    source = AlbertPretrainer(config)
    names = tf1_names.variables_for(source)
    randomize(source.weights, seed=13)
    tf1_prefix = checkpoints.save_tf1_checkpoint(source, str(tmp_path / "tf1" / "model.ckpt-3"))
    h5 = str(tmp_path / "model.weights.h5")
    source.save_weights(h5)
    for path, fmt in ((tf1_prefix, "tf1"), (str(tmp_path / "tf1"), "tf1"), (h5, "keras_h5")):
        assert checkpoints.detect_format(path) == fmt
        target = AlbertPretrainer(config)
        report = checkpoints.restore_for_training(target, path)
        assert len(report.loaded) == len(names)
        for name, var in tf1_names.variables_for(target).items():
            np.testing.assert_array_equal(var.numpy(), names[name].numpy(), err_msg=name)
    with pytest.raises(ValueError, match="only fits the model class"):
        checkpoints.restore_for_training(AlbertClassifier(config, num_labels=2), h5)
    with pytest.raises(ValueError, match="init_from_group0 applies to TF1"):
        checkpoints.restore_for_training(AlbertPretrainer(config), h5, init_from_group0=True)


def test_restore_for_training_from_tf_train_checkpoint(tmp_path):
    config = CONFIGS["groups2_inner2_E!=H"]
    source = AlbertPretrainer(config)
    tf1_names.variables_for(source)
    randomize(source.weights, seed=14)
    written = tf.train.Checkpoint(model=source).write(str(tmp_path / "ckpt"))
    target = AlbertClassifier(config, num_labels=2)
    report = checkpoints.restore_for_training(target, written)
    assert report.missing == ["output_weights", "output_bias"]


def test_tf_train_checkpoint_without_encoder_weights_is_an_error(tmp_path):
    config = CONFIGS["groups2_inner2_E!=H"]
    partial = AlbertPretrainer(config)
    partial.build()
    # A checkpoint that holds only the heads of a pretrainer, under the key "model".
    written = tf.train.Checkpoint(model=tf.train.Checkpoint(
        masked_lm=partial.masked_lm)).write(str(tmp_path / "ckpt"))
    assert checkpoints.detect_format(written) == "tf_checkpoint"
    with pytest.raises(CheckpointMismatchError, match="restored no value for .* encoder"):
        checkpoints.restore_for_training(AlbertPretrainer(config), written)


def test_from_official_dir_and_mlm_on_mask(tmp_path, shared_data):
    spm_model = shared_data / "spm" / "albert_style_pd8k.model"
    if not spm_model.exists():
        pytest.skip(f"{spm_model} not found")
    from albert_tf.tokenization import SentencePieceTokenizer

    vocab_size = len(SentencePieceTokenizer(str(spm_model)).vocab)
    config = tiny_config(vocab_size=vocab_size, max_position_embeddings=64)
    shutil.copy(spm_model, tmp_path / "30k-clean.model")
    config.to_json_file(str(tmp_path / "albert_config.json"))
    weights = official_weights(config.to_dict(), seed=15)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights, optimizer_slots=True)

    # The three lines of docs/checkpoints.md.
    import albert_tf
    albert = albert_tf.from_official_dir(str(tmp_path))
    best = albert.fill_mask("The cat sat on the [MASK].", top_k=3)

    ids, positions = albert.encode_with_masks("The cat sat on the [MASK].")
    assert ids[0] == 2 and ids[-1] == 3 and [ids[p] for p in positions] == [4]
    assert albert.tokenizer.convert_tokens_to_ids(["[MASK]"]) == [4]
    mlm, _ = ref.pretrainer_forward(weights, config.to_dict(), np.array([ids]), None, None,
                                    np.array([positions]))
    probs = ref.softmax(mlm[0, 0])
    order = np.argsort(-probs)[:3]
    assert [piece for piece, _ in best[0]] == \
        albert.tokenizer.convert_ids_to_tokens(order.tolist())
    np.testing.assert_allclose([p for _, p in best[0]], probs[order], rtol=1e-4)
    assert len(albert.report.skipped) == 2 * len(weights) + 1
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        albert.fill_mask("no mask here")
