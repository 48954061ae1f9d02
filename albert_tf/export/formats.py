"""What --export_dir holds (`EXPORT_FORMATS`), and the checks on the export flags, run
before training so that a mistake costs seconds, not a fine-tuning run."""
from __future__ import annotations

import importlib.util
import os
from typing import Optional, Sequence

EXPORT_FORMATS = ("saved_model", "onnx", "tflite")
DEFAULT_EXPORT_FORMATS = ("saved_model",)
# Python packages each portable format needs to be written (the LiteRT converter is
# TensorFlow's own; its runtime, ai_edge_litert, is needed only to check int8 files).
_PACKAGES = {"onnx": ("tf2onnx", "onnx", "onnxruntime"), "tflite": ()}


def _missing(packages: Sequence[str]):
    return [name for name in packages if importlib.util.find_spec(name) is None]


def check_export_formats(formats: Sequence[str], int8: bool, *,
                         export_dir: Optional[str],
                         formats_flag: str = "--export_format",
                         int8_flag: str = "--export_int8",
                         mixed_precision: str = "float32",
                         fp16: bool = False, fp16_flag: str = "--export_fp16",
                         int8_min_agreement: float = 0.0,
                         agreement_flag: str = "--int8_min_agreement") -> None:
    """Raises ValueError naming the flag unless `formats` is a non-empty subset of
    EXPORT_FORMATS, `int8` comes with "onnx" or "tflite" and `fp16` with "tflite"; a choice
    other than the default (SavedModel only) needs `export_dir` (local, and not a file);
    ONNX and LiteRT need a float32 model (their graphs compute in the model's dtype) and
    their packages installed; checking int8 LiteRT files (`int8_min_agreement` > 0) needs
    ai_edge_litert."""
    formats = list(formats)
    unknown = [f for f in formats if f not in EXPORT_FORMATS]
    if not formats or unknown:
        raise ValueError(f"{formats_flag} takes a comma-separated list of "
                         f"{', '.join(EXPORT_FORMATS)}; got {','.join(formats)!r}")
    portable = [f for f in formats if f in ("onnx", "tflite")]
    if int8 and not portable:
        raise ValueError(f"{int8_flag} quantizes the ONNX and LiteRT models: add onnx or "
                         f"tflite to {formats_flag} (e.g. {formats_flag}=saved_model,onnx)")
    if fp16 and "tflite" not in formats:
        raise ValueError(f"{fp16_flag} writes a float16 LiteRT model: add tflite to "
                         f"{formats_flag} (e.g. {formats_flag}=saved_model,tflite)")
    if not 0.0 <= int8_min_agreement <= 1.0:
        raise ValueError(f"{agreement_flag} is a fraction between 0 and 1; got "
                         f"{int8_min_agreement}")
    custom_formats = formats != list(DEFAULT_EXPORT_FORMATS)
    if not export_dir and (int8 or fp16 or custom_formats):
        chosen = " and ".join(([f"{formats_flag}={','.join(formats)}"] if custom_formats
                               else []) + ([int8_flag] if int8 else []) +
                              ([fp16_flag] if fp16 else []))
        raise ValueError(f"{chosen}: nothing is exported without --export_dir "
                         "(set --export_dir=DIR)")
    if export_dir and "://" not in export_dir and os.path.isfile(export_dir):
        raise ValueError(f"--export_dir {export_dir} is a file; give a directory (it is "
                         f"created if missing)")
    for name in portable:
        _check_portable(name, formats_flag, mixed_precision, export_dir)
    if int8 and "tflite" in formats and int8_min_agreement > 0 and \
            _missing(["ai_edge_litert"]):
        raise ValueError(f"{agreement_flag}={int8_min_agreement:g} runs model.int8.tflite "
                         f"beside model.tflite, which needs ai-edge-litert, not installed: "
                         f"pip install -r requirements.txt (or {agreement_flag}=0 to skip "
                         f"the check)")


def _check_portable(name: str, formats_flag: str, mixed_precision: str,
                    export_dir: Optional[str]) -> None:
    if mixed_precision != "float32":
        raise ValueError(f"{formats_flag}={name} exports a float32 graph, but "
                         f"--mixed_precision={mixed_precision} may train in 16 bits: use "
                         f"--mixed_precision=float32, or export the SavedModel only")
    if export_dir and "://" in export_dir:
        raise ValueError(f"{formats_flag}={name} writes to a local --export_dir; got "
                         f"{export_dir} (copy the files afterwards)")
    missing = _missing(_PACKAGES[name])
    if missing:
        raise ValueError(f"{formats_flag}={name} needs {', '.join(missing)}, not installed: "
                         f"pip install -r requirements.txt (or pip install {' '.join(missing)})")
