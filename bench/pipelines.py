"""albert_tf.pipeline against transformers' pipeline and a hand-written SavedModel loop.

    .venv/bin/python bench/pipelines.py [--texts 10000] [--batch_size 32] [--size base]
        [--peer_python .venv-oracle/bin/python] [--output bench/results/pipelines.json]

One random ALBERT classifier (ALBERT-base shapes, the real 30k-clean.model) written as a
Hugging Face directory and exported as a SavedModel; `--texts` sentences of the shared
Gutenberg books (5-60 words). Timed, each after a warm-up, in rounds (ours, then the
peer, alternating; the median round counts):

  ours (HF dir)      albert_tf.pipeline("text-classification", model=HF dir)
  ours (SavedModel)  albert_tf.pipeline("text-classification", model=export dir)
  raw SavedModel     the loop a user writes: FullTokenizer ids, [CLS] ids [SEP], padded to
                     the batch's longest, serve_tokens, argmax
  transformers       transformers.pipeline("text-classification", model=HF dir,
                     batch_size=..) on torch (CPU), in --peer_python's venv (make
                     test-oracle builds it)

Prints texts/s, the ratios and the labels' agreement, and the CPU; writes the JSON record.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = pathlib.Path(os.environ.get("ALBERT_TF_SHARED_DATA", REPO.parent / "shared" / "data"))
SIZES = {
    "base": dict(embedding_size=128, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "small": dict(embedding_size=64, hidden_size=256, num_hidden_layers=4,
                  num_attention_heads=4, intermediate_size=1024),
}
PEER = r"""
import json, sys, torch, transformers
model_dir, texts_file, batch_size, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(int(sys.argv[5]))
sys.path.insert(0, sys.argv[6])
from bench.pipelines import timed  # stdlib-only at import: no TensorFlow in this venv
texts = json.load(open(texts_file))
classify = transformers.pipeline("text-classification", model=model_dir, device=-1,
                                 batch_size=batch_size)
times, labels = timed(lambda batch: [o["label"] for o in classify(batch)], texts, rounds)
print(json.dumps({"times": times, "labels": labels, "torch": torch.__version__,
                  "transformers": transformers.__version__}))
