"""Keras `fit` against the CLI's compiled Trainer (and keras-hub's `fit`), one classifier
training step at a time, paired on this machine.

    .venv-bench/bin/python bench/keras_fit.py [--model base|tiny] [--seq 128] [--batch 16]
        [--units 6] [--output FILE]

Sides (one process, one model each, the same shapes and a synthetic batch):
  trainer     run_classifier.py's path: `training.Trainer`'s compiled step
              (ClassificationObjective, the original's AdamW, gradients clipped to 1.0)
  keras_step  AlbertTextClassifier.compile() defaults, `train_on_batch` on token features:
              the compiled Keras step alone
  keras_fit   the same model's `fit` on raw text (the preprocessor in tf.data), each step
              timed from its start to its end by a callback
  keras_hub   keras-hub's AlbertTextClassifier (when installed), `train_on_batch` on token
              features, its default compile (Adam 1e-5; no clipping, no weight decay)
One `fit` runs; after each of its steps one unit of every other side runs (in alternating
order), so that each side's unit has the others next to it; the medians and the medians of
the per-round ratios are printed with the CPU's name. All sides run float32,
dropout 0.1 on the pooled output (the classifiers' default), no XLA.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig, training  # noqa: E402
from albert_tf.keras_tasks import AlbertPreprocessor, AlbertTextClassifier  # noqa: E402
from albert_tf.modeling.models import AlbertClassifier  # noqa: E402
from albert_tf.training import optimization  # noqa: E402

SPM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                   "shared", "data", "spm_official", "30k-clean.model")
WARMUP = 2  # fit steps before the timing starts (tracing, the pipeline's first batches)
WORDS = ("the film was a gripping thriller with sharp dialogue and a plot that never lets "
         "go of you until the very last scene in the rain").split()


def batch(config: AlbertConfig, seq: int, size: int, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, size=(size, seq)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 2, 3
    return {"input_ids": ids, "input_mask": np.ones_like(ids),
            "segment_ids": np.zeros_like(ids),
            "label_ids": rng.integers(0, 2, size=(size,)).astype(np.int32)}


def texts(seq: int, size: int) -> List[str]:
    """Texts that fill `seq` tokens (about one SentencePiece piece per word here)."""
    rng = np.random.default_rng(1)
    return [" ".join(rng.choice(WORDS, size=seq)) for _ in range(size)]


def trainer_side(config, features) -> Callable[[], None]:
    from albert_tf.tasks.classification.job import ClassificationObjective

    model = AlbertClassifier(config, num_labels=2)
    model.build()
    optimizer = optimization.create_optimizer(5e-5, 10 ** 6, 0, "adamw", clip_norm=None)
    objective = ClassificationObjective(regression=False)
    cfg = training.TrainingConfig(output_dir=tempfile.mkdtemp(prefix="albert_bench_"),
                                  num_train_steps=1, steps_per_loop=1,
                                  save_checkpoints_steps=10 ** 9, checkpoint_iterator=False)
    trainer = training.Trainer(tf.distribute.get_strategy(), model, optimizer, objective, cfg,
                               objective.metric_names)
    iterator = iter(tf.data.Dataset.from_tensors(features).repeat().prefetch(2))
    train = trainer.build_train_function()
    one = tf.constant(1)
    return lambda: train(iterator, one)["loss_total"].numpy()


def keras_model(config, seq: int) -> AlbertTextClassifier:
    network = AlbertClassifier(config, num_labels=2)
    network.build()
    model = AlbertTextClassifier(network, AlbertPreprocessor(SPM, sequence_length=seq))
    model.compile(num_train_steps=10 ** 6)
    return model


def keras_step_side(config, features, seq: int) -> Callable[[], None]:
    model = keras_model(config, seq)
    tokens = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
    return lambda: model.train_on_batch(tokens, features["label_ids"])


def run_fit_interleaved(model, raw: List[str], labels, sides: Dict[str, Callable[[], None]],
                        units: int) -> Dict[str, List[float]]:
    """One `fit` on raw text of WARMUP + units steps; after each of its steps past the
    warm-up (timed from the step's start to its end, the data pipeline running beside it),
    one unit of every other side, in alternating order. Returns seconds per step by side."""
    import keras

    times: Dict[str, List[float]] = {"keras_fit": [], **{name: [] for name in sides}}
    names = list(sides)

    class Interleave(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            elapsed = time.perf_counter() - self.start
            if batch < WARMUP:
                return
            times["keras_fit"].append(elapsed)
            for name in names if batch % 2 else names[::-1]:
                times[name].append(timed(sides[name]))

    data = tf.data.Dataset.from_tensor_slices((raw, labels)).repeat().batch(len(labels))
    model.fit(data, steps_per_epoch=WARMUP + units, epochs=1, verbose=0,
              callbacks=[Interleave()])
    return times


def keras_hub_side(config, features):
    try:
        import keras_hub
    except ImportError:
        return None
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, embedding_dim=config.embedding_size,
        hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
        max_sequence_length=config.max_position_embeddings)
    model = keras_hub.models.AlbertTextClassifier(backbone, num_classes=2, preprocessor=None)
    model.compile()
    inputs = {"token_ids": features["input_ids"], "segment_ids": features["segment_ids"],
              "padding_mask": features["input_mask"]}
    return lambda: model.train_on_batch(inputs, features["label_ids"])


def timed(call: Callable[[], None]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("base", "tiny"), default="base")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--units", type=int, default=6, help="rounds of one unit per side")
    parser.add_argument("--output", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    import run as bench  # bench/run.py: the model shapes and the machine's description

    # The official vocabulary's size: fit's raw text is tokenized with 30k-clean.model.
    config = AlbertConfig(**dict(bench.MODELS[args.model], vocab_size=30000,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    features = batch(config, args.seq, args.batch)
    sides = {"trainer": trainer_side(config, features),
             "keras_step": keras_step_side(config, features, args.seq)}
    hub = keras_hub_side(config, features)
    if hub is not None:
        sides["keras_hub"] = hub
    for call in sides.values():  # compile and warm up
        call()
        call()
    times = run_fit_interleaved(keras_model(config, args.seq), texts(args.seq, args.batch),
                                features["label_ids"], sides, args.units)
    names = list(times)
    info = bench.machine_info()
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratios = {name: statistics.median(t / r for t, r in zip(times["trainer"], values))
              for name, values in times.items()}
    print(f"CPU {info['cpu']} ({info['cpus']} cores), {args.model} s{args.seq} "
          f"b{args.batch} fp32, {args.units} rounds")
    for name in names:
        print(f"  {name:<11} {medians[name]:8.3f} s/step   steps/s vs trainer "
              f"{ratios[name]:.3f}x")
    if args.output:
        with open(args.output, "w") as handle:
            json.dump({"machine": info, "seconds_per_step": times, "median": medians,
                       "speed_vs_trainer": ratios, "args": vars(args)}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
