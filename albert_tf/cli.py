"""Flags shared by the run_*.py CLIs (runtime: distribution, precision, XLA, seed).

Only the CLIs' modules call `define_runtime_flags()` (at import) and read flags;
library code receives plain values.
"""
from __future__ import annotations

from absl import flags

from albert_tf import distribute, fused_ops


def define_runtime_flags() -> None:
    """Defines --strategy, the original's TPU flags, --mixed_precision, --jit_compile,
    --gradient_accumulation_steps and --seed."""
    flags.DEFINE_enum("strategy", "one_device", list(distribute.STRATEGIES),
                      "Distribution strategy (multi_worker_mirrored reads TF_CONFIG).")
    flags.DEFINE_bool("use_tpu", False, "Same as --strategy=tpu (the original's flag).")
    flags.DEFINE_string("tpu_name", None, "TPU name or grpc:// address.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.")
    flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.")
    flags.DEFINE_string("master", None, "TPU master address (used when --tpu_name is not set).")
    flags.DEFINE_integer("num_tpu_cores", 8,
                         "Accepted for compatibility; TPUStrategy finds the cores.")
    flags.DEFINE_enum("mixed_precision", "float32",
                      ["float32", "mixed_bfloat16", "mixed_float16"],
                      "Keras dtype policy; mixed_float16 adds dynamic loss scaling.")
    flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per optimizer step (the training batch is split "
                         "into them).")
    flags.DEFINE_integer("seed", None, "Seed for initialisation, dropout and input shuffling.")


def define_export_flags() -> None:
    """Defines --export_layer_norm (how an --export_dir SavedModel spells its LayerNorms)."""
    flags.DEFINE_enum(
        "export_layer_norm", "auto", list(fused_ops.EXPORT_LAYER_NORMS),
        "LayerNorms of the --export_dir SavedModel: 'onednn' runs them in one fused kernel "
        "on oneDNN TensorFlow (the default on x86 Linux; ~3% faster inference) but slower "
        "where oneDNN is off (up to ~10%); 'plain' is the same speed everywhere; 'auto' is "
        "'onednn' when this process runs oneDNN without a GPU. The same values up to "
        "float32 rounding either way.")


def strategy_from_flags(values=flags.FLAGS):
    """The tf.distribute strategy the runtime flags ask for."""
    name = "tpu" if values.use_tpu else values.strategy
    return distribute.get_strategy(name, tpu_address=values.tpu_name or values.master,
                                   tpu_zone=values.tpu_zone, gcp_project=values.gcp_project)
