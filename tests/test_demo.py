"""The main job at miniature size: every stage, the outputs, skipping, and recovery."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT

DEMO = [sys.executable, str(REPO_ROOT / "demo.py"), "--size=mini"]


def run_demo(output_dir, timeout=600):
    done = subprocess.run(DEMO + [f"--output_dir={output_dir}"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def mini_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    return out, run_demo(out)


@pytest.mark.slow  # 20 s: the miniature demo
def test_miniature_pipeline_outputs(mini_run):
    out, done = mini_run
    for name in ("albert_config.json", "demo.model", "model.ckpt-best.index",
                 "saved_model/saved_model.pb", "onnx/model.onnx", "onnx/demo.model",
                 "pretraining.png", "summary.json",
                 "eval_results.txt", "data/train.tfrecord", "data/heldout.tfrecord"):
        assert (out / name).exists(), name
    assert (out / "pretraining.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 20 and summary["best_step"] in (10, 20)
    assert 0.0 <= summary["heldout_masked_lm_accuracy"] <= 1.0
    assert 0.5 <= summary["sentence_order_chance"] <= 1.0
    # The report: top-5 fill-ins for each sentence, and the summary lines.
    assert done.stdout.count("[MASK] #1:") == 4
    assert "masked-LM accuracy" in done.stdout and "sentence-order accuracy" in done.stdout
    stages = json.loads((out / "stages.json").read_text())
    assert set(stages) == {"spm", "data", "pretrain", "export", "plot"}  # steps given: no calibrate
    assert summary["mixed_precision"] in ("float32", "mixed_bfloat16")  # auto, resolved
    # Fill-ins and the accuracy outside the frequent tokens at each evaluation (10, 20).
    snapshots = [json.loads(line) for line in (out / "fillins.jsonl").read_text().splitlines()]
    assert [s["step"] for s in snapshots] == [10, 20]
    for snap in snapshots:
        assert len(snap["fillins"]) == 4 and all(len(v) == 3 for v in snap["fillins"].values())
        assert 0.0 <= snap["rare_masked_lm_accuracy"] <= 1.0
    assert summary["fillins"]["20"] == snapshots[1]["fillins"]
    assert summary["heldout_rare_masked_lm_accuracy"] == next(
        s["rare_masked_lm_accuracy"] for s in snapshots if s["step"] == summary["best_step"])
    assert "Fill-ins as pretraining went on" in done.stdout
    assert done.stdout.count("  step    10 (held-out accuracy") == 4
    assert "outside the 100 most frequent tokens" in done.stdout


@pytest.mark.slow  # reads the miniature demo's run
def test_rare_token_accuracy_leaves_out_the_frequent_targets(mini_run):
    """An oracle scores 1; an oracle right only on the 100 most frequent targets scores 0."""
    import demo

    out, _ = mini_run
    snapshots = demo.Snapshots(demo.DemoConfig.mini(), str(out))
    frequent = set(snapshots.frequent.tolist())
    assert len(frequent) == demo.FREQUENT_TOKENS

    def oracle(only_frequent):
        def model(batch, training=False):  # traced by rare_accuracy: TensorFlow ops only
            ids = batch["masked_lm_ids"]
            if only_frequent:
                is_frequent = tf.reduce_any(ids[..., None] == tf.constant(
                    sorted(frequent), ids.dtype), axis=-1)
                ids = tf.where(is_frequent, ids, tf.zeros_like(ids))
            return {"mlm_logits": tf.one_hot(ids, demo.DemoConfig.mini().vocab_size)}
        return model

    assert snapshots.rare_accuracy(oracle(False)) == 1.0
    assert snapshots.rare_accuracy(oracle(True)) == 0.0


@pytest.mark.slow  # ~30-40 s: keeps the default suite well inside 10 minutes
def test_frequent_token_ids_are_counted_once_per_version_of_the_data(tmp_path, mini_run):
    """Calibration and pretraining both ask for them: the second ask is a cache hit, and
    rewritten data is counted anew."""
    import shutil

    import demo

    shutil.copytree(mini_run[0] / "data", tmp_path / "data")
    records = tmp_path / "data" / "train.tfrecord"
    first = demo.frequent_token_ids(str(records))
    hits = demo._frequent_token_ids.cache_info().hits
    first[:] = -1  # callers get their own copy
    again = demo.frequent_token_ids(str(records))
    assert demo._frequent_token_ids.cache_info().hits == hits + 1
    assert (again >= 0).all() and len(again) == demo.FREQUENT_TOKENS
    shutil.copyfile(tmp_path / "data" / "heldout.tfrecord", records)  # another version
    misses = demo._frequent_token_ids.cache_info().misses
    demo.frequent_token_ids(str(records))
    assert demo._frequent_token_ids.cache_info().misses == misses + 1


@pytest.mark.slow  # ~35 s: a second miniature pretraining; keeps the default suite under 10 minutes
def test_changed_settings_pretrain_afresh_instead_of_resuming_the_old_run(tmp_path, mini_run):
    """A rerun with other settings (here fewer steps; an upgrade that changes the recipe
    alike) must not resume the previous run's checkpoints: its pretraining outputs are
    removed, with a log line, and the new run starts at step 0."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(mini_run[0], out)
    (out / "checkpoints" / "unrelated.txt").write_text("x")  # the whole folder goes
    done = subprocess.run(DEMO + [f"--output_dir={out}", "--num_train_steps=10"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "settings changed since the pretraining in" in done.stderr, done.stderr[-3000:]
    assert "resumed from" not in done.stderr
    assert not (out / "checkpoints" / "unrelated.txt").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 10
    steps = [json.loads(line)["step"] for line in (out / "fillins.jsonl").read_text().splitlines()]
    assert steps and max(steps) <= 10, steps  # the old run's evaluations (step 20) are gone
    assert tf.train.load_checkpoint(str(out / "model.ckpt-best")).get_tensor("global_step") <= 10
    again = subprocess.run(DEMO + [f"--output_dir={out}", "--num_train_steps=10"],
                           capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert "[pretrain] complete, skipped" in again.stderr and "settings changed" not in again.stderr


@pytest.mark.slow  # ~34 s: a calibrated miniature run; keeps the default suite under 10 minutes
def test_calibration_sizes_the_run_and_is_kept(tmp_path, mini_run):
    """Without a step count, a calibration run times this model and picks the steps that
    fit the budget (a multiple of 50, at least 100); a re-run keeps them."""
    import dataclasses
    import shutil

    import demo

    out = tmp_path / "calibrated"
    shutil.copytree(mini_run[0] / "data", out / "data")  # same settings: data is reused
    shutil.copy(mini_run[0] / "demo.model", out / "demo.model")
    shutil.copy(mini_run[0] / "demo.vocab", out / "demo.vocab")
    stages = json.loads((mini_run[0] / "stages.json").read_text())
    (out / "stages.json").write_text(json.dumps({k: stages[k] for k in ("spm", "data")}))
    cfg = dataclasses.replace(demo.DemoConfig.mini(), num_train_steps=0, pretrain_minutes=0.3,
                              evaluations=1)
    summary, first = demo.run(cfg, str(out))
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["sequences_per_sec"] > 0 and calibration["pretrain_minutes"] == 0.3
    assert calibration["evaluation_seconds"] > 0 and calibration["tracing_seconds"] >= 0
    steps = calibration["num_train_steps"]
    assert steps >= 100 and steps % 50 == 0 and summary["steps"] == steps
    fits = int(0.3 * 60 * calibration["sequences_per_sec"] / 8) // 50 * 50
    assert steps <= max(100, fits)  # a margin and the evaluations' time come off the budget
    assert not (out / "calibration_run").exists()
    assert first.ran[:1] == ["calibrate"] and "spm" in first.skipped
    _, second = demo.run(cfg, str(out))
    assert "calibrate" in second.skipped and "pretrain" in second.skipped


@pytest.mark.slow  # 9 s
def test_fill_mask_cli_on_the_demo_directory(mini_run):
    out, _ = mini_run
    done = subprocess.run([sys.executable, "-m", "albert_tf.fill_mask", f"--model_dir={out}",
                           "--top_k=3", "The [MASK] was quiet and [MASK] slept."],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "The [MASK] was quiet and [MASK] slept."
    assert lines[1].startswith("  [MASK] #1: ") and lines[2].startswith("  [MASK] #2: ")
    assert lines[1].count("(") == 3
    bad = subprocess.run([sys.executable, "-m", "albert_tf.fill_mask", f"--model_dir={out}",
                          "no mask here"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert bad.returncode != 0 and "no [MASK] in" in bad.stderr


@pytest.mark.slow  # 5 s
def test_saved_model_matches_keras_model(mini_run):
    """The exported `mlm` signature, loaded with plain TensorFlow, equals the Keras model."""
    out, _ = mini_run
    from albert_tf import AlbertPretrainer, AlbertConfig, checkpoints
    model = AlbertPretrainer(AlbertConfig.from_json_file(str(out / "albert_config.json")))
    checkpoints.load_tf1_checkpoint(model, str(out / "model.ckpt-best"))
    ids = np.array([[2, 20, 4, 31, 3, 0], [2, 7, 8, 4, 9, 3]], np.int32)
    mask = (ids > 0).astype(np.int32)
    segments = np.zeros_like(ids)
    positions = np.array([[2], [3]], np.int32)
    want = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                  "masked_lm_positions": positions})
    script = (
        "import sys, json, numpy as np, tensorflow as tf\n"
        f"m = tf.saved_model.load({str(out / 'saved_model')!r})\n"
        f"ids = np.array({ids.tolist()}, np.int32)\n"
        "out = m.signatures['mlm'](input_ids=ids, input_mask=(ids > 0).astype(np.int32),"
        " segment_ids=np.zeros_like(ids),"
        f" mlm_positions=np.array({positions.tolist()}, np.int32))\n"
        "sop = m.signatures['sop'](input_ids=ids, input_mask=(ids > 0).astype(np.int32),"
        " segment_ids=np.zeros_like(ids))\n"
        "info = m.signatures['tokenization_info']()\n"
        "print(json.dumps({'mlm': out['mlm_logits'].numpy().tolist(),"
        " 'pooled': out['pooled_output'].numpy().tolist(),"
        " 'sop': sop['sop_log_probs'].numpy().tolist(),"
        " 'vocab': info['vocab_file'].numpy().decode()}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(got["mlm"], want["mlm_logits"].numpy(), atol=1e-5)
    np.testing.assert_allclose(got["pooled"], want["pooled_output"].numpy(), atol=1e-5)
    np.testing.assert_allclose(np.exp(got["sop"]).sum(-1), [1.0, 1.0], atol=1e-5)
    assert got["vocab"].endswith("demo.model") and os.path.exists(got["vocab"])
    # onnx/model.onnx in ONNX Runtime: the same logits.
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(str(out / "onnx" / "model.onnx"))
    mlm, = session.run(["mlm_logits"], {"input_ids": ids, "input_mask": mask,
                                        "segment_ids": segments, "mlm_positions": positions})
    np.testing.assert_allclose(mlm, want["mlm_logits"].numpy(), atol=1e-5)


@pytest.mark.slow
def test_rerun_skips_completed_stages_and_recovers_an_interrupted_one(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(DEMO + [f"--output_dir={out}"], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    # Half-way through pretraining: wait for the checkpoint state file (written after the
    # checkpoint's data and index, by rename) to name ckpt-10; killing between the index
    # and the state update would leave ckpt-10 unlisted, and the rerun would start over.
    state = out / "checkpoints" / "checkpoint"
    while not (state.exists() and "ckpt-10" in state.read_text()):
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stages = json.loads((out / "stages.json").read_text())
    assert "spm" in stages and "data" in stages and "pretrain" not in stages
    second = run_demo(out)
    assert "[spm] complete, skipped" in second.stderr
    assert "[data] complete, skipped" in second.stderr
    assert "[pretrain] running" in second.stderr, second.stderr[-3000:]
    assert "resumed from" in second.stderr, second.stderr[-3000:]
    third = run_demo(out)
    for stage in ("spm", "data", "pretrain", "export", "plot"):
        assert f"[{stage}] complete, skipped" in third.stderr, stage
    assert third.stdout.count("[MASK] #1:") == 4
    reader = tf.train.load_checkpoint(str(out / "model.ckpt-best"))
    assert reader.get_tensor("global_step") in (10, 20)


def test_auto_precision_is_measured_once_per_output_directory(tmp_path, monkeypatch):
    """auto's GEMM timing can flip near its threshold on a busy machine: a rerun in the same
    output directory keeps the first choice instead of becoming a run of other settings."""
    import demo
    from albert_tf.kernels import precision

    choices = iter(["mixed_bfloat16", "float32"])
    monkeypatch.setattr(precision, "resolve", lambda requested, strategy=None: next(choices))
    assert demo.resolved_precision("auto", str(tmp_path)) == "mixed_bfloat16"
    assert demo.resolved_precision("auto", str(tmp_path)) == "mixed_bfloat16"
    assert json.loads((tmp_path / "precision.json").read_text()) == {"auto": "mixed_bfloat16"}
    assert demo.resolved_precision("auto", str(tmp_path / "other")) == "float32"


def test_a_slow_machine_gets_the_short_budget_recipe(tmp_path, monkeypatch):
    """--recipe=auto: where calibration fits fewer than SHORT_RUN_STEPS standard steps,
    the run writes sequences of 32 and calibrates again on them, that second data and
    calibration counted against the budget; a rerun skips both and trains the same steps.
    The stages are stand-ins that record what they were asked (the real ones are timed
    by the slow calibration test and `make demo`)."""
    import demo
    calls = []
    standard_steps = {}

    def touch(*paths):
        for path in paths:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write("x")

    def calibrate(cfg, out, path, spent_since=None):
        steps = standard_steps[out] if cfg.recipe == "standard" else 3250
        with open(path, "w") as handle:
            json.dump({"num_train_steps": steps}, handle)
        calls.append(("calibrate", cfg.recipe, os.path.basename(path), spent_since is not None))

    monkeypatch.setattr(demo, "resolved_precision", lambda requested, out: "float32")
    monkeypatch.setattr(demo, "stage_spm", lambda cfg, out: touch(f"{out}/demo.model"))
    monkeypatch.setattr(demo, "stage_data", lambda cfg, out: (
        touch(cfg.data_file(out, "train"), cfg.data_file(out, "heldout")),
        calls.append(("data", cfg.recipe, cfg.max_seq_length, cfg.data_dir))))
    monkeypatch.setattr(demo, "stage_calibrate", calibrate)
    monkeypatch.setattr(demo, "stage_pretrain", lambda cfg, out: (
        touch(f"{out}/model.ckpt-best.index", f"{out}/best_eval.json"),
        calls.append(("pretrain", cfg.recipe, cfg.max_seq_length,
                      cfg.max_predictions_per_seq, cfg.num_train_steps))))
    monkeypatch.setattr(demo, "stage_export", lambda cfg, out: touch(
        f"{out}/saved_model/saved_model.pb", f"{out}/onnx/model.onnx",
        f"{out}/tflite/model.tflite"))
    monkeypatch.setattr(demo, "stage_plot", lambda cfg, out: touch(f"{out}/pretraining.png"))
    monkeypatch.setattr(demo, "report", lambda cfg, out, elapsed, seconds: {})

    slow, fast, forced = (str(tmp_path / name) for name in ("slow", "fast", "forced"))
    standard_steps.update({slow: 1850, fast: 5000})
    demo.run(demo.DemoConfig(), slow, "auto")
    assert calls == [("data", "standard", 64, "data"),
                     ("calibrate", "standard", "calibration.json", False),
                     ("data", "short", 32, "data_s32"),
                     ("calibrate", "short", "calibration_short.json", True),
                     ("pretrain", "short", 32, 5, 3250)]
    calls.clear()
    _, again = demo.run(demo.DemoConfig(), slow, "auto")
    assert calls == [] and set(again.skipped) == {
        "spm", "data", "calibrate", "data (short)", "calibrate (short)", "pretrain", "export",
        "plot"}
    demo.run(demo.DemoConfig(), fast, "auto")
    assert calls[-1] == ("pretrain", "standard", 64, 10, 5000) and len(calls) == 3
    calls.clear()
    demo.run(demo.DemoConfig(), forced, "short")
    assert calls == [("data", "short", 32, "data_s32"),
                     ("calibrate", "short", "calibration_short.json", False),
                     ("pretrain", "short", 32, 5, 3250)]


def test_recipe_flag_mistakes_are_one_line():
    for flags, message in ((["--size=mini", "--recipe=short"], "--recipe=short applies to "
                                                              "--size=full"),
                           (["--recipe=fast"], "value should be one of <auto|standard|short>")):
        done = subprocess.run([sys.executable, str(REPO_ROOT / "demo.py"), *flags],
                              capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
        assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
