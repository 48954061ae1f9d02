"""What a task's ONNX and LiteRT files share, and the check that keeps an int8 file honest.

    PortableModel(fn, input_signature, metadata, compare)   a task model's token-id function
    export_model_dir(export_dir, portable, formats, ...)     model.onnx / model.tflite (and
                                                             their fp16 / int8 files), the
                                                             vocabulary beside them
    prediction_agreement(reference, other, compare)          how often two files predict alike

int8 agreement: with `check_features` (token features of the evaluation set), each int8
file is run beside its float32 file on them; where the predictions agree less often than
`int8_min_agreement`, the int8 file is removed and one warning line says so (the float32
files stay). Quantization error depends on the weights, not only on the CPU: a model whose
int8 predictions drift is better served in float32 than served wrong.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.export.vocabulary import copy_vocabulary

PORTABLE_FORMATS = ("onnx", "tflite")
DEFAULT_INT8_MIN_AGREEMENT = 0.98
# How many evaluation examples the int8 check runs at most (the float32 LiteRT model
# takes ~0.1 s per example at sequence 128 on a server core).
AGREEMENT_EXAMPLES = 1000
COMPARE_RULES = ("argmax", "values", "first", "context_argmax", "rows")


@dataclasses.dataclass(frozen=True)
class PortableModel:
    """A task model's token-id function, as its ONNX and LiteRT files hold it.

    fn: features -> {name: tensor}, the model in inference mode (float outputs float32).
    input_signature: name -> TensorSpec of the int32 token features (None = any size).
    metadata: JSON values stored in each file (task, labels, max_seq_length, ...).
    compare: (output name, rule) pairs that make the task's predictions, for the int8
      agreement check: "argmax" (a float output's argmax over its last axis), "values"
      (an integer output's values, -1 ignored: a position that is not predicted),
      "first" (an integer output's first value per example, e.g. the top-1 of a top-k),
      "context_argmax" (a span logit's argmax over the positions an answer may take:
      `p_mask` 0, [CLS] at position 0 excluded; an argmax over the whole window would
      compare [CLS] or the question whenever the model is unsure), "rows" (an output's
      whole row as one prediction: a multi-label example's label set, which per-value
      agreement would flatter, most labels being absent everywhere).
    """

    fn: Callable[[Mapping], Dict[str, tf.Tensor]]
    input_signature: Mapping[str, tf.TensorSpec]
    metadata: Mapping[str, object]
    compare: Tuple[Tuple[str, str], ...] = (("predictions", "values"),)

    def __post_init__(self):
        for _, rule in self.compare:
            if rule not in COMPARE_RULES:
                raise ValueError(f"compare rule must be one of {COMPARE_RULES}; got {rule!r}")


def light_inference_metadata(model) -> Dict[str, object]:
    """What an export records of a model's light inference (`modeling.early_exit`): the
    layers it runs when fewer than L, its exit heads and its early-exit rule; {} for a
    model that runs every layer."""
    values: Dict[str, object] = {}
    if getattr(model, "inference_layers", None) is not None:
        values["inference_layers"] = model.inference_layers
    if getattr(model, "exit_heads", "none") != "none":
        values["exit_heads"] = model.exit_heads
    if getattr(model, "early_exit", None) is not None:
        values["early_exit"] = model.early_exit.to_dict()
    if values:
        values["num_hidden_layers"] = model.config.num_hidden_layers
    return values


def _compared_values(outputs: Mapping[str, np.ndarray], name: str, rule: str,
                     features: Optional[Mapping[str, np.ndarray]] = None):
    value = np.asarray(outputs[name])
    if rule == "argmax":
        return value.argmax(-1)
    if rule == "context_argmax":
        allowed = np.asarray(features["p_mask"]) == 0
        allowed[:, 0] = False
        return np.where(allowed, value, -np.inf).argmax(-1)
    if rule == "first":
        return value.reshape(len(value), -1)[:, 0]
    if rule == "rows":  # a row's values as one prediction (a multi-label row's label set)
        flat = value.reshape(len(value), -1)
        return np.array([hash(row.tobytes()) for row in flat])
    return value


def prediction_agreement(reference: Mapping[str, np.ndarray],
                         other: Mapping[str, np.ndarray],
                         compare: Sequence[Tuple[str, str]],
                         features: Optional[Mapping[str, np.ndarray]] = None
                         ) -> Tuple[float, int]:
    """(fraction of predicted values equal in `other` and `reference`, how many values
    were compared): each compared output's values (by its rule) count once each; "values"
    skip positions where the reference holds -1. `features`: the inputs both ran on
    ("context_argmax" reads their `p_mask`)."""
    equal = total = 0
    for name, rule in compare:
        ref = _compared_values(reference, name, rule, features)
        got = _compared_values(other, name, rule, features)
        keep = ref != -1 if rule == "values" else np.ones(ref.shape, bool)
        equal += int(np.sum((ref == got) & keep))
        total += int(np.sum(keep))
    return (equal / total if total else 1.0), total


def _onnx_runner(path: str) -> Callable:
    import onnxruntime
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    inputs = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    return lambda features: dict(zip(outputs, session.run(
        None, {name: features[name] for name in inputs})))


def _litert_runner(path: str) -> Callable:
    from albert_tf.export import litert_runtime
    model = litert_runtime.LiteRTModel(path)
    return lambda features: model(**{n: features[n] for n in model.input_names})


def _run_all(run: Callable, features: Mapping[str, np.ndarray], batch_size: int = 16):
    count = len(next(iter(features.values())))
    parts: Dict[str, list] = {}
    for start in range(0, count, batch_size):
        batch = {k: v[start:start + batch_size] for k, v in features.items()}
        for name, value in run(batch).items():
            parts.setdefault(name, []).append(np.asarray(value))
    return {name: np.concatenate(values) for name, values in parts.items()}


def run_file(path: str, features: Mapping[str, np.ndarray], batch_size: int = 16
             ) -> Dict[str, np.ndarray]:
    """Every output of an exported .onnx (ONNX Runtime, CPU) or .tflite (LiteRT) file on
    `features` (arrays with a leading example axis, extra names ignored), run in batches
    of `batch_size` and concatenated."""
    runner = _onnx_runner if str(path).endswith(".onnx") else _litert_runner
    return _run_all(runner(str(path)), features, batch_size)


def check_int8(float_path: str, int8_path: str, runner: Callable, compare,
               features: Mapping[str, np.ndarray], min_agreement: float,
               reference: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, object]:
    """Runs both files on `features` (`reference`: the float32 file's outputs, when
    already computed); removes `int8_path` (with one warning line) when their predictions
    agree less often than `min_agreement`. Returns {"agreement": fraction, "compared":
    count, "kept": bool}."""
    if reference is None:
        reference = _run_all(runner(float_path), features)
    quantized = _run_all(runner(int8_path), features)
    agreement, compared = prediction_agreement(reference, quantized, compare, features)
    examples = len(next(iter(features.values())))
    kept = agreement >= min_agreement
    if kept:
        logging.info("%s predicts as %s on %.2f%% of %d values (%d evaluation examples)",
                     os.path.basename(int8_path), os.path.basename(float_path),
                     100 * agreement, compared, examples)
    else:
        os.remove(int8_path)
        logging.warning("%s agrees with %s on %.2f%% of %d predictions (%d evaluation "
                        "examples), below --int8_min_agreement=%g: removed it; serve the "
                        "float32 file", os.path.basename(int8_path),
                        os.path.basename(float_path), 100 * agreement, compared, examples,
                        min_agreement)
    return {"agreement": agreement, "compared": compared, "kept": kept}


def _check_quantized(written: Dict, checks, compare, features, min_agreement: float) -> Dict:
    """Runs each int8 file (and model.fp16.tflite, reported only) beside its float32 file;
    returns {"int8_agreement": {file: fraction}[, "fp16_agreement": fraction]} and removes
    from `written` the int8 files `check_int8` removed."""
    from albert_tf.export import litert_runtime

    agreement, references = {}, {}
    for float_key, int8_key, runner in checks:
        if int8_key in written:
            references[float_key] = _run_all(runner(written[float_key]), features)
            result = check_int8(written[float_key], written[int8_key], runner, compare,
                                features, min_agreement, references[float_key])
            agreement[os.path.basename(written[int8_key])] = result["agreement"]
            if not result["kept"]:
                del written[int8_key]
    found = {"int8_agreement": agreement} if agreement else {}
    if "tflite_fp16" in written and litert_runtime.runtime_available():
        reference = references.get("tflite") or _run_all(_litert_runner(written["tflite"]),
                                                         features)
        half = _run_all(_litert_runner(written["tflite_fp16"]), features)
        fraction, compared = prediction_agreement(reference, half, compare, features)
        logging.info("model.fp16.tflite predicts as model.tflite on %.2f%% of %d values",
                     100 * fraction, compared)
        found["fp16_agreement"] = fraction
    return found


def export_model_dir(export_dir: str, portable: PortableModel, formats: Sequence[str], *,
                     int8: bool = False, fp16: bool = False,
                     spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None,
                     check_features: Optional[Mapping[str, np.ndarray]] = None,
                     int8_min_agreement: float = DEFAULT_INT8_MIN_AGREEMENT) -> Dict:
    """Writes the portable files `formats` asks for ("onnx", "tflite"; others are ignored)
    to `export_dir` with the vocabulary, and checks each int8 file on `check_features`
    (see the module's docstring; skipped when None or `int8_min_agreement` is 0), and
    reports model.fp16.tflite's agreement. Returns {"onnx": path, "onnx_int8": path,
    "tflite": path, "tflite_fp16": path, "tflite_int8": path} for what it wrote and kept,
    plus "int8_agreement": {file name: fraction} and "fp16_agreement": fraction when
    checked."""
    from albert_tf.export import litert, onnx

    metadata = dict(portable.metadata)
    metadata.update(copy_vocabulary(export_dir, spm_model_file, vocab_file))
    written: Dict = {}
    checks = []  # (float32 key, int8 key, runner) of each format written
    if "onnx" in formats:
        written.update(onnx.export_model_dir(export_dir, portable.fn, portable.input_signature,
                                             metadata, int8=int8))
        checks.append(("onnx", "onnx_int8", _onnx_runner))
    if "tflite" in formats:
        written.update(litert.export_model_dir(export_dir, portable.fn,
                                               portable.input_signature, metadata,
                                               fp16=fp16, int8=int8))
        checks.append(("tflite", "tflite_int8", _litert_runner))
    if check_features is not None and int8_min_agreement > 0 and (int8 or fp16):
        # All the features given (the runners take the inputs they need; a compare rule
        # may read others, e.g. SQuAD's p_mask).
        features = {name: np.asarray(value)[:AGREEMENT_EXAMPLES]
                    for name, value in check_features.items()}
        written.update(_check_quantized(written, checks, portable.compare, features,
                                        int8_min_agreement))
    return written
