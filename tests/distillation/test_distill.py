"""Distillation: the student's config and first weights, the loss against its formulas
(soft targets of every family, TinyBERT's hidden states), the teacher's family, and
run_distill.py end to end (a run directory and exports like the family CLI's)."""
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier
from albert_tf.distillation import objective, students
from albert_tf.errors import UserValueError
from tests.conftest import REPO_ROOT
from tests.helpers import glue_data, hf_models
from tests.modeling.test_numerics import tiny_config


def test_student_configs():
    teacher = tiny_config(hidden_size=384, num_hidden_layers=12, num_hidden_groups=1,
                          inner_group_num=1, intermediate_size=1536, num_attention_heads=12)
    tiny = students.student_config(teacher, "tiny")
    assert (tiny.num_hidden_layers, tiny.hidden_size, tiny.intermediate_size,
            tiny.num_attention_heads) == (4, 312, 1248, 12)
    assert tiny.vocab_size == teacher.vocab_size
    assert tiny.max_position_embeddings == teacher.max_position_embeddings
    small = students.student_config(teacher, "small")
    assert (small.num_hidden_layers, small.hidden_size) == (6, 384)
    shallow = students.student_config(teacher, "layers:3")
    assert shallow.num_hidden_layers == 3 and shallow.hidden_size == 384


@pytest.mark.parametrize("spec, message", [
    ("layers:0", r"--student=layers:0: layers:k needs k from 1 to 2 \(fewer than the "
                 r"teacher's 3 layers\)"),
    ("layers:3", "layers:k needs k from 1 to 2"),
    ("layers:x", "layers:k needs k"),
    ("huge", r"--student='huge': tiny, small or layers:k"),
])
def test_bad_students_are_one_line(spec, message):
    with pytest.raises(UserValueError, match=message):
        students.student_config(tiny_config(), spec)


def test_a_preset_may_be_wider_than_a_small_teacher():
    """The soft targets need no common width; the hidden states have a projection."""
    assert students.student_config(tiny_config(), "tiny").hidden_size == 312


def test_a_shallower_student_starts_as_the_teacher():
    config = tiny_config(num_hidden_groups=1)
    teacher = AlbertClassifier(config, num_labels=3)
    teacher.build()
    student = AlbertClassifier(students.student_config(config, "layers:2"), num_labels=3)
    student.build()
    assert students.initialise_from_teacher(student, teacher) == len(student.weights)
    teacher.inference_layers = 2
    batch = {"input_ids": np.arange(2, 24).reshape(2, 11).astype(np.int32)}
    np.testing.assert_array_equal(student(batch)["logits"], teacher(batch)["logits"])


def test_soft_losses_follow_their_formulas():
    rng = np.random.default_rng(0)
    student, teacher = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    t = 2.0

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    p = np.exp(log_softmax(teacher / t))
    kl = (p * (log_softmax(teacher / t) - log_softmax(student / t))).sum(-1) * t * t
    got = objective.soft_loss(tf.constant(student, tf.float32), tf.constant(teacher, tf.float32),
                              t, "single_label")
    np.testing.assert_allclose(got, kl, rtol=1e-5)
    sigmoid = 1 / (1 + np.exp(-teacher / t))
    q = 1 / (1 + np.exp(-student / t))
    bce_kl = (sigmoid * np.log(sigmoid / q) + (1 - sigmoid) * np.log((1 - sigmoid) / (1 - q)))
    got = objective.soft_loss(tf.constant(student, tf.float32), tf.constant(teacher, tf.float32),
                              t, "multi_label")
    np.testing.assert_allclose(got, bce_kl.mean(-1) * t * t, rtol=1e-4, atol=1e-6)
    got = objective.soft_loss(tf.constant(student[:, :1], tf.float32),
                              tf.constant(teacher[:, :1], tf.float32), t, "regression")
    np.testing.assert_allclose(got, (student[:, 0] - teacher[:, 0]) ** 2, rtol=1e-5)


