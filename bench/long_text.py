"""Serving a long text: the classifier's raw-text signature under each --long_text rule, and
the NER raw-text signature (its windows), at growing text lengths.

    .venv/bin/python bench/long_text.py [--words 2500 5000 10000 20000] [--size small]
        [--max_seq_length 512] [--rounds 3] [--skip_ner | --ner_only]
        [--output bench/results/long_text.json]

One random model of `--size` (the real 30k-clean.model vocabulary), texts made of the shared
Gutenberg books' words. Each signature is traced once, warmed up on the shortest text, then
timed over `--rounds` rounds (median) per length. The cost should grow linearly: the last
column, milliseconds per 1,000 words, should stay flat as the text grows.
Prints one table and the CPU; writes the JSON record.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = pathlib.Path(os.environ.get("ALBERT_TF_SHARED_DATA", REPO.parent / "shared" / "data"))
SIZES = {
    "base": dict(embedding_size=128, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "small": dict(embedding_size=64, hidden_size=256, num_hidden_layers=4,
                  num_attention_heads=4, intermediate_size=1024),
}
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def text_of(words: int) -> str:
    books = sorted((SHARED / "corpus" / "gutenberg").glob("*.txt"))
    pool = " ".join(p.read_text(encoding="utf-8", errors="replace") for p in books).split()
    return " ".join(pool[:words])


def median_seconds(call, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def models(args):
    import tensorflow as tf
    from albert_tf import tokenization
    from albert_tf.config import AlbertConfig
    from albert_tf.modeling.models import AlbertClassifier
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    config = AlbertConfig(vocab_size=30000, max_position_embeddings=512, **SIZES[args.size])
    features = {"input_ids": tf.zeros([1, 8], tf.int32), "input_mask": tf.ones([1, 8], tf.int32),
                "segment_ids": tf.zeros([1, 8], tf.int32)}
    tf.keras.utils.set_random_seed(0)
    classifier = AlbertClassifier(config, num_labels=2)
    classifier(features)
    tagger = AlbertTokenClassifier(config, num_labels=len(NER_LABELS))
    tagger(features)
    spm = str(SHARED / "spm_official" / "30k-clean.model")
    return classifier, tagger, tokenization.in_graph_tokenizer(spm_model_file=spm)


def signatures(args, classifier, tagger, tokenizer):
    from albert_tf.tasks.tagging.export import TaggingServingModule

    if not args.ner_only:  # (--ner_only also runs on a tree from before --long_text)
        from albert_tf.tasks.classification.export import ClassifierServingModule
        from albert_tf.tasks.classification.long_text import LongText

    calls = {}
    for mode in () if args.ner_only else ("truncate", "head_tail", "windows"):
        module = ClassifierServingModule(classifier, tokenizer, args.max_seq_length, ["a", "b"],
                                         pair=False, long_text=LongText(mode))
        calls[f"classifier {mode}"] = module.serving_default
    if not args.skip_ner:
        ner = TaggingServingModule(tagger, tokenizer, NER_LABELS, "iob2", args.max_seq_length,
                                   doc_stride=(args.max_seq_length - 2) // 2)
        calls["ner windows"] = ner.serving_default
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, nargs="+", default=[2500, 5000, 10000, 20000])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip_ner", action="store_true")
    parser.add_argument("--ner_only", action="store_true")
    parser.add_argument("--output", default=str(REPO / "bench" / "results" / "long_text.json"))
    args = parser.parse_args()

    import tensorflow as tf
    from albert_tf.kernels import cpu

    calls = signatures(args, *models(args))
    texts = {words: text_of(words) for words in sorted(args.words)}
    rows = []
    for name, call in calls.items():
        argument = "text" if name.startswith("ner") else "text_a"
        warm = tf.constant([texts[min(texts)]])
        call(**{argument: warm})  # trace and warm up
        for words, text in texts.items():
            batch = tf.constant([text])
            seconds = median_seconds(lambda: call(**{argument: batch}), args.rounds)
            rows.append({"signature": name, "words": words, "seconds": seconds,
                         "ms_per_1000_words": 1000 * seconds / words * 1000})
            print(f"{name:22s} {words:7d} words  {seconds:8.3f} s  "
                  f"{rows[-1]['ms_per_1000_words']:8.1f} ms / 1000 words", flush=True)
    info = cpu.read_cpu_info()
    record = {"cpu": f"{info.name} ({info.shown_flags()})", "size": args.size,
              "max_seq_length": args.max_seq_length, "rounds": args.rounds,
              "tensorflow": tf.__version__, "rows": rows}
    print("CPU:", record["cpu"])
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
