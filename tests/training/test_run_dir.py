"""--output_dir safety: another task's or model's run is refused before anything is written,
the same run resumes (re-evaluating a checkpoint an interruption left unevaluated), and a
directory that cannot be created is an error naming it."""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertConfig, errors, fileio, finetuning
from albert_tf.training import run_dir
from albert_tf.pretraining import PretrainingOptions, run_pretraining
from tests.helpers.pretraining_data import make_examples, write_records
from tests.finetuning.test_job import ToyClassification

CONFIG = dict(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=64, max_position_embeddings=16)


def toy_data(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n).astype("int32")
    ids = np.where(labels[:, None] == 1, rng.integers(5, 20, (n, 16)),
                   rng.integers(20, 40, (n, 16))).astype("int32")
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
            "label_ids": labels}


def identity(task="mrpc", **config):
    return run_dir.RunIdentity.of(run_dir.FINETUNING, task,
                                  AlbertConfig.from_dict(dict(CONFIG, **config)),
                                  labels=["0", "1"], metric="eval_accuracy")


def finetune(output_dir, run_identity=None, interrupt=None, rising=False, **changes):
    """A toy fine-tuning run; `interrupt(step)` is called before each evaluation; `rising`:
    the evaluation reports eval_accuracy = step / 100, so that every checkpoint is a new best."""
    task, train, dev = ToyClassification(), toy_data(128, 0), toy_data(32, 1)
    config = AlbertConfig.from_dict(CONFIG)

    def evaluate_fn(model, step):
        if interrupt is not None:
            interrupt(step)
        sums = {n: 0.0 for n in task.metric_names}
        _, found = task.loss(model, dev, task.normalizers(dev), training=False)
        for key, value in found.items():
            sums[key] += float(value)
        metrics = task.finalize(sums)
        if rising:
            metrics["eval_accuracy"] = step / 100
        return metrics

    values = dict(output_dir=str(output_dir), do_train=True, do_eval=True, train_batch_size=16,
                  learning_rate=1e-3, train_step=20, save_checkpoints_steps=10,
                  iterations_per_loop=10, seed=1)
    values.update(changes)
    return finetuning.run_finetuning(
        finetuning.FinetuningOptions(**values),
        lambda dtype: AlbertClassifier(config, num_labels=2, dtype=dtype), task,
        "eval_accuracy",
        train_dataset_fn=lambda ctx: tf.data.Dataset.from_tensor_slices(train).repeat().batch(16),
        evaluate_fn=evaluate_fn, identity=run_identity or identity())


def snapshot(directory):
    """Every file under `directory` with its size and modification time."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = (os.path.getsize(path),
                                                       os.stat(path).st_mtime_ns)
    return found


def evaluated_steps(output_dir):
    return [int(line.split(" = ")[1]) for line in
            (output_dir / "eval_results.txt").read_text().splitlines()
            if line.startswith("global_step")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished toy fine-tuning run of mrpc (train_step 20, evaluated at 10 and 20)."""
    out = tmp_path_factory.mktemp("mrpc_run")
    finetune(out)
    return out


# --- another task, another model, another kind of run --------------------------------------------


@pytest.mark.parametrize("other, message", [
    (identity("sts-b"), "a fine-tuning run of mrpc, not a fine-tuning run of sts-b"),
    (identity(hidden_size=64, num_attention_heads=4),
     "a fine-tuning run of mrpc with another model config: hidden_size 32 there, 64 here"),
    (run_dir.RunIdentity.of(run_dir.FINETUNING, "mrpc", AlbertConfig.from_dict(CONFIG),
                            labels=["0", "1", "2"], metric="eval_accuracy"),
     r"a fine-tuning run of mrpc with other settings: labels \['0', '1'\] there, "
     r"\['0', '1', '2'\] here"),
])
def test_another_task_or_model_is_refused_before_anything_is_written(trained, other, message):
    before = snapshot(trained)
    with pytest.raises(run_dir.OutputDirError, match=(
            rf"^--output_dir={trained} holds {message} \(it has checkpoints/, "
            r"model.ckpt-best.index, best_eval.json, eval_results.txt, best_trial.txt\): give "
            rf"another --output_dir, or delete {trained} to start over$")):
        finetune(trained, other, train_step=30)
    assert snapshot(trained) == before


def test_same_task_resumes(trained, tmp_path):
    out = tmp_path / "copy"
    tf.io.gfile.makedirs(str(out))
    for name in os.listdir(trained):  # resume a copy: the module's run stays as it was
        src = trained / name
        if src.is_dir():
            shutil.copytree(src, out / name)
        else:
            (out / name).write_bytes(src.read_bytes())
    results = finetune(out, train_step=30)
    assert results["global_step"] == 30
    assert evaluated_steps(out) == [10, 20, 30]
    record = json.loads((out / run_dir.RECORD).read_text())
    assert record == dict(identity().to_json())
    assert record["model"]["hidden_size"] == 32 and record["task"] == "mrpc"


