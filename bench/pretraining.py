"""Pretraining step throughput (sequences/s): forward, MLM+SOP loss, backward, LAMB update.

  python bench/pretraining.py [--preset albert_base_v2] [--seq_length 128] [--batch_size 16]
                              [--steps 5] [--variants float32,float32+xla,mixed_bfloat16,...]

Each variant runs the real training loop (albert_tf.training.Trainer) on a
synthetic in-memory batch: one window of `--steps` steps to trace and warm
up, then a timed window of `--steps` steps. Prints a table and one JSON line
per variant.
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags, logging  # noqa: E402

flags.DEFINE_string("preset", "albert_base_v2", "Model preset.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("batch_size", 16, "Global batch size.")
flags.DEFINE_integer("max_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("steps", 5, "Steps per window (one warm-up window, one timed window).")
flags.DEFINE_string("variants", "float32,float32+xla,mixed_bfloat16,mixed_bfloat16+xla",
                    "Comma list of <precision>[+xla].")
FLAGS = flags.FLAGS


def synthetic_batch(batch, seq, preds, vocab):
    import numpy as np
    rng = np.random.default_rng(0)
    return {
        "input_ids": rng.integers(5, vocab, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": (np.arange(seq) >= seq // 2).astype("int32")[None].repeat(batch, 0),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, seq), (batch, preds)), 1)
        .astype("int32"),
        "masked_lm_ids": rng.integers(5, vocab, (batch, preds)).astype("int32"),
        "masked_lm_weights": np.ones((batch, preds), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


def run_variant(variant):
    import tensorflow as tf
    from albert_tf import AlbertConfig, AlbertPretrainer, optimization, training
    from albert_tf.pretraining import PretrainingTask

    precision, _, xla = variant.partition("+")
    config = AlbertConfig.from_preset(FLAGS.preset)
    strategy = tf.distribute.get_strategy()
    model = AlbertPretrainer(config, dtype=precision)
    model.build()
    optimizer = optimization.create_optimizer(1e-4, 10 ** 6, 0, clip_norm=None)
    task = PretrainingTask()
    steps = FLAGS.steps
    cfg = training.TrainingConfig(output_dir=tempfile.mkdtemp(), num_train_steps=steps,
                                  steps_per_loop=steps, save_checkpoints_steps=10 ** 9,
                                  jit_compile=bool(xla), checkpoint_iterator=False)
    trainer = training.Trainer(strategy, model, optimizer, task, cfg, task.metric_names)
    batch = synthetic_batch(FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions,
                            config.vocab_size)
    data = lambda ctx: tf.data.Dataset.from_tensors(batch).repeat()  # noqa: E731
    start = time.perf_counter()
    trainer.train(data)  # warm-up window: tracing, compilation
    warmup = time.perf_counter() - start
    trainer.config.num_train_steps = 2 * steps
    start = time.perf_counter()
    metrics = trainer.train(data)
    elapsed = time.perf_counter() - start
    return {"variant": variant, "preset": FLAGS.preset, "seq_length": FLAGS.seq_length,
            "batch_size": FLAGS.batch_size, "timed_steps": steps,
            "sequences_per_sec": metrics["sequences_per_sec"],
            "step_seconds": elapsed / steps, "warmup_seconds": warmup,
            "loss": metrics["loss"]}


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    rows = [run_variant(v.strip()) for v in FLAGS.variants.split(",") if v.strip()]
    print(f"\n{FLAGS.preset}, seq {FLAGS.seq_length}, batch {FLAGS.batch_size}, "
          f"{os.cpu_count()} CPU cores")
    print(f"{'variant':24s} {'seq/s':>8s} {'s/step':>8s} {'warm-up s':>10s}")
    for row in rows:
        print(f"{row['variant']:24s} {row['sequences_per_sec']:8.2f} {row['step_seconds']:8.2f} "
              f"{row['warmup_seconds']:10.1f}")
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    app.run(main)
