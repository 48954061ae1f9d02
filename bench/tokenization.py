"""Tokenization throughput (lines/s): Python vs in-graph, and raw-text serving of a GLUE model.

  python bench/tokenization.py [--spm_model_file ../shared/data/spm/albert_style_pd8k.model]
                               [--corpus_dir ../shared/data/corpus] [--batch_size 256]
                               [--preset tiny|albert_base_v2] [--max_seq_length 128]

Measures on every line of the corpus files (after a warm-up pass):
  python     SentencePieceTokenizer: preprocess_text + encode_ids (1 thread)
  in_graph   InGraphTokenizer (tensorflow-text) in a tf.function, batches of --batch_size
  serve      raw text -> ids -> packed features -> AlbertClassifier probabilities through
             the exported SavedModel's serving_default signature (first 2048 lines)
and checks that the python and in-graph ids are identical. Prints one JSON line per row.
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

_SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                       "shared", "data")
flags.DEFINE_string("spm_model_file", os.path.join(_SHARED, "spm", "albert_style_pd8k.model"),
                    "SentencePiece model.")
flags.DEFINE_string("corpus_dir", os.path.join(_SHARED, "corpus"), "Text files (*.txt, "
                    "recursively).")
flags.DEFINE_integer("batch_size", 256, "Lines per in-graph / serving call.")
flags.DEFINE_enum("preset", "tiny", ["tiny", "albert_base_v2"], "Model served in `serve`.")
flags.DEFINE_integer("max_seq_length", 128, "Packed length in `serve`.")
FLAGS = flags.FLAGS


def read_lines(corpus_dir):
    lines = []
    for root, _, files in sorted(os.walk(corpus_dir)):
        for name in sorted(files):
            if name.endswith(".txt"):
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    lines += [line for line in f.read().splitlines() if line.strip()]
    return lines


def timed(fn, repeats=2):
    fn()  # warm-up (tracing)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv):
    del argv
    import tensorflow as tf

    from albert_tf import AlbertClassifier, AlbertConfig, export, tokenization
    from albert_tf.tasks.classification.export import ClassifierServingModule

    lines = read_lines(FLAGS.corpus_dir)
    python = tokenization.SentencePieceTokenizer(FLAGS.spm_model_file, do_lower_case=True)
    graph = tokenization.InGraphTokenizer(FLAGS.spm_model_file, do_lower_case=True)
    encode = tf.function(graph.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    batches = [tf.constant(lines[i:i + FLAGS.batch_size])
               for i in range(0, len(lines), FLAGS.batch_size)]

    results = {}
    results["python"] = timed(lambda: python.encode_ids([python.preprocess(t) for t in lines]))
    results["in_graph"] = timed(lambda: [encode(b) for b in batches])
    want = python.encode_ids([python.preprocess(t) for t in lines])
    got = [row for b in batches for row in encode(b).to_list()]
    mismatches = sum(a != b for a, b in zip(want, got))

    if FLAGS.preset == "tiny":
        config = AlbertConfig(vocab_size=python.vocab_size, embedding_size=16, hidden_size=32,
                              num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                              max_position_embeddings=max(FLAGS.max_seq_length, 64))
    else:
        config = AlbertConfig.from_preset(FLAGS.preset).replace(vocab_size=python.vocab_size)
    model = AlbertClassifier(config, num_labels=2)
    model.build()
    module = ClassifierServingModule(model, graph, FLAGS.max_seq_length, ["0", "1"], pair=False)
    served_lines = lines[:2048]
    with tempfile.TemporaryDirectory() as tmp:
        export.save_serving_model(os.path.join(tmp, "sm"), module, module.signatures())
        serve = tf.saved_model.load(os.path.join(tmp, "sm")).signatures["serving_default"]
        serve_batches = [tf.constant(served_lines[i:i + FLAGS.batch_size])
                         for i in range(0, len(served_lines), FLAGS.batch_size)]
        results["serve"] = timed(lambda: [serve(text_a=b) for b in serve_batches], repeats=1)

    counts = {"python": len(lines), "in_graph": len(lines), "serve": len(served_lines)}
    print(f"{'path':10s} {'lines':>8s} {'seconds':>8s} {'lines/s':>10s}")
    for name, seconds in results.items():
        print(f"{name:10s} {counts[name]:8d} {seconds:8.2f} {counts[name] / seconds:10.0f}")
    for name, seconds in results.items():
        print(json.dumps({"path": name, "lines": counts[name], "seconds": round(seconds, 3),
                          "lines_per_s": round(counts[name] / seconds),
                          "batch_size": FLAGS.batch_size,
                          "preset": FLAGS.preset if name == "serve" else None,
                          "id_mismatches": mismatches if name == "in_graph" else None}))


if __name__ == "__main__":
    app.run(main)
