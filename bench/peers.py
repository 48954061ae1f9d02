"""Benchmark runners for two peer ALBERT implementations, shaped like ours.

    runner = make_runner("keras_hub" | "hf", case)
    runner.step()   # one unit of work (a training step or a forward pass), blocking

Peers (random weights, the same shapes as `albert_tf`):

  "keras_hub"  `keras_hub.models.AlbertBackbone` on the TensorFlow backend.
               Pretraining heads as `keras_hub.models.AlbertMaskedLM` builds them:
               `keras_hub.layers.MaskedLMHead` (H->E dense + approximate GELU,
               LayerNorm, output projection tied to the backbone's
               ReversibleEmbedding, evaluated only at the mask positions), plus a
               2-way sentence-order Dense on the pooled output. Loss (float32) =
               sum(w * CE) / (sum(w) + 1e-5) over masked positions + mean SOP CE,
               as in albert_tf.pretraining. Optimizer `keras.optimizers.Lamb(1e-4)`
               (Adam where Keras has no Lamb). The train step is one
               `tf.function(jit_compile=case["jit"])`: forward, loss, GradientTape
               backward, `apply_gradients`.
  "hf"         Hugging Face `transformers.AlbertForPreTraining` on PyTorch CPU,
               SDPA attention when the model supports it (else eager), dropout 0.
               Train step: forward with `labels` / `sentence_order_label`, backward,
               `torch.optim.AdamW(lr=1e-4)` step, zero_grad; bf16 is
               `torch.autocast("cpu", torch.bfloat16)` around forward + loss.
               No torch.compile: jit cases and SavedModel cases raise NotSupported.

`case` keys (all required):
  kind             "train" | "infer" (infer = backbone / encoder only:
                   sequence output + pooled output)
  model            dict: vocab_size, embedding_size, hidden_size, num_hidden_layers,
                   num_attention_heads, intermediate_size, max_position_embeddings,
                   type_vocab_size, num_hidden_groups, inner_group_num, hidden_act
  seq_length, batch_size, max_predictions
  precision        "float32" | "mixed_bfloat16"
  jit              bool (XLA; keras_hub only)
  mode             "in_process" | "saved_model" (infer only; keras_hub only): the
                   backbone is exported with keras' ExportArchive (endpoint "serve",
                   fixed [batch, seq] int32 signature, jit_compile=case["jit"]),
                   reloaded with tf.saved_model.load, and the reloaded `serve` is
                   what step() runs.

Inputs are synthetic, drawn once (numpy seed 0) and converted to tensors in the
constructor: token ids in [5, vocab), padding mask all ones, segment ids 0 for
the first half and 1 for the second, `max_predictions` distinct sorted mask
positions per row in [1, seq), mask weights ones, random 0/1 SOP labels.
Constructors run 2 warm-up steps (tracing / XLA compilation), so step() is
steady state as soon as make_runner returns.

Caveats on equivalence:
  * Activation: keras-hub's AlbertBackbone and MaskedLMHead hard-code
    `gelu_approximate` (tanh GELU); our "gelu" is the same tanh approximation,
    mapped to HF's "gelu_new" (a composite of elementwise torch ops, not the
    fused `gelu_pytorch_tanh` kernel). Any other hidden_act raises NotSupported
    for keras-hub.
  * HF's MLM head computes vocabulary logits at *every* position and masks the
    loss with -100 labels; ours and keras-hub's gather the masked positions first.
  * keras-hub's MaskedLMHead LayerNorm epsilon is 1e-5 (ours 1e-12) - numerics only.
  * HF with an all-ones attention mask may skip the mask entirely under SDPA.

`python bench/peers.py` runs a tiny self-check of every supported combination.
"""
from __future__ import annotations

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

FRAMEWORKS = ("keras_hub", "hf")
WARMUP_STEPS = 2
LEARNING_RATE = 1e-4
MLM_LOSS_EPSILON = 1e-5
_TANH_GELU = ("gelu", "gelu_new", "gelu_pytorch_tanh")


class NotSupported(Exception):
    """This framework cannot run this case (e.g. XLA or SavedModel for HF PyTorch)."""


