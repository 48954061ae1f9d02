"""Runs albert-tf's LiteRT files (model.tflite, model.fp16.tflite, model.int8.tflite) with
the `ai_edge_litert` interpreter, in a process without TensorFlow.

    model = LiteRTModel("export/model.tflite")           # XNNPACK, 2 threads by default
    model.metadata["labels"]                             # what the export recorded
    outputs = model(input_ids=ids, input_mask=mask, segment_ids=segments)   # int32 [B, S]

Each file has one signature, `serving_default`, taking the token features as int32
arrays named as the SavedModel's `serve_tokens` takes them and returning what it returns.
Batch and sequence length are resized at each call (the interpreter re-plans when a shape
changes); a dimension fixed at export (the number of choices of a multiple-choice model,
its sequence length) is checked first, and a mismatch is one ValueError naming the input,
the expected and the given shape.

The metadata (labels, max_seq_length, do_lower_case, the vocabulary file beside the model,
...) is stored in the flatbuffer's `metadata` list as one entry named "albert_tf" holding
JSON; `read_metadata(path)` reads it with the flatbuffer classes `ai_edge_litert` ships.

Imports only numpy and `ai_edge_litert` (TensorFlow's own `tf.lite.Interpreter` is being
deleted); importing this module needs neither.
"""
from __future__ import annotations

import json
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

METADATA_NAME = "albert_tf"
DEFAULT_THREADS = 2

_MISSING = ("running a LiteRT model needs the ai-edge-litert package (pinned in "
            "requirements.txt): pip install ai-edge-litert")


def runtime_available() -> bool:
    """Whether the `ai_edge_litert` interpreter can be imported here."""
    import importlib.util
    return importlib.util.find_spec("ai_edge_litert") is not None


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as err:
        raise ImportError(f"{_MISSING} ({err})") from err
    return Interpreter


def _schema():
    try:
        from ai_edge_litert import schema_py_generated
    except ImportError as err:
        raise ImportError(f"{_MISSING} ({err})") from err
    return schema_py_generated


def metadata_of(model_bytes: bytes, schema=None) -> Dict[str, object]:
    """The albert_tf metadata (a dict; {} when absent) of a LiteRT flatbuffer's bytes.
    `schema`: the flatbuffer classes' module (default: ai_edge_litert's)."""
    schema = schema or _schema()
    model = schema.Model.GetRootAs(model_bytes, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() and entry.Name().decode() == METADATA_NAME:
            data = model.Buffers(entry.Buffer()).DataAsNumpy()
            return json.loads(bytes(data).decode("utf-8"))
    return {}


def read_metadata(path: str) -> Dict[str, object]:
    """The albert_tf metadata of a LiteRT file (see `metadata_of`)."""
    with open(path, "rb") as handle:
        return metadata_of(handle.read())


class LiteRTModel:
    """One albert-tf LiteRT file, ready to run: `model(**features) -> {name: array}`.

    path: the .tflite file. num_threads: the interpreter's threads (XNNPACK's pool).
    The interpreter applies XNNPACK, LiteRT's default CPU delegate, to every op it
    supports.
    """

    def __init__(self, path: str, num_threads: int = DEFAULT_THREADS):
        self.path = path
        interpreter = _interpreter_class()(model_path=path, num_threads=num_threads)
        signatures = interpreter.get_signature_list()
        if list(signatures) != ["serving_default"]:
            raise ValueError(f"{path}: expected one signature 'serving_default' (an albert-tf "
                             f"LiteRT export), found {sorted(signatures) or 'none'}")
        self._runner = interpreter.get_signature_runner("serving_default")
        details = self._runner.get_input_details()
        # -1 where the export left a dimension free (batch, sequence length).
        self.input_shapes: Dict[str, tuple] = {
            name: tuple(int(d) for d in detail["shape_signature"])
            for name, detail in details.items()}
        self.input_names = sorted(self.input_shapes)
        self.output_names = sorted(signatures["serving_default"]["outputs"])
        self.metadata = read_metadata(path)

    def check_inputs(self, features: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """The features the signature takes, as int32 arrays; ValueError naming an input
        that is missing or whose rank or fixed dimensions differ from the export's."""
        missing = [name for name in self.input_names if name not in features]
        if missing:
            raise ValueError(f"{self.path} takes {', '.join(self.input_names)}; missing "
                             f"{', '.join(missing)}")
        checked = {}
        for name in self.input_names:
            value = np.asarray(features[name])
            expected = self.input_shapes[name]
            if value.ndim != len(expected) or any(
                    want not in (-1, got) for want, got in zip(expected, value.shape)):
                shown = "[" + ", ".join("?" if d < 0 else str(d) for d in expected) + "]"
                raise ValueError(f"{self.path}: input {name!r} has shape "
                                 f"{list(value.shape)}, the model takes {shown} "
                                 f"(? = any size)")
            if not np.issubdtype(value.dtype, np.integer):
                raise ValueError(f"{self.path}: input {name!r} must hold integers, got "
                                 f"{value.dtype}")
            checked[name] = value.astype(np.int32, copy=False)
        return checked

    def __call__(self, **features: np.ndarray) -> Dict[str, np.ndarray]:
        outputs = self._runner(**self.check_inputs(features))
        return {name: np.array(value) for name, value in outputs.items()}

    def run_batches(self, features: Mapping[str, np.ndarray], batch_size: int = 32,
                    names: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Runs `features` (arrays with a leading example axis) in batches of
        `batch_size`; returns the outputs (`names`, default all) concatenated."""
        count = len(next(iter(features.values())))
        parts: Dict[str, list] = {}
        for start in range(0, count, batch_size):
            batch = {k: v[start:start + batch_size] for k, v in features.items()}
            for name, value in self(**batch).items():
                if names is None or name in names:
                    parts.setdefault(name, []).append(value)
        return {name: np.concatenate(values) for name, values in parts.items()}