@pytest.mark.slow  # 7 s
def test_pretraining_and_finetuning_runs_do_not_share_a_directory(tmp_path):
    records = write_records(tmp_path / "train.tfrecord", make_examples(32, seed=0))

    def pretrain(out, **config):
        return run_pretraining(PretrainingOptions(
            albert_config=AlbertConfig.from_dict(dict(CONFIG, **config)), output_dir=str(out),
            input_file=records, max_seq_length=16, max_predictions_per_seq=4,
            train_batch_size=8, optimizer="adamw", learning_rate=1e-3, num_train_steps=2,
            num_warmup_steps=0, save_checkpoints_steps=2, iterations_per_loop=2, seed=3,
            do_eval=False))

    pretrained = tmp_path / "pretrain"
    pretrain(pretrained)
    before = snapshot(pretrained)
    with pytest.raises(run_dir.OutputDirError, match=(
            rf"^--output_dir={pretrained} holds a pretraining run, not a fine-tuning run of "
            r"mrpc \(it has checkpoints/, model.ckpt-best.index, albert_config.json\)")):
        finetune(pretrained)
    with pytest.raises(run_dir.OutputDirError, match=(
            "holds a pretraining run with another model config: hidden_size 32 there, 64 here")):
        pretrain(pretrained, hidden_size=64)
    assert snapshot(pretrained) == before
    assert pretrain(pretrained)["global_step"] == 2  # the same run: resumes (already done)

    finetuned = tmp_path / "finetune"
    finetune(finetuned, train_step=10)
    before = snapshot(finetuned)
    with pytest.raises(run_dir.OutputDirError, match=(
            rf"^--output_dir={finetuned} holds a fine-tuning run of mrpc, not a pretraining "
            "run")):
        pretrain(finetuned)
    assert snapshot(finetuned) == before


# --- directories without a record ---------------------------------------------------------------