def make_runner(framework: str, case: dict):
    """Returns an object with .step() -> None that runs ONE unit of work and blocks
    until it is finished (for TF: call .numpy() on a result; for torch: results are
    synchronous on CPU).

    framework: "keras_hub" or "hf". Raises NotSupported for combinations the
    framework cannot run, ValueError for unknown frameworks / case values.
    """
    _validate_case(case)
    if framework == "hf_ort":
        return HFOnnxRuntimeRunner(case)
    if case["mode"] == "onnx" or case["precision"] == "int8":
        raise NotSupported(f"{framework} has no ONNX Runtime path (the hf_ort peer runs "
                           "Hugging Face's ONNX export)")
    if framework == "keras_hub":
        return KerasHubRunner(case)
    if framework == "hf":
        return HFRunner(case)
    raise ValueError(f"unknown framework {framework!r}; expected one of {FRAMEWORKS}")


def _validate_case(case: dict) -> None:
    """Checks the case's enumerated values, so a typo fails loudly rather than silently."""
    if case["kind"] not in ("train", "infer"):
        raise ValueError(f"case kind must be 'train' or 'infer', got {case['kind']!r}")
    if case["precision"] not in ("float32", "mixed_bfloat16", "int8"):
        raise ValueError(f"unknown precision {case['precision']!r}")
    if case["mode"] not in ("in_process", "saved_model", "onnx"):
        raise ValueError(f"unknown mode {case['mode']!r}")
    if case["kind"] == "train" and case["mode"] != "in_process":
        raise ValueError(f"mode {case['mode']!r} is for inference cases only")
    if case["precision"] == "int8" and case["mode"] != "onnx":
        raise ValueError("int8 is an ONNX Runtime precision (mode 'onnx')")
    if case["max_predictions"] > case["seq_length"] - 1:
        raise ValueError("max_predictions must be <= seq_length - 1 (distinct positions)")