@pytest.fixture(scope="module")
def sst2(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("distill")
    glue_data.sst2_split(shared_data, root, train=96, dev=32)
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    teacher = hf_models.write_hf_dir(str(root / "teacher"), "classifier", spm,
                                     labels=["0", "1"], seed=2, max_length=64)
    return root, teacher, spm


def distill(root, teacher, *extra, output="student_run"):
    command = [sys.executable, "run_distill.py", f"--teacher={teacher}", "--task_name=sst-2",
               f"--data_dir={root / 'data'}", f"--output_dir={root / output}",
               "--max_seq_length=64", "--train_batch_size=16", "--train_step=6",
               "--save_checkpoints_steps=6", "--iterations_per_loop=6", "--seed=1",
               *extra]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)


@pytest.mark.slow  # 60 s: trains a student, writes its exports
def test_run_distill_makes_a_run_like_run_classifiers(sst2):
    root, teacher, _ = sst2
    done = distill(root, teacher, "--student=layers:1", "--do_train", "--do_eval",
                   f"--export_dir={root / 'student_run' / 'export'}",
                   "--export_format=saved_model,onnx")
    assert done.returncode == 0, done.stderr[-3000:]
    run = root / "student_run"
    config = json.loads((run / "student" / "albert_config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["hidden_size"] == 64
    best = json.loads((run / "best_eval.json").read_text())
    assert {"eval_accuracy", "eval_loss", "global_step"} <= set(best)
    from albert_tf import pipeline

    classify = pipeline("text-classification", model=str(run / "export" / "model.onnx"))
    assert classify("a gripping film")[0]["label"] in ("0", "1")
    record = json.loads((run / "export" / "albert_tf_export.json").read_text())
    assert record["albert_config"]["num_hidden_layers"] == 1


@pytest.mark.slow  # 45 s: CLI runs that stop at their first line
def test_run_distill_mistakes_are_one_line(sst2, shared_data, tmp_path):
    root, teacher, _ = sst2
    alpha = distill(root, teacher, "--student=layers:1", "--do_train",
                    "--distill_alpha=1.5", output="x1")
    assert alpha.returncode != 0
    assert "--distill_alpha must be in [0, 1], got 1.5" in alpha.stderr.strip().splitlines()[-1]
    other = shared_data / "spm" / "albert_style_pd8k.model"
    vocabulary = distill(root, teacher, "--student=layers:1", "--do_train",
                         f"--spm_model_file={other}", output="x2")
    assert vocabulary.returncode != 0
    assert "a different vocabulary from the teacher's" in \
        vocabulary.stderr.strip().splitlines()[-1]
    pretrained = hf_models.write_hf_dir(str(tmp_path / "mlm"), "masked_lm",
                                        str(shared_data / "spm_official" / "30k-clean.model"),
                                        seed=5)
    reader = distill(root, pretrained, "--student=layers:1", "--do_train", output="x3")
    assert reader.returncode != 0
    assert ("is a pretrainer model; run_distill.py distils text classifiers, NER taggers, "
            "multiple-choice models and SQuAD v1.1 / CMRC 2018 readers"
            ) in reader.stderr.strip().splitlines()[-1]
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    named = hf_models.write_hf_dir(str(tmp_path / "named"), "classifier", spm,
                                   labels=["neg", "pos"], seed=2, max_length=64)
    labels = distill(root, named, "--student=layers:1", "--do_train", output="x4")
    assert labels.returncode != 0
    assert (f"--teacher={named} predicts ['neg', 'pos']; --task_name=sst-2 has ['0', '1']"
            in labels.stderr.strip().splitlines()[-1])
    long = distill(root, teacher, "--student=layers:1", "--do_train",
                   "--max_seq_length=128", output="x5")
    assert long.returncode != 0
    assert (f"--max_seq_length=128 exceeds the teacher's 64 positions (--teacher={teacher})"
            in long.stderr.strip().splitlines()[-1])
    missing = distill(root, str(tmp_path / "absent"), "--do_train", output="x6")
    assert (f"--teacher={tmp_path / 'absent'}: no such file or directory"
            in missing.stderr.strip().splitlines()[-1])


def test_layer_map_is_tinyberts_uniform_map():
    assert objective.layer_map(4, 12) == [2, 5, 8, 11]
    assert objective.layer_map(2, 6) == [2, 5]
    assert objective.layer_map(3, 3) == [0, 1, 2]
    assert objective.layer_map(1, 2) == [1]


def test_hidden_loss_follows_its_formula():
    """Student layer m against teacher layer m * N // M, through the projection, mean
    squared difference over the real tokens and the teacher's width, summed over layers."""
    rng = np.random.default_rng(1)
    student = [rng.normal(size=(2, 5, 3)).astype(np.float32) for _ in range(2)]
    teacher = [rng.normal(size=(2, 5, 4)).astype(np.float32) for _ in range(4)]
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    projection = tf.keras.layers.Dense(4)
    projection.build((None, None, 3))
    kernel, bias = (w.numpy() for w in projection.weights)
    expected = np.zeros(2)
    for m, n in ((0, 1), (1, 3)):
        per_token = ((student[m] @ kernel + bias - teacher[n]) ** 2).mean(-1)
        expected += (per_token * mask).sum(-1) / mask.sum(-1)
    got = objective.hidden_loss([tf.constant(x) for x in student],
                                [tf.constant(x) for x in teacher], mask, projection)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def _objective_case(family_name):
    """(student, teacher, family objective, targets, features) of a tiny model pair."""
    from albert_tf.modeling.models import AlbertMultipleChoice
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier
    from albert_tf.tasks.classification.job import ClassificationObjective
    from albert_tf.tasks.multiple_choice.job import MultipleChoiceObjective
    from albert_tf.tasks.tagging.job import TaggingObjective

    tf.keras.utils.set_random_seed(3)
    config = tiny_config(num_hidden_groups=1)
    wide = students.student_config(config, "layers:1")
    narrow = tiny_config(num_hidden_groups=1, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32)
    rng = np.random.default_rng(2)
    if family_name == "tagging":
        make = lambda c: AlbertTokenClassifier(c, num_labels=3)  # noqa: E731
        ids = rng.integers(5, 60, (3, 9)).astype(np.int32)
        labels = rng.integers(-1, 3, (3, 9)).astype(np.int32)
        features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                    "segment_ids": np.zeros_like(ids), "label_ids": labels}
        family = TaggingObjective()
    elif family_name == "multiple_choice":
        make = lambda c: AlbertMultipleChoice(c, num_choices=4)  # noqa: E731
        ids = rng.integers(5, 60, (2, 4, 9)).astype(np.int32)
        features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                    "segment_ids": np.zeros_like(ids),
                    "label_ids": np.array([1, 3], np.int32),
                    "is_real_example": np.array([1, 0], np.int32),
                    "level_ids": np.array([0, 1], np.int32)}
        family = MultipleChoiceObjective()
    else:
        make = lambda c: AlbertClassifier(c, num_labels=3)  # noqa: E731
        ids = rng.integers(5, 60, (4, 9)).astype(np.int32)
        features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                    "segment_ids": np.zeros_like(ids),
                    "label_ids": np.array([0, 2, 1, 1], np.int32)}
        family = ClassificationObjective(regression=False)
    teacher, student, narrow_student = make(config), make(wide), make(narrow)
    for model in (teacher, student, narrow_student):
        model.build()
    return teacher, student, narrow_student, family, features


