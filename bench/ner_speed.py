"""Token classification's cost against sentence classification's, and the CRF's.

    python bench/ner_speed.py [--preset albert_base_v2] [--seq_length 128]
                              [--train_batch 32] [--infer_batch 32] [--rounds 3]

Times, at one shape and in one process, interleaved over `--rounds` rounds (median):
  * a training step (forward, backward, AdamW update, one tf.function) of
    AlbertClassifier (run_classifier.py's model) and of AlbertTokenClassifier with the
    softmax head and with the CRF (run_ner.py's), every word of every row labelled;
  * a batch of inference (`predictions`) of AlbertTokenClassifier: softmax (argmax),
    softmax under the IOB2 constraints (Viterbi), and the CRF (constrained Viterbi).
Prints one table, the CPU named, and one JSON line. The targets (issue): NER training
within 10% of the classifier's step, CRF decoding at most 5% on batch-32 inference.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def batch(config, size: int, seq_length: int, rng, labelled: str):
    """Synthetic features: every position a word start, all tokens real."""
    import numpy as np

    ids = rng.integers(5, config.vocab_size, (size, seq_length)).astype(np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                "segment_ids": np.zeros_like(ids)}
    if labelled == "sentence":
        features["label_ids"] = rng.integers(0, 2, (size,)).astype(np.int32)
    elif labelled == "tokens":
        features["label_ids"] = rng.integers(0, len(LABELS), (size, seq_length)).astype(np.int32)
    return features


def train_step(model, loss_of):
    import keras
    import tensorflow as tf

    optimizer = keras.optimizers.AdamW(1e-5)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            loss = loss_of(model(features, training=True), features)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients([(g, v) for g, v in zip(grads, model.trainable_variables)
                                   if g is not None])
        return loss
    return step


def timed(fn, features, repeats: int) -> float:
    """Seconds per call, after one warm-up call."""
    fn(features)
    start = time.perf_counter()
    for _ in range(repeats):
        result = fn(features)
    getattr(result, "numpy", lambda: None)()
    return (time.perf_counter() - start) / repeats


def build(args):
    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertClassifier, AlbertConfig
    from albert_tf.modeling.models import classifier_losses
    from albert_tf.modeling.token_classifier import (AlbertTokenClassifier,
                                                     token_classifier_losses)
    from albert_tf.tasks.tagging import schemes

    config = AlbertConfig.from_preset(args.preset)
    keras.utils.set_random_seed(0)
    allowed = schemes.allowed_transitions(LABELS, "iob2")
    models = {"classifier": AlbertClassifier(config, num_labels=2),
              "ner softmax": AlbertTokenClassifier(config, len(LABELS)),
              "ner softmax constrained": AlbertTokenClassifier(config, len(LABELS),
                                                               allowed=allowed),
              "ner crf": AlbertTokenClassifier(config, len(LABELS), use_crf=True,
                                               allowed=allowed)}
    for model in models.values():
        model.build()
    rng = np.random.default_rng(0)
    sentence = batch(config, args.train_batch, args.seq_length, rng, "sentence")
    tokens = batch(config, args.train_batch, args.seq_length, rng, "tokens")
    infer = batch(config, args.infer_batch, args.seq_length, rng, "none")
    trains = {
        "train classifier": (train_step(models["classifier"],
                                        lambda o, f: classifier_losses(o, f)["loss"]), sentence),
        "train ner softmax": (train_step(models["ner softmax"],
                                         lambda o, f: token_classifier_losses(o)["loss"]), tokens),
        "train ner crf": (train_step(models["ner crf"],
                                     lambda o, f: token_classifier_losses(o)["loss"]), tokens)}
    infers = {f"infer {name}": (tf.function(
        lambda f, m=models[name]: m(f, training=False)["predictions"]), infer)
        for name in ("ner softmax", "ner softmax constrained", "ner crf")}
    return dict(trains, **infers)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="albert_base_v2")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--train_batch", type=int, default=32)
    parser.add_argument("--infer_batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from albert_tf.kernels import precision

    cases = build(args)
    seconds = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (fn, features) in cases.items():
            seconds[name].append(timed(fn, features, args.repeats))
    median = {name: statistics.median(values) for name, values in seconds.items()}
    cpu = precision.read_cpu_info().name
    print(f"{args.preset}, sequence {args.seq_length}, train batch {args.train_batch}, "
          f"inference batch {args.infer_batch}, {cpu}")
    print("| case | seconds | ratio |\n|---|---:|---:|")
    bases = {"train": median["train classifier"], "infer": median["infer ner softmax"]}
    for name, value in median.items():
        base = bases[name.split(" ")[0]]
        print(f"| {name} | {value:.4f} | {value / base:.3f} |")
    print(json.dumps({"cpu": cpu, "args": vars(args), "median_seconds": median}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