def synthetic_inputs(case: dict) -> dict:
    """The case's synthetic batch as numpy arrays (int32, mask weights float32).

    Keys: token_ids, padding_mask, segment_ids [B, S]; mask_positions, masked_ids,
    mask_weights [B, P]; sop_labels [B]. Deterministic (numpy rng seed 0).
    """
    b, s, p = case["batch_size"], case["seq_length"], case["max_predictions"]
    vocab = case["model"]["vocab_size"]
    rng = np.random.default_rng(0)
    positions = np.stack([np.sort(rng.choice(np.arange(1, s), p, replace=False))
                          for _ in range(b)])
    return {
        "token_ids": rng.integers(5, vocab, (b, s)).astype("int32"),
        "padding_mask": np.ones((b, s), "int32"),
        "segment_ids": np.broadcast_to((np.arange(s) >= s // 2).astype("int32"), (b, s)).copy(),
        "mask_positions": positions.astype("int32"),
        "masked_ids": rng.integers(5, vocab, (b, p)).astype("int32"),
        "mask_weights": np.ones((b, p), "float32"),
        "sop_labels": rng.integers(0, 2, (b,)).astype("int32"),
    }


# --------------------------------------------------------------------------- keras-hub


def keras_hub_backbone(model_cfg: dict, dtype: str = "float32"):
    """A randomly initialized `keras_hub.models.AlbertBackbone` for our config dict."""
    import keras_hub

    if model_cfg["hidden_act"] not in _TANH_GELU:
        raise NotSupported(f"keras-hub AlbertBackbone hard-codes tanh GELU; "
                           f"hidden_act={model_cfg['hidden_act']!r}")
    groups = model_cfg["num_hidden_groups"]
    return keras_hub.models.AlbertBackbone(
        vocabulary_size=model_cfg["vocab_size"],
        num_layers=model_cfg["num_hidden_layers"],
        num_heads=model_cfg["num_attention_heads"],
        embedding_dim=model_cfg["embedding_size"],
        hidden_dim=model_cfg["hidden_size"],
        intermediate_dim=model_cfg["intermediate_size"],
        num_groups=groups,
        num_inner_repetitions=model_cfg["inner_group_num"],
        dropout=0.0,
        max_sequence_length=model_cfg["max_position_embeddings"],
        num_segments=model_cfg["type_vocab_size"],
        dtype=dtype,
    )


def keras_hub_pretrainer(backbone):
    """Functional model: backbone inputs + mask_positions -> (mlm logits [B, P, V],
    sop logits [B, 2]), with AlbertMaskedLM's head and a 2-way SOP Dense."""
    import keras
    import keras_hub
    from keras_hub.src.models.albert.albert_backbone import albert_kernel_initializer
    from keras_hub.src.utils.keras_utils import gelu_approximate

    mlm_head = keras_hub.layers.MaskedLMHead(  # as in keras_hub.models.AlbertMaskedLM
        vocabulary_size=backbone.vocabulary_size,
        token_embedding=backbone.token_embedding,
        intermediate_activation=gelu_approximate,
        kernel_initializer=albert_kernel_initializer(),
        dtype=backbone.dtype_policy,
        name="mlm_head",
    )
    sop_head = keras.layers.Dense(2, kernel_initializer=albert_kernel_initializer(),
                                  dtype=backbone.dtype_policy, name="sop_head")
    inputs = {**backbone.input,
              "mask_positions": keras.Input(shape=(None,), dtype="int32",
                                            name="mask_positions")}
    outputs = backbone(backbone.input)
    mlm_logits = mlm_head(outputs["sequence_output"], inputs["mask_positions"])
    sop_logits = sop_head(outputs["pooled_output"])
    return keras.Model(inputs, {"mlm_logits": mlm_logits, "sop_logits": sop_logits},
                       name="albert_pretrainer")


def keras_optimizer():
    """`keras.optimizers.Lamb(1e-4)` if this Keras has it, else Adam(1e-4)."""
    import keras

    if hasattr(keras.optimizers, "Lamb"):
        return keras.optimizers.Lamb(LEARNING_RATE)
    return keras.optimizers.Adam(LEARNING_RATE)


class KerasHubRunner:
    """keras-hub AlbertBackbone (TF backend): pretraining step, or backbone forward.

    Attributes after construction: `fn` (the callable step() runs: a tf.function,
    or the reloaded SavedModel's `serve`), `num_backbone_params`, for training
    `model` / `optimizer`, for SavedModel mode `loaded` (the reloaded object).
    """

    def __init__(self, case: dict):
        import keras
        import tensorflow as tf

        self.case = case
        keras.utils.set_random_seed(0)
        data = synthetic_inputs(case)
        backbone = keras_hub_backbone(case["model"], case["precision"])
        self.num_backbone_params = backbone.count_params()
        features = {k: tf.constant(data[k])
                    for k in ("token_ids", "segment_ids", "padding_mask")}

        if case["kind"] == "train":
            self.model = keras_hub_pretrainer(backbone)
            self.optimizer = keras_optimizer()
            self.optimizer.build(self.model.trainable_variables)  # no variable creation in XLA
            features["mask_positions"] = tf.constant(data["mask_positions"])
            labels = {k: tf.constant(data[k])
                      for k in ("masked_ids", "mask_weights", "sop_labels")}
            fn = tf.function(self._train_step, jit_compile=case["jit"])
            self.fn = lambda: fn(features, labels)
        elif case["mode"] == "in_process":
            fn = tf.function(lambda x: backbone(x, training=False), jit_compile=case["jit"])
            self.fn = lambda: fn(features)
        else:
            self.loaded = self._export_and_reload(backbone, features, case["jit"])
            self.fn = lambda: self.loaded.serve(features)
        for _ in range(WARMUP_STEPS):
            self.step()

    def _train_step(self, features, labels):
        """Forward, float32 loss, backward, optimizer update; returns the loss."""
        import keras
        import tensorflow as tf

        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            out = self.model(features, training=True)
            mlm_logits = tf.cast(out["mlm_logits"], tf.float32)
            sop_logits = tf.cast(out["sop_logits"], tf.float32)
            mlm_nll = keras.losses.sparse_categorical_crossentropy(
                labels["masked_ids"], mlm_logits, from_logits=True)
            weights = labels["mask_weights"]
            mlm_loss = tf.reduce_sum(mlm_nll * weights) / (tf.reduce_sum(weights)
                                                           + MLM_LOSS_EPSILON)
            sop_loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                labels["sop_labels"], sop_logits, from_logits=True))
            loss = mlm_loss + sop_loss
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables))
        return loss

    @staticmethod
    def _export_and_reload(backbone, features, jit):
        """Exports the backbone as a SavedModel (endpoint "serve", fixed-shape int32
        signature, jit_compile=jit) into a temporary directory and returns the
        reloaded object (keep it alive: it owns the variables `serve` reads).
        Variables are restored into memory, so the directory is removed right away."""
        import keras
        import tensorflow as tf

        spec = {k: tf.TensorSpec(v.shape, tf.int32, name=k) for k, v in features.items()}
        archive = keras.export.ExportArchive()
        archive.track(backbone)
        archive.add_endpoint(
            "serve", tf.function(lambda x: backbone(x, training=False), jit_compile=jit),
            input_signature=[spec])
        with tempfile.TemporaryDirectory(prefix="peers_keras_hub_") as tmp:
            path = os.path.join(tmp, "saved_model")
            archive.write_out(path, verbose=False)
            return tf.saved_model.load(path)

    def step(self) -> None:
        """One training step or forward pass, blocking until it has finished."""
        out = self.fn()
        if isinstance(out, dict):
            for value in out.values():
                value.numpy()
        else:
            out.numpy()


