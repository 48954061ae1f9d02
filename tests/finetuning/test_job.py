"""The shared fine-tuning job: train, evaluate each checkpoint, keep the best, predict."""
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertConfig, checkpoints, finetuning
from albert_tf.modeling.models import classifier_losses

CONFIG = AlbertConfig(vocab_size=30, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=12)


class ToyClassification(finetuning.ExampleMeanObjective):
    """Label 1 = the sequence's tokens come from the low half of the vocabulary."""

    metric_names = ("loss_total", "examples", "correct")

    def per_example(self, model, features, training):
        outputs = model(features, training=training)
        losses = classifier_losses(outputs, features)["per_example_loss"]
        correct = tf.cast(tf.equal(outputs["predictions"], features["label_ids"]), tf.float32)
        return losses, {"correct": tf.reduce_sum(correct)}

    def finalize_extra(self, sums):
        return {"eval_accuracy": sums["correct"] / max(sums["examples"], 1.0)}


def toy_data(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n).astype("int32")
    low, high = rng.integers(5, 17, (n, 12)), rng.integers(17, 30, (n, 12))
    ids = np.where(labels[:, None] == 1, low, high).astype("int32")
    ids[:, 0] = 2
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
            "label_ids": labels}


def run(tmp_path, **changes):
    task = ToyClassification()
    train, dev = toy_data(256, 0), toy_data(64, 1)

    def evaluate_fn(model, step):
        ds = tf.data.Dataset.from_tensor_slices(dev).batch(32)
        sums = {n: 0.0 for n in task.metric_names}
        for batch in ds:
            _, s = task.loss(model, batch, task.normalizers(batch), training=False)
            for k, v in s.items():
                sums[k] += float(v)
        return task.finalize(sums)

    predictions = {}

    def predict_fn(model):
        predictions["probabilities"] = model(dev)["probabilities"].numpy()
        return predictions

    values = dict(output_dir=str(tmp_path), do_train=True, do_eval=True, do_predict=True,
                  train_batch_size=16, learning_rate=1e-3, train_step=60, warmup_step=6,
                  save_checkpoints_steps=20, iterations_per_loop=10, seed=1)
    values.update(changes)
    return finetuning.run_finetuning(
        finetuning.FinetuningOptions(**values),
        lambda dtype: AlbertClassifier(CONFIG, num_labels=2, dtype=dtype), task,
        "eval_accuracy",
        train_dataset_fn=lambda ctx: tf.data.Dataset.from_tensor_slices(train).shuffle(
            256, seed=2).repeat().batch(16),
        evaluate_fn=evaluate_fn, predict_fn=predict_fn)


def test_train_eval_best_predict(tmp_path):
    results = run(tmp_path)
    assert results["global_step"] == 60
    steps = [l for l in (tmp_path / "eval_results.txt").read_text().splitlines()
             if l.startswith("global_step")]
    assert steps == ["global_step = 20", "global_step = 40", "global_step = 60"]
    best = json.loads((tmp_path / "best_eval.json").read_text())
    assert best["eval_accuracy"] == max(results["best"]["eval_accuracy"], 0.0)
    assert best["eval_accuracy"] > 0.8  # the toy task is learnable
    # The training log names the window's metrics without the eval_ prefix.
    logged = [json.loads(line) for line in
              (tmp_path / "train" / "metrics.jsonl").read_text().splitlines()]
    assert logged and all(not key.startswith("eval_") for row in logged for key in row)
    assert {"loss", "accuracy", "step"} <= set(logged[-1])
    trial = (tmp_path / "best_trial.txt").read_text().strip().split(":")
    assert int(trial[0]) == best["global_step"]
    # Prediction used the best weights, which model.ckpt-best holds.
    probs = results["predict"]["probabilities"]
    assert probs.shape == (64, 2)
    reloaded = AlbertClassifier(CONFIG, num_labels=2)
    checkpoints.load_tf1_checkpoint(reloaded, str(tmp_path / "model.ckpt-best"))
    np.testing.assert_allclose(reloaded(toy_data(64, 1))["probabilities"].numpy(), probs,
                               atol=1e-6)


def test_eval_only_uses_latest_checkpoint_and_errors(tmp_path):
    run(tmp_path, do_eval=False, do_predict=False, train_step=20)
    assert (tmp_path / "model.ckpt-best.index").exists()
    results = run(tmp_path, do_train=False, do_predict=False, train_step=20)
    assert results["global_step"] == 20 and "eval_accuracy" in results["eval"]
    with pytest.raises(ValueError, match="at least one of --do_train"):
        run(tmp_path / "x", do_train=False, do_eval=False, do_predict=False)
    with pytest.raises(FileNotFoundError, match="nothing to evaluate"):
        run(tmp_path / "y", do_train=False)


def test_a_family_without_data_prepares_nothing_ahead_and_logs_the_training(caplog):
    """FinetuningJob.prepare builds `data(purpose)` for each --do_*; a subclass that does
    not supply `data` (built before the hook existed) still runs: nothing is built ahead."""
    import logging
    from types import SimpleNamespace

    from albert_tf.training import run_dir

    class Minimal(finetuning.FinetuningJob):
        def identity(self):
            return run_dir.RunIdentity.of(run_dir.FINETUNING, "toy", CONFIG)

        def num_train_examples(self):
            return 256

    options = SimpleNamespace(
        do_train=True, do_eval=True, do_predict=True, train_batch_size=16,
        num_train_epochs=None,
        finetuning_options=lambda examples: SimpleNamespace(train_step=60, warmup_step=6))
    job = Minimal(options)
    assert job.data("train") is None
    with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger="absl"):
        job.prepare()
    assert "toy training: 256 examples, batch 16, 60 steps (6 warmup)" in caplog.messages
