"""The main job, as far as it exists today: build ALBERT and run it on sample input.

What this does (honestly): builds the published ALBERT-base v2 architecture
with RANDOM weights (no pretrained weights exist on this machine), checks its
exact parameter count, runs the encoder and the pretraining heads on a batch
of token ids, and prints output shapes and throughput. The end-to-end demo
(SentencePiece -> TFRecords -> pretraining -> fill-mask) replaces this file
when the pretraining pipeline lands.
"""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import albert_tf  # noqa: E402
from albert_tf import parameter_counts  # noqa: E402


def main():
    config = albert_tf.AlbertConfig.from_preset("albert_base_v2")
    print("ALBERT-base v2 configuration:", config.to_json_string().replace("\n", " "))
    model = albert_tf.AlbertPretrainer(config)
    model.build()
    encoder_params = model.encoder.count_params()
    print(f"encoder + pooler parameters: {encoder_params:,} "
          f"(formula: {parameter_counts.count_parameters(config):,}; paper: '12M')")
    print(f"with MLM and SOP heads:      {model.count_params():,}")

    rng = np.random.default_rng(0)
    batch, seq = 8, 128
    inputs = {
        "input_ids": rng.integers(5, config.vocab_size, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": np.concatenate([np.zeros((batch, seq // 2)), np.ones((batch, seq // 2))],
                                      axis=1).astype("int32"),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, seq), (batch, 20)), axis=1)
        .astype("int32"),
    }
    inputs["input_mask"][1, 100:] = 0  # one padded sequence
    outputs = model(inputs)  # first call: tracing and allocation
    start = time.perf_counter()
    repeats = 3
    for _ in range(repeats):
        outputs = model(inputs)
    elapsed = (time.perf_counter() - start) / repeats
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        value = outputs[key]
        print(f"{key:16s} shape={tuple(value.shape)} dtype={value.dtype.name} "
              f"mean={float(np.mean(value)):+.4f} std={float(np.std(value)):.4f}")
    print(f"{len(outputs['encoder_outputs'])} encoder sub-layer outputs "
          f"(12 layers sharing one block)")
    print(f"eager forward pass, batch {batch} x {seq} tokens: {elapsed * 1000:.0f} ms "
          f"({batch / elapsed:.1f} sequences/s)")
    print("Weights are random: these numbers show the model runs, not that it has learned "
          "anything. Pretraining and fill-mask come with the pretraining pipeline.")


if __name__ == "__main__":
    main()