@pytest.mark.parametrize("family_name", ["classification", "tagging", "multiple_choice"])
def test_distillation_loss_is_its_terms_weighted(family_name):
    """alpha x the family's own loss + (1 - alpha) x the soft loss's mean over the family's
    units + beta x the hidden loss's mean over the encoder's rows, each term computed here
    from the two models' outputs."""
    teacher, student, narrow, family, features = _objective_case(family_name)
    targets = objective.family_targets(teacher)
    for model, weights in ((student, (0.0, 0.0)), (narrow, (0.7, 0.4)), (student, (0.0, 0.9))):
        transfer = objective.TransferTerms(teacher.config, model.config, *weights)
        loss_fn = objective.DistillationObjective(family, teacher, targets, temperature=2.0,
                                                  alpha=0.3, transfer=transfer)
        assert (transfer.projection is not None) == (model is narrow and bool(weights[0]))
        normalizers = loss_fn.normalizers(features)
        got, sums = loss_fn.loss(model, features, normalizers, training=False)
        hard, _ = family.loss(model, features, family.normalizers(features), training=False)
        mine = model(features, training=False)
        theirs = targets.teacher_outputs(teacher, features)
        soft = objective.soft_loss(tf.cast(mine["logits"], tf.float32),
                                   tf.cast(theirs["logits"], tf.float32), 2.0, "single_label")
        units = np.ones(len(features["input_ids"]), np.float32)
        if family_name == "tagging":
            units = (features["label_ids"] >= 0).astype(np.float32)
        elif family_name == "multiple_choice":
            units = features["is_real_example"].astype(np.float32)
        expected = 0.3 * float(hard) + 0.7 * float((soft.numpy() * units).sum() / units.sum())
        mask = targets.input_mask(features)
        if weights[0]:
            rows = objective.hidden_loss(objective.encoder_layers(model, mine),
                                         objective.encoder_layers(teacher, theirs), mask,
                                         transfer.projection).numpy()
            expected += 0.7 * rows.mean()
            assert float(sums["transfer_rows"]) == len(rows)
            assert loss_fn.trainable_variables == transfer.projection.trainable_variables
        if weights[1]:
            heads = objective.relation_heads(model.config, teacher.config)
            rows = objective.relation_loss(
                objective.self_attention_relations(
                    *objective.last_attention_input(model, mine), mask, heads),
                objective.self_attention_relations(
                    *objective.last_attention_input(teacher, theirs), mask, heads),
                mask).numpy()
            expected += weights[1] * rows.mean()
            assert float(sums["attention_total"]) == pytest.approx(rows.sum(), rel=1e-5)
        np.testing.assert_allclose(float(got), expected, rtol=1e-5)
        assert float(sums["soft_units"]) == units.sum()
        finals = loss_fn.finalize({k: float(v) for k, v in sums.items()})
        assert "soft_loss" in finals
        assert ("attention_loss" in finals) == bool(weights[1])


