"""What the early-exit loop costs by itself: ALBERT-base (random weights) exported to ONNX
with no early exit and with a patience no row reaches (every row runs all 12 layers inside
the loop), run on the same rows at batch 1 and 32.

    .venv/bin/python bench/early_exit_overhead.py [--seq 32] [--layers 12] [--hidden 768]

The ratio is the loop's price where no row exits: the per-layer exit head, the decision,
and the loop's own bookkeeping (gathers of the still-running rows, scatters of the exited
ones). Early exit pays off where rows exit enough layers earlier to cover it.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    import numpy as np
    import onnxruntime

    from albert_tf import AlbertClassifier
    from albert_tf.config import AlbertConfig
    from albert_tf.export import onnx as onnx_export, saved_model
    from albert_tf.kernels import cpu
    from albert_tf.modeling.early_exit import EarlyExit

    config = AlbertConfig(vocab_size=30000, embedding_size=128, hidden_size=args.hidden,
                          num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                          intermediate_size=4 * args.hidden, max_position_embeddings=512)
    model = AlbertClassifier(config, num_labels=2, exit_heads="shared")
    model.build()
    rng = np.random.default_rng(0)
    figures = {}
    for name, rule in (("no early exit", None),
                       ("patience > L (loop, no exit)", EarlyExit(patience=args.layers + 1))):
        model.early_exit = rule
        names = ["logits"] + (["exit_layer"] if rule else [])
        fn = onnx_export.model_function(model, names)
        path = os.path.join(tempfile.mkdtemp(), "model.onnx")
        onnx_export.write_onnx(fn, saved_model.token_input_signature(), path)
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        for batch in (1, 32):
            feed = {"input_ids": rng.integers(5, 30000, (batch, args.seq)).astype(np.int32),
                    "input_mask": np.ones((batch, args.seq), np.int32),
                    "segment_ids": np.zeros((batch, args.seq), np.int32)}
            session.run(None, feed)
            times = []
            for _ in range(args.runs if batch == 1 else max(args.runs // 10, 3)):
                start = time.perf_counter()
                session.run(None, feed)
                times.append(time.perf_counter() - start)
            figures[(name, batch)] = 1000 * statistics.median(times)
    print(f"CPU: {cpu.read_cpu_info().name}; L={args.layers}, H={args.hidden}, "
          f"S={args.seq}, ONNX Runtime, median ms per call")
    for batch in (1, 32):
        plain = figures[("no early exit", batch)]
        loop = figures[("patience > L (loop, no exit)", batch)]
        print(f"batch {batch}: no early exit {plain:.2f} ms, the loop {loop:.2f} ms "
              f"({loop / plain:.3f}x)")


if __name__ == "__main__":
    from albert_tf.kernels import onednn

    onednn.configure()
    main()
