"""What an export says of itself, read and written without TensorFlow.

  EXPORT_RECORD          albert_tf_export.json in an --export_dir: the task, labels,
                         max_seq_length, casing and vocabulary of the export, whatever its
                         formats (`albert_tf.pipeline` reads a SavedModel-only export by it)
  write_export_record    writes it, the vocabulary copied beside it
  read_onnx_metadata     an ONNX file's albert_tf metadata (the `onnx` package only)

Pipelines over model.onnx or model.tflite import neither TensorFlow nor the modules that
build those files.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Mapping, Optional

from albert_tf import fileio
from albert_tf.export.vocabulary import copy_vocabulary

EXPORT_RECORD = "albert_tf_export.json"
ONNX_METADATA_PREFIX = "albert_tf."


def write_export_record(export_dir: str, metadata: Mapping, spm_model_file: Optional[str] = None,
                        vocab_file: Optional[str] = None,
                        albert_config: Optional[Mapping] = None) -> str:
    """Writes EXPORT_RECORD in `export_dir`: `metadata` (a PortableModel's), the
    vocabulary's name (the vocabulary copied beside it) and `albert_config` (the model's
    albert_config.json values: with them `albert_tf.from_pretrained` rebuilds the model
    and reads the SavedModel's weights). Returns the record's path."""
    values = dict(metadata)
    if albert_config is not None:
        values["albert_config"] = dict(albert_config)
    values.update(copy_vocabulary(export_dir, spm_model_file, vocab_file))
    path = os.path.join(export_dir, EXPORT_RECORD)
    fileio.atomic_write_text(path, json.dumps(values, indent=2, sort_keys=True) + "\n")
    return path


def read_onnx_metadata(path: str) -> Dict[str, object]:
    """The albert_tf metadata of an exported ONNX file (JSON values decoded)."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    return {entry.key[len(ONNX_METADATA_PREFIX):]: json.loads(entry.value)
            for entry in model.metadata_props if entry.key.startswith(ONNX_METADATA_PREFIX)}