def test_directories_without_a_record_are_judged_by_their_files(tmp_path, caplog):
    download = tmp_path / "albert_base"  # an official download: config and model.ckpt-best
    download.mkdir()
    (download / "albert_config.json").write_text(json.dumps(CONFIG))
    (download / "model.ckpt-best.index").write_bytes(b"x")
    with pytest.raises(run_dir.OutputDirError, match=(
            "holds a pretraining run or a downloaded model, not a fine-tuning run of mrpc "
            r"\(it has model.ckpt-best.index, albert_config.json\)")):
        run_dir.claim_output_dir(str(download), identity())
    pretraining = run_dir.RunIdentity.of(run_dir.PRETRAINING, run_dir.PRETRAINING,
                                         AlbertConfig.from_dict(CONFIG))
    with pytest.raises(run_dir.OutputDirError, match=r"holds a model without checkpoints/ "
                                                     r"\(a downloaded model\?\)"):
        run_dir.claim_output_dir(str(download), pretraining)
    assert sorted(os.listdir(download)) == ["albert_config.json", "model.ckpt-best.index"]

    old_sts = tmp_path / "old_stsb"  # a run of an older version: best_eval.json tells the task
    (old_sts / "checkpoints").mkdir(parents=True)
    (old_sts / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-5"\n')
    (old_sts / "best_eval.json").write_text(json.dumps({"pearson": 0.5, "global_step": 5}))
    with pytest.raises(run_dir.OutputDirError, match=r"holds a run of another task \(its "
                                                     r"best_eval.json has no eval_accuracy\)"):
        run_dir.claim_output_dir(str(old_sts), identity())
    caplog.set_level("WARNING", logger="absl")
    stsb = run_dir.RunIdentity.of(run_dir.FINETUNING, "sts-b", AlbertConfig.from_dict(CONFIG),
                                  labels=None, metric="pearson")
    run_dir.claim_output_dir(str(old_sts), stsb)  # adopted, and recorded from now on
    assert "has no albert_tf_run.json (a run of an older version?)" in caplog.text
    assert run_dir.read_record(str(old_sts)) == stsb
    with pytest.raises(run_dir.OutputDirError, match="a fine-tuning run of sts-b, not a "
                                                     "fine-tuning run of mrpc"):
        run_dir.claim_output_dir(str(old_sts), identity())


def test_a_record_without_any_run_output_is_replaced(tmp_path):
    run_dir.claim_output_dir(str(tmp_path), identity("rte"))  # e.g. a run that failed early
    (tmp_path / "rte_train_s128_0123456789.tf_record").write_bytes(b"")  # a feature cache
    run_dir.claim_output_dir(str(tmp_path), identity("mrpc"))
    assert run_dir.read_record(str(tmp_path)).task == "mrpc"
    (tmp_path / run_dir.RECORD).write_text("{cut")
    with pytest.raises(run_dir.OutputDirError, match=rf"{tmp_path / run_dir.RECORD}: "
                                                     r"unreadable run record"):
        run_dir.claim_output_dir(str(tmp_path), identity("mrpc"))


def test_run_glue_refuses_before_writing_feature_caches(shared_data, tmp_path):
    from albert_tf.tasks.classification.job import ClassificationOptions, run_glue

    spm = shared_data / "spm" / "albert_style_pd8k.model"
    if not spm.exists():
        pytest.skip(f"{spm} not found")
    out = tmp_path / "runs"
    run_dir.claim_output_dir(str(out), run_dir.RunIdentity.of(
        run_dir.FINETUNING, "mrpc", AlbertConfig.from_dict(dict(CONFIG, vocab_size=8000)),
        labels=["0", "1"], metric="eval_accuracy"))
    (out / "eval_results.txt").write_text("eval_accuracy = 0.5\nglobal_step = 10\n")
    options = ClassificationOptions(
        task_name="rte", data_dir=str(shared_data / "glue"), spm_model_file=str(spm),
        albert_config=AlbertConfig.from_dict(dict(CONFIG, vocab_size=8000)), max_seq_length=16,
        finetuning=finetuning.FinetuningOptions(output_dir=str(out), do_train=True,
                                                do_eval=True))
    with pytest.raises(run_dir.OutputDirError, match="holds a fine-tuning run of mrpc, not a "
                                                     "fine-tuning run of rte"):
        run_glue(options)
    assert sorted(os.listdir(out)) == [run_dir.RECORD, "eval_results.txt"]


# --- unwritable directories ---------------------------------------------------------------------


def test_output_dir_that_cannot_be_created_is_named(tmp_path):
    assert issubclass(run_dir.OutputDirError, errors.UserError)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    # (Tests run as root, which may write anywhere: a path under a regular file cannot exist.)
    with pytest.raises(run_dir.OutputDirError, match=(
            rf"^--output_dir={a_file / 'run'}: cannot create or write it \(.*not a "
            r"directory.*\); give a writable --output_dir$")):
        finetune(a_file / "run")
    with pytest.raises(run_dir.OutputDirError, match=rf"^--output_dir={a_file} is a file, not "
                                                     "a directory; give a directory$"):
        finetune(a_file)
    assert a_file.read_text() == "x"


# --- interruptions ------------------------------------------------------------------------------


class Interrupt:
    """Raises KeyboardInterrupt (Ctrl-C) once, when called with `step`."""

    def __init__(self, step):
        self.step, self.fired = step, False

    def __call__(self, step):
        if step == self.step and not self.fired:
            self.fired = True
            raise KeyboardInterrupt


def check_consistent(out):
    """best_eval.json, best_trial.txt and model.ckpt-best name the same, best, step."""
    best = json.loads((out / "best_eval.json").read_text())
    trial = (out / "best_trial.txt").read_text().split(":")
    reader = tf.train.load_checkpoint(str(out / "model.ckpt-best"))
    assert int(trial[0]) == best["global_step"] == int(reader.get_tensor("global_step"))
    accuracies = [float(l.split(" = ")[1]) for l in
                  (out / "eval_results.txt").read_text().splitlines()
                  if l.startswith("eval_accuracy")]
    assert best["eval_accuracy"] == max(accuracies)
    return best["global_step"]


@pytest.mark.parametrize("where", ["evaluation",
                                   pytest.param("best export", marks=pytest.mark.slow)])  # 4 s
def test_ctrl_c_then_rerun_evaluates_the_unrecorded_checkpoint(tmp_path, monkeypatch, where):
    out = tmp_path / "run"
    interrupt = Interrupt(20)
    if where == "best export":
        # Ctrl-C after model.ckpt-best and best_trial.txt, before best_eval.json.
        write = fileio.atomic_write_text

        def interrupted_write(path, text):
            if path.endswith("best_eval.json") and '"global_step": 20' in text \
                    and not interrupt.fired:
                interrupt.fired = True
                raise KeyboardInterrupt
            return write(path, text)

        monkeypatch.setattr(fileio, "atomic_write_text", interrupted_write)
        interrupt_fn = None
    else:
        interrupt_fn = interrupt
    with pytest.raises(KeyboardInterrupt):
        finetune(out, interrupt=interrupt_fn, rising=True, train_step=30)
    assert interrupt.fired
    assert tf.train.latest_checkpoint(str(out / "checkpoints")).endswith("ckpt-20")
    assert evaluated_steps(out) == [10]  # step 20 was saved but not recorded
    # A window logged after the checkpoint and a line cut by the interruption.
    with open(out / "train" / "metrics.jsonl", "a") as handle:
        handle.write(json.dumps({"step": 25, "loss": 1.0}) + "\n" + '{"step": 2')
    monkeypatch.undo()

    results = finetune(out, rising=True, train_step=30)
    assert results["global_step"] == 30
    assert evaluated_steps(out) == [10, 20, 30]  # 20 evaluated once, before training on
    assert check_consistent(out) == 30
    steps = [json.loads(line)["step"] for line in
             (out / "train" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [10, 20, 30]
