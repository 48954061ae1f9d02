"""Encoding sentences: albert-tf's sentence-embedding exports against sentence-transformers.

    .venv/bin/python bench/embeddings.py [--texts 10000] [--batch_size 32] [--size small]
        [--rounds 2] [--peer_python .venv-oracle/bin/python]
        [--output bench/results/embeddings.json]

One random AlbertSentenceEncoder of `--size` (mean pooling, normalized; the real
30k-clean.model), written as albert-tf exports it (SavedModel, model.onnx) and as a
sentence-transformers directory; `--texts` sentences of the shared Gutenberg books (5-60
words, cut at 128 tokens). Timed after a warm-up, `--rounds` rounds each (the median):

  SavedModel, input order   serving_default(text) on batches of --batch_size raw strings,
                    in the texts' order
  SavedModel, sorted        the same on batches of texts of similar length (longest first,
                    as sentence-transformers' encode batches them)
  pipeline (SavedModel), pipeline (ONNX)   albert_tf.pipeline("sentence-embedding",
                    model=export dir or model.onnx), which batches by length too
  sentence-transformers  SentenceTransformer(dir).encode(texts, batch_size) on torch (CPU),
                    in --peer_python's venv (make test-oracle builds it)

Prints texts/s, the ratios, the largest difference between the vectors, and the CPU;
writes the JSON record.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.pipelines import SHARED, SIZES, sentences, timed  # noqa: E402  (stdlib-only at import)

PEER = r"""
import json, sys, torch, sentence_transformers
directory, texts_file, batch_size, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(int(sys.argv[5]))
sys.path.insert(0, sys.argv[6])
from bench.pipelines import timed  # stdlib-only at import: no TensorFlow in this venv
texts = json.load(open(texts_file))
model = sentence_transformers.SentenceTransformer(directory, device="cpu")
times, vectors = timed(lambda batch: model.encode(batch, batch_size=batch_size), texts, rounds)
json.dump(vectors.tolist(), open(texts_file + ".vectors.json", "w"))
print(json.dumps({"times": times, "torch": torch.__version__,
                  "sentence_transformers": sentence_transformers.__version__}))
"""


def build(directory: str, size: str, max_seq_length: int):
    """The model written three ways: export/ (SavedModel, model.onnx) and st/."""
    import numpy as np
    import tensorflow as tf

    from albert_tf.checkpoints import sentence_transformers
    from albert_tf.config import AlbertConfig
    from albert_tf.export import portable
    from albert_tf.modeling.sentence_encoder import AlbertSentenceEncoder
    from albert_tf.tasks.embeddings import export
    from albert_tf.tokenization import in_graph_tokenizer

    spm = str(SHARED / "spm_official" / "30k-clean.model")
    config = AlbertConfig(vocab_size=30000, max_position_embeddings=512, **SIZES[size])
    tf.keras.utils.set_random_seed(0)
    model = AlbertSentenceEncoder(config, ["mean"], normalize=True)
    model.build()
    rng = np.random.default_rng(0)
    for variable in model.weights:
        if "layer_norm" not in variable.path.lower():
            variable.assign(rng.normal(0, 0.05, variable.shape).astype(np.float32))
    export_dir = os.path.join(directory, "export")
    module = export.EmbeddingServingModule(model, in_graph_tokenizer(spm_model_file=spm),
                                           max_seq_length)
    from albert_tf.export import saved_model
    saved_model.save_serving_model(export_dir, module, module.signatures())
    options = argparse.Namespace(task_name="bench", max_seq_length=max_seq_length,
                                 do_lower_case=True)
    spec = export.portable_model(model, options)
    portable.export_model_dir(export_dir, spec, ["onnx"], spm_model_file=spm)
    from albert_tf.export import records
    records.write_export_record(export_dir, spec.metadata, spm_model_file=spm)
    st_dir = os.path.join(directory, "st")
    sentence_transformers.save_sentence_transformers_dir(model, st_dir, ["mean"], True,
                                                         max_seq_length, spm_model_file=spm)
    return export_dir, st_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=10000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--peer_python", default=str(REPO / ".venv-oracle" / "bin" / "python"))
    parser.add_argument("--output", default=str(REPO / "bench" / "results" / "embeddings.json"))
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    from albert_tf import pipeline
    from albert_tf.kernels import cpu

    texts = sentences(args.texts)
    work = tempfile.mkdtemp(prefix="bench_embeddings_")
    export_dir, st_dir = build(work, args.size, args.max_seq_length)
    signature = tf.saved_model.load(export_dir).signatures["serving_default"]

    def saved_model_run(batch):
        return np.concatenate([signature(text=tf.constant(batch[i:i + args.batch_size]))
                               ["embedding"].numpy()
                               for i in range(0, len(batch), args.batch_size)])

    def sorted_run(batch):
        order = sorted(range(len(batch)), key=lambda i: -len(batch[i]))  # characters
        vectors = saved_model_run([batch[i] for i in order])
        out = np.empty_like(vectors)
        out[order] = vectors
        return out

    runs = [("SavedModel, input order", saved_model_run), ("SavedModel, sorted", sorted_run)]
    for name, model in (("pipeline (SavedModel)", export_dir),
                        ("pipeline (ONNX)", os.path.join(export_dir, "model.onnx"))):
        runs.append((name, pipeline("sentence-embedding", model=model,
                                    batch_size=args.batch_size)))
    results = {}
    for name, run in runs:
        times, vectors = timed(run, texts, args.rounds)
        results[name] = {"seconds": statistics.median(times), "vectors": vectors}
    texts_file = os.path.join(work, "texts.json")
    with open(texts_file, "w") as handle:
        json.dump(texts, handle)
    done = subprocess.run([args.peer_python, "-c", PEER, st_dir, texts_file,
                           str(args.batch_size), str(args.rounds), str(args.threads),
                           str(REPO)],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    peer = json.loads(done.stdout.strip().splitlines()[-1])
    with open(texts_file + ".vectors.json") as handle:
        peer_vectors = np.array(json.load(handle), np.float32)
    results["sentence-transformers"] = {"seconds": statistics.median(peer["times"]),
                                        "vectors": peer_vectors}
    info = cpu.read_cpu_info()
    record = {"cpu": f"{info.name} ({info.shown_flags()})", "size": args.size,
              "texts": len(texts), "batch_size": args.batch_size, "rounds": args.rounds,
              "threads": args.threads, "peer": {k: v for k, v in peer.items() if k != "times"},
              "rows": {}}
    peer_rate = len(texts) / results["sentence-transformers"]["seconds"]
    for name, result in results.items():
        rate = len(texts) / result["seconds"]
        per_text = np.abs(result["vectors"] - peer_vectors).max(axis=1)
        # Texts with a user-defined piece glued to a word ("jean-luc") tokenize differently
        # in transformers' fast tokenizer (docs/pipelines.md): their vectors differ.
        within = float(np.mean(per_text <= 1e-4))
        record["rows"][name] = {"texts_per_second": rate, "vs_peer": rate / peer_rate,
                                "texts_within_1e-4_of_peer": within}
        print(f"{name:24s} {rate:8.1f} texts/s  {rate / peer_rate:5.2f}x sentence-transformers"
              f"  {100 * within:5.1f}% of texts within 1e-4", flush=True)
    print("CPU:", record["cpu"])
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