def test_relation_heads_divide_both_widths():
    config = tiny_config
    assert objective.relation_heads(config(hidden_size=312, num_attention_heads=12),
                                    config(hidden_size=768, num_attention_heads=12)) == 12
    assert objective.relation_heads(config(hidden_size=312, num_attention_heads=12),
                                    config(hidden_size=128, num_attention_heads=4)) == 4
    assert objective.relation_heads(config(hidden_size=30, num_attention_heads=2),
                                    config(hidden_size=64, num_attention_heads=8)) == 2


def test_self_attention_relations_follow_minilm_v2():
    """Each of x W_q + b_q, x W_k + b_k, x W_v + b_v split into R relation heads of H/R:
    log softmax(A A^T / sqrt(H/R)) over the keys, padded keys masked; the loss is
    KL(teacher || student) averaged over heads and real queries, summed over the three."""
    from albert_tf.modeling.layers import AttentionSublayer

    rng = np.random.default_rng(4)
    blocks = []
    for width in (8, 12):
        block = AttentionSublayer(width, 2, 0.02, 0.0, 0.0)
        block.build((None, None, width))
        blocks.append(block)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], np.int32)
    # Large enough inputs that the relations are far from uniform: a KL of size.
    inputs = [rng.normal(scale=20.0, size=(2, 4, w)).astype(np.float32) for w in (8, 12)]

    def reference(block, x, heads):
        out = []
        for dense in (block.query, block.key, block.value):
            a = x @ dense.kernel.numpy() + dense.bias.numpy()
            a = a.reshape(2, 4, heads, -1).transpose(0, 2, 1, 3)
            scores = a @ a.transpose(0, 1, 3, 2) / np.sqrt(a.shape[-1])
            scores = scores + (1 - mask[:, None, None, :]) * -10000.0
            scores = scores - scores.max(-1, keepdims=True)
            out.append(scores - np.log(np.exp(scores).sum(-1, keepdims=True)))
        return out

    student, teacher = (reference(b, x, 4) for b, x in zip(blocks, inputs))
    got = objective.self_attention_relations(inputs[0], blocks[0], mask, 4)
    for mine, expected in zip(got, student):
        np.testing.assert_allclose(mine.numpy(), expected, rtol=1e-6, atol=1e-4)
    expected = np.zeros(2)
    for s_rel, t_rel in zip(student, teacher):
        kl = (np.exp(t_rel) * (t_rel - s_rel)).sum(-1).mean(1)  # [2, S]
        expected += (kl * mask).sum(-1) / mask.sum(-1)
    got = objective.relation_loss(got, objective.self_attention_relations(
        inputs[1], blocks[1], mask, 4), mask)
    assert expected.min() > 0.01
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4)


