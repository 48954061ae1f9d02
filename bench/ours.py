"""Benchmark runners for albert_tf, with the same interface and cases as bench/peers.py.

    runner = make_runner(case)
    runner.step()   # one training step or one forward pass, blocking

Training runs the production path: `albert_tf.training.Trainer`'s compiled train
loop (forward, MLM+SOP loss, backward, LAMB update, metric sums), one step per
call, on a synthetic batch repeated by tf.data. Inference runs the encoder
(sequence + pooled output): in process as a `tf.function` (optionally
jit-compiled), through the SavedModel that `albert_tf.export.hub` writes
(its `tokens` signature), reloaded with `tf.saved_model.load`, through the ONNX
model that `albert_tf.export.onnx` writes (float32 or int8), run by ONNX Runtime, or
through the LiteRT file that `albert_tf.export.litert` writes (model.tflite,
model.fp16.tflite or model.int8.tflite), run by `albert_tf.export.litert_runtime`
(the ai_edge_litert interpreter with XNNPACK). Beside a LiteRT row, the framework
"ours_ort" runs our ONNX file of the same precision (`onnx_peer_case`), so that the
row's ratio is LiteRT against ONNX Runtime on one export of one model.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer, export, training  # noqa: E402
from albert_tf.training import optimization  # noqa: E402
from albert_tf.training.divergence import DivergenceGuard, DivergenceOptions  # noqa: E402
from albert_tf.pretraining import PretrainingObjective  # noqa: E402

WARMUP_STEPS = 2


def albert_config(case: dict) -> AlbertConfig:
    """The case's model shape as an AlbertConfig (dropout 0, as the v2 models)."""
    m = case["model"]
    return AlbertConfig(
        vocab_size=m["vocab_size"], embedding_size=m["embedding_size"],
        hidden_size=m["hidden_size"], num_hidden_layers=m["num_hidden_layers"],
        num_attention_heads=m["num_attention_heads"], intermediate_size=m["intermediate_size"],
        max_position_embeddings=m["max_position_embeddings"],
        type_vocab_size=m["type_vocab_size"], num_hidden_groups=m["num_hidden_groups"],
        inner_group_num=m["inner_group_num"], hidden_act=m["hidden_act"],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def synthetic_features(case: dict) -> dict:
    """The pretraining batch of bench/peers.py (same draws) in albert_tf's feature names."""
    import peers  # bench/peers.py: no peer library is imported at module level
    inputs = peers.synthetic_inputs(case)
    batch = case["batch_size"]
    return {
        "input_ids": inputs["token_ids"],
        "input_mask": inputs["padding_mask"],
        "segment_ids": inputs["segment_ids"],
        "masked_lm_positions": inputs["mask_positions"],
        "masked_lm_ids": inputs["masked_ids"],
        "masked_lm_weights": inputs["mask_weights"],
        "next_sentence_labels": inputs["sop_labels"].reshape(batch, 1),
    }


class TrainRunner:
    """One Trainer step per `step()` on a repeated in-memory batch."""

    def __init__(self, case: dict, recompute_layers: bool = False):
        config = albert_config(case)
        strategy = tf.distribute.get_strategy()
        self.model = AlbertPretrainer(config, dtype=case["precision"],
                                      recompute_layers=recompute_layers)
        self.model.build()
        optimizer = optimization.create_optimizer(1e-4, 10 ** 6, 0, clip_norm=None)
        task = PretrainingObjective()
        self._output_dir = tempfile.mkdtemp(prefix="albert_bench_")
        # The guard as the CLIs run it, spike check included (its cost is the same for any
        # factor); its host-side check runs on every step's record, as in Trainer.train.
        guard = DivergenceOptions(spike_factor=5.0) if case.get("guard", True) else None
        self._guard = DivergenceGuard(guard) if guard else None
        cfg = training.TrainingConfig(output_dir=self._output_dir, num_train_steps=1,
                                      steps_per_loop=1, save_checkpoints_steps=10 ** 9,
                                      jit_compile=bool(case["jit"]), checkpoint_iterator=False,
                                      divergence=guard)
        self.trainer = training.Trainer(strategy, self.model, optimizer, task, cfg,
                                        task.metric_names)
        features = synthetic_features(case)
        dataset = tf.data.Dataset.from_tensors(features).repeat().prefetch(2)
        self._iterator = iter(dataset)
        self._train_fn = self.trainer.build_train_function()
        self._one = tf.constant(1)
        for _ in range(WARMUP_STEPS):
            self.step()

    def step(self) -> None:
        totals = self._train_fn(self._iterator, self._one)
        totals["loss_sum"].numpy()
        if self._guard is not None:
            self._guard.inspect(0, totals["step_losses"].numpy(),
                                totals["step_grad_norms"].numpy())

    def close(self) -> None:
        shutil.rmtree(self._output_dir, ignore_errors=True)


class InferRunner:
    """The encoder's forward pass (sequence + pooled output): in process, or through the
    SavedModel, ONNX or LiteRT export (case["mode"])."""

    def __init__(self, case: dict):
        config = albert_config(case)
        features = synthetic_features(case)
        self._inputs = {name: tf.constant(features[name])
                        for name in ("input_ids", "input_mask", "segment_ids")}
        self._export_dir = None
        if case["mode"] == "in_process":
            encoder = AlbertEncoder(config, dtype=case["precision"])
            encoder.build()

            def forward(inputs):
                out = encoder(inputs, training=False)
                return out["sequence_output"], out["pooled_output"]

            self._fn = tf.function(forward, jit_compile=bool(case["jit"]))
            self._call = lambda: self._fn(self._inputs)
        elif case["mode"] == "saved_model":
            if case["jit"]:
                raise NotImplementedError("the albert_tf SavedModel is exported without XLA")
            from albert_tf.export import hub as hub_export
            model = AlbertPretrainer(config, dtype=case["precision"])
            model.build()
            self._export_dir = tempfile.mkdtemp(prefix="albert_bench_export_")
            config_file = os.path.join(self._export_dir, "albert_config.json")
            config.to_json_file(config_file)
            spm_file = os.path.join(self._export_dir, "spm.model")
            with open(spm_file, "wb") as handle:  # an asset only: never read by `tokens`
                handle.write(b"placeholder")
            path = hub_export.export_pretrainer(model, config_file, spm_file,
                                                os.path.join(self._export_dir, "model"))
            self._loaded = tf.saved_model.load(path)
            signature = self._loaded.signatures["tokens"]
            self._call = lambda: signature(**self._inputs)
        elif case["mode"] == "onnx":
            self._call = self._onnx_call(case, config, features)
        elif case["mode"] == "litert":
            self._call = self._litert_call(case, config, features)
        else:
            raise ValueError(f"unknown mode {case['mode']!r}")
        for _ in range(WARMUP_STEPS):
            self.step()

    def _onnx_call(self, case: dict, config: AlbertConfig, features: dict):
        """Exports the encoder as model.onnx (and model.int8.onnx for int8) and returns
        a call of it in ONNX Runtime on the case's batch."""
        if case["jit"] or case["precision"] not in ("float32", "int8"):
            raise NotImplementedError("the ONNX rows run float32 and int8")
        import onnxruntime
        from albert_tf.export import onnx as onnx_export
        self._export_dir = tempfile.mkdtemp(prefix="albert_bench_onnx_")
        written = onnx_export.export_model_dir(
            self._export_dir, encoder_function(config), export.token_input_signature(),
            {"task": "encoder"}, int8=case["precision"] == "int8")
        import peers  # bench/peers.py
        session = onnxruntime.InferenceSession(
            written["onnx_int8" if case["precision"] == "int8" else "onnx"],
            peers.quiet_session_options(), providers=["CPUExecutionProvider"])
        feeds = {name: features[name] for name in export.TOKEN_FEATURES}
        return lambda: session.run(None, feeds)

    def _litert_call(self, case: dict, config: AlbertConfig, features: dict):
        """Exports the encoder as the case's LiteRT file (only that quantization: each
        conversion takes tens of seconds) and returns a call of it in the interpreter,
        with as many XNNPACK threads as ONNX Runtime and TensorFlow use here."""
        from albert_tf.export import litert, litert_runtime
        # The row's precision is the converter's quantization ("float32", "float16", "int8").
        if case["jit"] or case["precision"] not in litert.QUANTIZATIONS:
            raise NotImplementedError("the LiteRT rows run float32, float16 and int8")
        self._export_dir = tempfile.mkdtemp(prefix="albert_bench_litert_")
        path = litert.write_tflite(
            encoder_function(config), export.token_input_signature(),
            os.path.join(self._export_dir, litert.FILES[case["precision"]]),
            {"task": "encoder"}, case["precision"])
        model = litert_runtime.LiteRTModel(path, num_threads=os.cpu_count())
        feeds = {name: features[name] for name in export.TOKEN_FEATURES}
        return lambda: model(**feeds)

    def step(self) -> None:
        out = self._call()
        for value in tf.nest.flatten(out):
            getattr(value, "numpy", lambda: value)()  # ONNX Runtime returns numpy arrays

    def close(self) -> None:
        if self._export_dir:
            shutil.rmtree(self._export_dir, ignore_errors=True)


def encoder_function(config: AlbertConfig):
    """A freshly initialized encoder's token function (sequence + pooled output), as the
    ONNX and LiteRT exports take it."""
    from albert_tf.export import onnx as onnx_export
    encoder = AlbertEncoder(config)
    encoder.build()
    return onnx_export.model_function(encoder, ["sequence_output", "pooled_output"])


def onnx_peer_case(case: dict) -> dict:
    """The case "ours_ort" runs beside a LiteRT row: our model.onnx in ONNX Runtime at the
    same batch and sequence length; model.int8.onnx beside int8, model.onnx beside float32
    and float16 (model.fp16.tflite stores its weights in float16; XNNPACK computes in
    float32 on CPUs without float16 arithmetic, so model.onnx is its counterpart)."""
    if case.get("mode") != "litert":
        raise NotImplementedError("ours_ort runs beside the LiteRT rows only")
    return dict(case, mode="onnx", precision="int8" if case["precision"] == "int8"
                else "float32")


def make_runner(case: dict):
    if case["kind"] == "train":
        return TrainRunner(case)
    if case["kind"] == "infer":
        return InferRunner(case)
    raise ValueError(f"unknown kind {case['kind']!r}")


class InputPipelineRunner:
    """One batch of `albert_tf.pretraining.inputs.pretraining_dataset` (training mode) per
    `step()`.

    case: {"kind": "input_pipeline", "files": [...], "seq_length", "max_predictions",
    "batch_size"}.
    """

    def __init__(self, case: dict):
        from albert_tf.pretraining import inputs
        config = inputs.PretrainingInputConfig(
            file_patterns=case["files"], max_seq_length=case["seq_length"],
            max_predictions_per_seq=case["max_predictions"], is_training=True, seed=0)
        self._iterator = iter(inputs.pretraining_dataset(config, case["batch_size"]))
        for _ in range(WARMUP_STEPS * 10):
            self.step()

    def step(self) -> None:
        batch = next(self._iterator)
        batch["input_ids"].numpy()

    def close(self) -> None:
        pass


class MatmulProbeRunner:
    """The machine's matmul peak, on the encoder's own GEMM shapes.

    One `step()` multiplies [B*S, H] x [H, I] and [B*S, I] x [I, H] (the FFN's
    forward products for ALBERT-base at batch 16, sequence 128) PROBE_REPEATS times
    in `case["precision"]` (bf16 inputs accumulate in float32 inside oneDNN);
    shapes and FLOPs are in bench/flops.py.
    """

    def __init__(self, case: dict):
        import flops
        dtype = tf.bfloat16 if case["precision"] == "mixed_bfloat16" else tf.float32
        repeats = flops.PROBE_REPEATS
        operands = [(tf.cast(tf.random.normal([m, k]), dtype), tf.cast(tf.random.normal([k, n]),
                                                                          dtype))
                    for m, k, n in flops.PROBE_SHAPES]

        @tf.function
        def chain():
            total = tf.zeros([], tf.float32)
            for a, b in operands:
                for _ in tf.range(repeats):
                    total += tf.cast(tf.matmul(a, b)[0, 0], tf.float32)
            return total

        self._chain = chain
        for _ in range(WARMUP_STEPS):
            self.step()

    def step(self) -> None:
        self._chain().numpy()

    def close(self) -> None:
        pass


def make_any_runner(case: dict):
    """`make_runner` plus the non-model kinds ("input_pipeline", "probe")."""
    if case["kind"] == "input_pipeline":
        return InputPipelineRunner(case)
    if case["kind"] == "probe":
        return MatmulProbeRunner(case)
    return make_runner(case)
