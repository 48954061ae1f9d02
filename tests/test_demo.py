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


def test_miniature_pipeline_outputs(mini_run):
    out, done = mini_run
    for name in ("albert_config.json", "demo.model", "model.ckpt-best.index",
                 "saved_model/saved_model.pb", "pretraining.png", "summary.json",
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
    assert set(stages) == {"spm", "data", "pretrain", "export", "plot"}


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