# --------------------------------------------------------------------------- Hugging Face


def hf_config(model_cfg: dict):
    """`transformers.AlbertConfig` for our config dict; dropout 0 (as ALBERT v2)."""
    from transformers import AlbertConfig

    act = {"gelu": "gelu_new"}.get(model_cfg["hidden_act"], model_cfg["hidden_act"])
    return AlbertConfig(
        vocab_size=model_cfg["vocab_size"],
        embedding_size=model_cfg["embedding_size"],
        hidden_size=model_cfg["hidden_size"],
        num_hidden_layers=model_cfg["num_hidden_layers"],
        num_hidden_groups=model_cfg["num_hidden_groups"],
        num_attention_heads=model_cfg["num_attention_heads"],
        intermediate_size=model_cfg["intermediate_size"],
        inner_group_num=model_cfg["inner_group_num"],
        hidden_act=act,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        max_position_embeddings=model_cfg["max_position_embeddings"],
        type_vocab_size=model_cfg["type_vocab_size"],
    )


def hf_pretraining_model(model_cfg: dict):
    """Randomly initialized `AlbertForPreTraining`, SDPA attention if supported, else eager.

    Returns (model, attn_implementation)."""
    import torch
    from transformers import AlbertForPreTraining

    torch.manual_seed(0)
    config = hf_config(model_cfg)
    impl = "sdpa" if getattr(AlbertForPreTraining, "_supports_sdpa", False) else "eager"
    try:
        model = AlbertForPreTraining._from_config(config, attn_implementation=impl)
    except (ValueError, ImportError):
        impl = "eager"
        model = AlbertForPreTraining._from_config(config, attn_implementation=impl)
    return model, impl


class HFRunner:
    """transformers.AlbertForPreTraining on PyTorch CPU: pretraining step, or encoder forward.

    Attributes after construction: `model`, `attn_implementation`, and for training
    `optimizer`.
    """

    def __init__(self, case: dict):
        import torch

        if case["jit"]:
            raise NotSupported("HF runner does not use torch.compile (no jit rows)")
        if case["mode"] == "saved_model":
            raise NotSupported("HF runner has no SavedModel mode")
        torch.set_num_threads(os.cpu_count())
        self.case = case
        self.bf16 = case["precision"] == "mixed_bfloat16"
        self.model, self.attn_implementation = hf_pretraining_model(case["model"])
        data = synthetic_inputs(case)
        self.inputs = {
            "input_ids": torch.from_numpy(data["token_ids"]).long(),
            "attention_mask": torch.from_numpy(data["padding_mask"]).long(),
            "token_type_ids": torch.from_numpy(data["segment_ids"]).long(),
        }
        if case["kind"] == "train":
            labels = np.full(data["token_ids"].shape, -100, "int64")
            np.put_along_axis(labels, data["mask_positions"].astype("int64"),
                              data["masked_ids"].astype("int64"), axis=1)
            self.labels = torch.from_numpy(labels)
            self.sop_labels = torch.from_numpy(data["sop_labels"]).long()
            self.model.train()
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LEARNING_RATE)
            self._step = self._train_step
        else:
            self.model.eval()
            self._step = self._infer_step
        for _ in range(WARMUP_STEPS):
            self.step()

    def _autocast(self):
        import contextlib
        import torch

        if self.bf16:
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _train_step(self) -> None:
        with self._autocast():
            loss = self.model(**self.inputs, labels=self.labels,
                              sentence_order_label=self.sop_labels).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _infer_step(self) -> None:
        import torch

        with torch.inference_mode(), self._autocast():
            self.model.albert(**self.inputs)

    def step(self) -> None:
        """One training step or encoder forward pass (synchronous on CPU)."""
        self._step()