"""


def sentences(count: int):
    text = " ".join(p.read_text(encoding="utf-8", errors="replace")
                    for p in sorted((SHARED / "corpus" / "gutenberg").glob("*.txt")))
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        words = sentence.split()
        if 5 <= len(words) <= 60:
            out.append(sentence)
        if len(out) == count:
            return out
    raise SystemExit(f"only {len(out)} sentences of 5-60 words in {SHARED}/corpus/gutenberg")


def build(directory: str, size: str):
    """The HF directory and the SavedModel export of one random classifier."""
    import numpy as np

    from albert_tf import convert
    from albert_tf.checkpoints import hf
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.classification import export as classifier_export
    from albert_tf.tasks.classification.job import ClassificationOptions
    from albert_tf.export import records

    spm = str(SHARED / "spm_official" / "30k-clean.model")
    config = AlbertConfig(vocab_size=30000, max_position_embeddings=512, **SIZES[size])
    model = convert.build_model("classifier", config, 2)
    rng = np.random.default_rng(0)
    for variable in model.weights:
        if "layer_norm" not in variable.path.lower() and "layernorm" not in variable.path.lower():
            variable.assign(rng.normal(0, 0.05, variable.shape).astype(np.float32))
    hf_dir = os.path.join(directory, "hf")
    hf.save_hf_checkpoint(model, hf_dir, ["negative", "positive"], spm_model_file=spm)
    options = ClassificationOptions(task_name="sst-2", spm_model_file=spm, max_seq_length=128,
                                    export_dir=os.path.join(directory, "export"),
                                    albert_config=config, data_dir=directory)

    class Spec:
        labels, is_pair, is_regression = ["negative", "positive"], False, False

    classifier_export.export_classifier(model, options, Spec)
    records.write_export_record(options.export_dir,
                                 classifier_export.classifier_portable_model(
                                     model, options, Spec).metadata, spm_model_file=spm)
    return hf_dir, options.export_dir, spm


def raw_saved_model_loop(export_dir: str, spm: str, batch_size: int):
    """The hand-written loop: returns texts -> labels."""
    import numpy as np
    import tensorflow as tf

    from albert_tf import tokenization

    tokenizer = tokenization.FullTokenizer(spm_model_file=spm)
    serve = tf.saved_model.load(export_dir).signatures["serve_tokens"]

    def run(texts):
        labels = []
        for at in range(0, len(texts), batch_size):
            chunk = texts[at:at + batch_size]
            ids = [[tokenizer.cls_id] + row[:126] + [tokenizer.sep_id] for row in
                   tokenizer.encode_ids([tokenizer.preprocess(t) for t in chunk])]
            width = max(len(row) for row in ids)
            input_ids = np.zeros((len(ids), width), np.int32)
            mask = np.zeros_like(input_ids)
            for i, row in enumerate(ids):
                input_ids[i, :len(row)], mask[i, :len(row)] = row, 1
            out = serve(input_ids=tf.constant(input_ids), input_mask=tf.constant(mask),
                        segment_ids=tf.zeros_like(input_ids))
            labels += ["positive" if p[1] > p[0] else "negative"
                       for p in out["probabilities"].numpy()]
        return labels

    return run


def timed(run, texts, rounds):
    run(texts[:64])
    times, labels = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        labels = run(texts)
        times.append(time.perf_counter() - start)
    return times, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=10000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--size", choices=sorted(SIZES), default="base")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--peer_python", default=str(REPO / ".venv-oracle" / "bin" / "python"))
    parser.add_argument("--output", default=str(REPO / "bench" / "results" / "pipelines.json"))
    args = parser.parse_args()
    from albert_tf import pipeline

    texts = sentences(args.texts)
    work = tempfile.mkdtemp(prefix="bench-pipelines-")
    hf_dir, export_dir, spm = build(work, args.size)
    texts_file = os.path.join(work, "texts.json")
    with open(texts_file, "w") as handle:
        json.dump(texts, handle)
    runs = {
        "ours (HF dir)": pipeline("text-classification", model=hf_dir,
                                  batch_size=args.batch_size, truncation=True),
        "ours (SavedModel)": pipeline("text-classification", model=export_dir,
                                      batch_size=args.batch_size, truncation=True),
        "raw SavedModel loop": raw_saved_model_loop(export_dir, spm, args.batch_size),
    }
    results = {}
    for name, runner in runs.items():
        if name.startswith("ours"):
            def run(batch, runner=runner):
                return [r["label"] for r in runner(batch)]
        else:
            run = runner
        times, labels = timed(run, texts, args.rounds)
        results[name] = {"seconds": statistics.median(times), "labels": labels}
        print(f"{name:22s} {args.texts / results[name]['seconds']:8.1f} texts/s", flush=True)
    if os.path.exists(args.peer_python):
        done = subprocess.run([args.peer_python, "-c", PEER, hf_dir, texts_file,
                               str(args.batch_size), str(args.rounds), str(args.threads),
                               str(REPO)],
                              capture_output=True, text=True)
        if done.returncode == 0:
            peer = json.loads(done.stdout.strip().splitlines()[-1])
            results["transformers"] = {"seconds": statistics.median(peer["times"]),
                                       "labels": peer["labels"],
                                       "versions": {k: peer[k] for k in ("torch",
                                                                         "transformers")}}
            print(f"{'transformers':22s} {args.texts / results['transformers']['seconds']:8.1f}"
                  " texts/s", flush=True)
        else:
            print("transformers: failed:", done.stderr[-2000:])
    write_record(results, args)


def write_record(results, args) -> None:
    """Prints each row's speed against ours (HF dir) and the labels' agreement; writes the
    JSON record (--output)."""
    from albert_tf.kernels import cpu

    reference = results["ours (HF dir)"]
    info = cpu.read_cpu_info()
    record = {"cpu": f"{info.name} ({info.shown_flags()})",
              "texts": args.texts, "batch_size": args.batch_size, "size": args.size,
              "threads": args.threads, "rows": {}}
    for name, result in results.items():
        agree = sum(a == b for a, b in zip(result["labels"], reference["labels"])) / args.texts
        record["rows"][name] = {"texts_per_second": args.texts / result["seconds"],
                                "ours_speedup": result["seconds"] / reference["seconds"],
                                "label_agreement_with_ours": agree,
                                **({"versions": result["versions"]} if "versions" in result
                                   else {})}
        print(f"{name:22s} ours (HF dir) is {result['seconds'] / reference['seconds']:.2f}x "
              f"as fast; labels agree on {100 * agree:.2f}%")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as handle:
        json.dump(record, handle, indent=2)
    print("CPU:", record["cpu"])


if __name__ == "__main__":
    main()