def test_a_readers_soft_loss_is_its_start_and_end_kl():
    from albert_tf.modeling.models import AlbertSpanLabeler

    tf.keras.utils.set_random_seed(5)
    config = tiny_config(num_hidden_groups=1)
    teacher = AlbertSpanLabeler(config)
    student = AlbertSpanLabeler(students.student_config(config, "layers:1"))
    for model in (teacher, student):
        model.build()
    targets = objective.family_targets(teacher)
    assert isinstance(targets, objective.SpanTargets)
    ids = np.random.default_rng(0).integers(5, 60, (3, 9)).astype(np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                "segment_ids": np.zeros_like(ids)}
    mine, theirs = student(features), teacher(features)
    expected = 0.5 * sum(objective.soft_loss(mine[name], theirs[name], 2.0, "single_label")
                         for name in ("start_logits", "end_logits"))
    np.testing.assert_allclose(targets.soft(mine, theirs, 2.0), expected, rtol=1e-6)
    assert targets.units(features).numpy().tolist() == [1.0, 1.0, 1.0]


def test_the_teachers_family_is_read_from_its_files(tmp_path, shared_data):
    from albert_tf.distillation import teacher as teachers

    def record(name, content):
        directory = tmp_path / name
        directory.mkdir()
        file, value = content
        (directory / file).write_text(json.dumps(value))
        return str(directory)

    assert teachers.teacher_family(record("run_ner", ("albert_tf_run.json",
                                                      {"task": "ner conll2003"}))) == "tagging"
    assert teachers.teacher_family(record("run_race", ("albert_tf_run.json",
                                                       {"task": "c3"}))) == "multiple_choice"
    assert teachers.teacher_family(record("run_sst", ("albert_tf_run.json",
                                                      {"task": "sst-2"}))) == "classification"
    assert teachers.teacher_family(record("export", ("albert_tf_export.json",
                                                     {"task": "tagging"}))) == "tagging"
    assert teachers.teacher_family(record("hf", ("config.json", {
        "architectures": ["AlbertForMultipleChoice"]}))) == "multiple_choice"
    assert teachers.teacher_family(record("run_squad", ("albert_tf_run.json",
                                                        {"task": "squad v1.1"}))) == "span_qa"
    assert teachers.teacher_family(record("hf_qa", ("config.json", {
        "architectures": ["AlbertForQuestionAnswering"]}))) == "span_qa"
    assert teachers.teacher_family(str(tmp_path / "absent")) == "classification"
    assert teachers.teacher_family(None) == "classification"


def _ner_setup(shared_data, root):
    from tests.cli.test_run_ner_cli import CONLL_LABELS, DOCSTART, blocks_of, write_blocks

    conll = shared_data / "ner" / "conll2003" / "eng.train"
    if not conll.exists():
        pytest.skip(f"{conll} not found (shared NER samples)")
    blocks = blocks_of(conll)
    (root / "conll2003").mkdir()
    write_blocks(root / "conll2003" / "eng.train", blocks[:120], DOCSTART)
    write_blocks(root / "conll2003" / "eng.testa", blocks[120:160], DOCSTART)
    write_blocks(root / "conll2003" / "eng.testb", blocks[160:200], DOCSTART)
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    return hf_models.write_hf_dir(str(root / "ner_teacher"), "token_classifier", spm,
                                  labels=CONLL_LABELS, seed=3, max_length=64)


def _run_distill(*flags):
    return subprocess.run([sys.executable, "run_distill.py", *flags], cwd=REPO_ROOT,
                          capture_output=True, text=True)


