"""Distillation: the student's config and first weights, the loss against its formulas,
and run_distill.py end to end (a run directory and exports like run_classifier.py's)."""
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
    ("tiny", r"--student=tiny \(H=312\) is wider than the teacher \(H=32\)"),
])
def test_bad_students_are_one_line(spec, message):
    with pytest.raises(UserValueError, match=message):
        students.student_config(tiny_config(), spec)


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


@pytest.mark.slow  # 30 s: four CLI runs that stop at their first line
def test_run_distill_mistakes_are_one_line(sst2, shared_data, tmp_path):
    root, teacher, _ = sst2
    wider = distill(root, teacher, "--student=tiny", "--do_train", output="x1")
    assert wider.returncode != 0
    assert "is wider than the teacher (H=64)" in wider.stderr.strip().splitlines()[-1]
    other = shared_data / "spm" / "albert_style_pd8k.model"
    vocabulary = distill(root, teacher, "--student=layers:1", "--do_train",
                         f"--spm_model_file={other}", output="x2")
    assert vocabulary.returncode != 0
    assert "a different vocabulary from the teacher's" in \
        vocabulary.stderr.strip().splitlines()[-1]
    ner = hf_models.write_hf_dir(str(tmp_path / "ner"), "token_classifier",
                                 str(shared_data / "spm_official" / "30k-clean.model"),
                                 labels=hf_models.NER_LABELS, seed=5)
    tagger = distill(root, ner, "--student=layers:1", "--do_train", output="x3")
    assert tagger.returncode != 0
    assert "is a token_classifier model; run_distill.py distils text classifiers" in \
        tagger.stderr.strip().splitlines()[-1]