def quiet_session_options():
    """ONNX Runtime session options for interleaved units: its worker threads block when
    a call ends instead of spinning on the cores (the default, for latency), which would
    slow the next framework's unit by up to a few ms. Both ONNX Runtime workers use them."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class HFOnnxRuntimeRunner:
    """What users serve on CPUs today: transformers' AlbertModel exported by torch.onnx
    (TorchScript exporter, dynamic batch and sequence, opset 17) and run by ONNX Runtime
    with its default graph optimizations; int8 = ONNX Runtime dynamic quantization after
    its pre-processing, as albert_tf.export.onnx.quantize_int8 does for ours (repeated
    here so that TensorFlow stays out of this process). Encoder forward only.

    In every inference row it is a peer: beside our SavedModel and in-process rows it
    runs float32, in the ONNX rows the row's precision.
    """

    def __init__(self, case: dict):
        import tempfile

        import onnxruntime
        import torch

        if case["kind"] != "infer":
            raise NotSupported("ONNX Runtime rows are inference only")
        if case["jit"] or case["precision"] == "mixed_bfloat16":
            raise NotSupported("the ONNX Runtime peer runs float32 and int8 only")
        self._dir = tempfile.mkdtemp(prefix="albert_bench_hf_onnx_")
        model, _ = hf_pretraining_model(case["model"])
        encoder = model.albert.eval()
        data = synthetic_inputs(case)
        self.inputs = {"input_ids": data["token_ids"].astype("int64"),
                       "attention_mask": data["padding_mask"].astype("int64"),
                       "token_type_ids": data["segment_ids"].astype("int64")}
        path = os.path.join(self._dir, "model.onnx")
        dims = {0: "batch", 1: "sequence"}
        with torch.inference_mode():
            torch.onnx.export(encoder, tuple(torch.from_numpy(v) for v in self.inputs.values()),
                              path, input_names=list(self.inputs),
                              output_names=["last_hidden_state", "pooler_output"],
                              dynamic_axes={name: dims for name in self.inputs},
                              opset_version=17, dynamo=False)
        if case["precision"] == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic
            from onnxruntime.quantization.shape_inference import quant_pre_process
            prepared, int8 = path + ".prepared.onnx", path + ".int8.onnx"
            quant_pre_process(path, prepared, skip_symbolic_shape=True)
            # albert_tf.export.onnx.Int8Settings' defaults.
            quantize_dynamic(prepared, int8, weight_type=QuantType.QInt8,
                             op_types_to_quantize=["MatMul"], per_channel=True,
                             reduce_range=True)
            path = int8
        self.session = onnxruntime.InferenceSession(path, quiet_session_options(),
                                                    providers=["CPUExecutionProvider"])
        for _ in range(WARMUP_STEPS):
            self.step()

    def step(self) -> None:
        self.session.run(None, self.inputs)

    def close(self) -> None:
        import shutil
        shutil.rmtree(self._dir, ignore_errors=True)


# --------------------------------------------------------------------------- self-check

TINY_MODEL = {
    "vocab_size": 100, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64,
    "type_vocab_size": 2, "num_hidden_groups": 1, "inner_group_num": 1, "hidden_act": "gelu",
}

BASE_MODEL = {
    "vocab_size": 30000, "embedding_size": 128, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512,
    "type_vocab_size": 2, "num_hidden_groups": 1, "inner_group_num": 1, "hidden_act": "gelu",
}


def _self_check() -> None:
    """Builds every supported (framework, kind, precision, jit, mode) on a tiny
    config, runs 2 steps each, and checks that unsupported ones raise NotSupported."""
    import time

    ran = skipped = 0
    for framework in FRAMEWORKS:
        for kind, mode in (("train", "in_process"), ("infer", "in_process"),
                           ("infer", "saved_model")):
            for precision in ("float32", "mixed_bfloat16"):
                for jit in (False, True):
                    case = {"kind": kind, "model": TINY_MODEL, "seq_length": 16,
                            "batch_size": 2, "max_predictions": 3, "precision": precision,
                            "jit": jit, "mode": mode}
                    name = f"{framework:9s} {kind:5s} {mode:11s} {precision:14s} jit={jit!s:5s}"
                    start = time.perf_counter()
                    try:
                        runner = make_runner(framework, case)
                    except NotSupported as e:
                        assert framework == "hf", (name, e)
                        print(f"{name} n/a ({e})")
                        skipped += 1
                        continue
                    for _ in range(2):
                        runner.step()
                    print(f"{name} ok ({time.perf_counter() - start:.1f}s)")
                    ran += 1
    count = keras_hub_backbone(BASE_MODEL).count_params()
    print(f"keras-hub AlbertBackbone params, ALBERT-base shape: {count:,}")
    print(f"OK: {ran} cases ran, {skipped} n/a")


if __name__ == "__main__":
    _self_check()