@pytest.mark.slow  # 70 s: a NER student with the hidden-state loss, resumed, then exported
def test_a_ner_student_is_a_run_ner_run(shared_data, tmp_path):
    """A tagger teacher brings run_ner.py's flags and job; a wider `tiny` student learns
    the teacher's hidden states through the projection, which the training checkpoints keep
    (a resumed run goes on with it) and the export leaves out."""
    teacher = _ner_setup(shared_data, tmp_path)
    common = [f"--teacher={teacher}", "--student=tiny", "--task_name=conll2003",
              f"--data_dir={tmp_path / 'conll2003'}", f"--output_dir={tmp_path / 'run'}",
              "--do_train", "--do_eval", "--max_seq_length=48", "--doc_stride=16",
              "--train_batch_size=16", "--save_checkpoints_steps=3",
              "--iterations_per_loop=3", "--hidden_weight=1", "--seed=1"]
    first = _run_distill(*common, "--train_step=3")
    assert first.returncode == 0, first.stderr[-3000:]
    reader = tf.train.load_checkpoint(str(tmp_path / "run" / "checkpoints" / "ckpt-3"))
    kernel_key = [key for key in reader.get_variable_to_shape_map()
                  if key.startswith("objective/") and "OPTIMIZER" not in key
                  and reader.get_variable_to_shape_map()[key] == [312, 64]]
    assert kernel_key, "the projection is in the training checkpoint"
    before = reader.get_tensor(kernel_key[0])
    second = _run_distill(*common, "--train_step=6",
                          f"--export_dir={tmp_path / 'run' / 'export'}",
                          "--export_format=saved_model")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "restored" in second.stderr.lower() or "resum" in second.stderr.lower()
    after = tf.train.load_checkpoint(str(tmp_path / "run" / "checkpoints" / "ckpt-6"))
    assert not np.array_equal(after.get_tensor(kernel_key[0]), before)
    assert "hidden_loss" in second.stderr
    config = json.loads((tmp_path / "run" / "student" / "albert_config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (4, 312)
    from albert_tf import pipeline

    tagger = pipeline("token-classification", model=str(tmp_path / "run" / "export"))
    assert isinstance(tagger("John lives in Paris"), list)
    saved = tf.train.load_checkpoint(str(tmp_path / "run" / "export" / "variables" /
                                         "variables"))
    assert not any(shape == [312, 64] for shape in saved.get_variable_to_shape_map().values())


@pytest.mark.slow  # 25 s: a RACE student of a Hugging Face multiple-choice teacher, with
# both encoder terms
def test_a_race_student_is_a_run_race_run(shared_data, tmp_path):
    import shutil

    data = tmp_path / "race"
    for split in ("train", "dev"):
        shutil.copytree(shared_data / "race" / "RACE" / split, data / "RACE" / split)
    teacher = hf_models.write_hf_dir(str(tmp_path / "teacher"), "multiple_choice",
                                     str(shared_data / "spm_official" / "30k-clean.model"),
                                     seed=4, max_length=64)
    done = _run_distill(f"--teacher={teacher}", "--student=layers:1", f"--data_dir={data}",
                        f"--output_dir={tmp_path / 'run'}", "--max_seq_length=64",
                        "--max_qa_length=24", "--train_batch_size=4", "--eval_batch_size=5",
                        "--train_step=4", "--save_checkpoints_steps=4", "--warmup_step=1",
                        "--hidden_weight=0.5", "--attention_weight=0.5")
    assert done.returncode == 0, done.stderr[-3000:]
    best = json.loads((tmp_path / "run" / "best_eval.json").read_text())
    assert {"eval_accuracy", "eval_accuracy_middle", "global_step"} <= set(best)
    assert all(f"{name}_loss" in done.stderr for name in ("soft", "hidden", "attention"))
    record = json.loads((tmp_path / "run" / "albert_tf_run.json").read_text())
    assert record["task"] == "race"


def test_transfer_files_are_read_line_by_line(tmp_path):
    from albert_tf.distillation.job import read_transfer_file
    from albert_tf.tasks.classification.glue import TASKS

    single, pair = TASKS["sst-2"], TASKS["mrpc"]
    path = tmp_path / "transfer.txt"
    path.write_text("a gripping film\n\n  \nsecond line\r\n", encoding="utf-8")
    examples = read_transfer_file(str(path), single)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ("a gripping film", None, None), ("second line", None, None)]
    assert examples[1].source == f"{path}:4"
    path.write_text("one\ttwo\n", encoding="utf-8")
    assert read_transfer_file(str(path), pair)[0].text_b == "two"
    with pytest.raises(UserValueError, match=rf"{path}:1: 2 tab-separated fields; sst-2 reads "
                                             "one text with no tab per line"):
        read_transfer_file(str(path), single)
    path.write_text("ok\tfine\nalone\n", encoding="utf-8")
    with pytest.raises(UserValueError, match=r":2: 1 tab-separated fields; mrpc reads two "
                                             r"texts \(a sentence pair\)"):
        read_transfer_file(str(path), pair)
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(UserValueError, match="no text"):
        read_transfer_file(str(path), single)
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(UserValueError, match="not UTF-8 text"):
        read_transfer_file(str(path), single)


@pytest.mark.slow  # 40 s: a student that also reads unlabelled transfer text
def test_transfer_text_joins_training_with_soft_targets_only(sst2, tmp_path):
    root, teacher, _ = sst2
    transfer = tmp_path / "transfer.txt"
    transfer.write_text("".join(f"an unlabelled sentence number {i}\n" for i in range(64)),
                        encoding="utf-8")
    done = distill(root, teacher, "--student=layers:1", "--do_train",
                   f"--transfer_file={transfer}", output="transfer_run")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"transfer text: 64 unlabelled examples from {transfer}" in done.stderr
    caches = list((root / "transfer_run").glob("*transfer*"))
    assert caches, "the transfer cache is in the output directory"
    records = [tf.train.Example.FromString(r.numpy())
               for r in tf.data.TFRecordDataset(str(next(c for c in caches
                                                         if c.suffix != ".json")))]
    assert len(records) == 64
    assert {e.features.feature["is_real_example"].int64_list.value[0] for e in records} == {0}
    missing = distill(root, teacher, "--student=layers:1", "--do_train",
                      f"--transfer_file={tmp_path / 'absent.txt'}", output="transfer_x")
    assert missing.returncode != 0
    assert f"--transfer_file={tmp_path / 'absent.txt'}: no such file" in \
        missing.stderr.strip().splitlines()[-1]


def test_the_labels_loss_skips_rows_without_a_label():
    """Transfer rows (is_real_example 0) count in the soft loss, not in the labels' loss
    or accuracy; a batch of real rows alone gives the plain mean."""
    from albert_tf.tasks.classification.job import ClassificationObjective

    teacher, student, _, family, features = _objective_case("classification")
    real = dict(features, is_real_example=np.array([1, 0, 1, 0], np.int32))
    loss, sums = family.loss(student, real, family.normalizers(real), training=False)
    per_row = tf.keras.losses.sparse_categorical_crossentropy(
        features["label_ids"], student(features)["logits"], from_logits=True).numpy()
    np.testing.assert_allclose(float(loss), per_row[[0, 2]].mean(), rtol=1e-5)
    assert float(sums["examples"]) == 2.0 and float(sums["correct"]) <= 2.0
    plain, _ = ClassificationObjective(regression=False).loss(
        student, features, family.normalizers(features), training=False)
    np.testing.assert_allclose(float(plain), per_row.mean(), rtol=1e-5)
    targets = objective.family_targets(teacher)
    assert targets.units(real).numpy().tolist() == [1.0, 1.0, 1.0, 1.0]


@pytest.mark.slow  # 40 s: a SQuAD v1.1 student of a Hugging Face reader
def test_a_squad_student_is_a_run_squad_run(shared_data, tmp_path):
    data = json.loads((shared_data / "squad" / "dev-v1.1.json").read_text())
    article = data["data"][0]
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"version": data.get("version"), "data": [
        {"title": article["title"], "paragraphs": article["paragraphs"][:3]}]}))
    teacher = hf_models.write_hf_dir(str(tmp_path / "teacher"), "span",
                                     str(shared_data / "spm_official" / "30k-clean.model"),
                                     seed=1)
    common = [f"--teacher={teacher}", "--student=layers:1", f"--train_file={path}",
              f"--predict_file={path}", "--max_seq_length=64", "--doc_stride=32",
              "--max_query_length=16", "--train_batch_size=8", "--predict_batch_size=16"]
    done = _run_distill(*common, f"--output_dir={tmp_path / 'run'}", "--do_train",
                        "--do_predict", "--num_train_epochs=1", "--save_checkpoints_steps=4",
                        "--hidden_weight=1", "--attention_weight=1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(f"{name}_loss" in done.stderr for name in ("soft", "hidden", "attention"))
    assert (tmp_path / "run" / "predictions.json").exists()
    assert json.loads((tmp_path / "run" / "albert_tf_run.json").read_text())["task"] == \
        "squad v1.1"
    v2 = _run_distill(*common, f"--output_dir={tmp_path / 'v2'}", "--do_train",
                      "--version_2_with_negative")
    assert v2.returncode != 0
    assert "a SQuAD v2.0 student needs a v2.0 teacher" in v2.stderr.strip().splitlines()[-1]
