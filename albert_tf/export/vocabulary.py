"""The vocabulary file beside an exported ONNX or LiteRT model, and the metadata naming it."""
from __future__ import annotations

import os
import shutil
from typing import Dict, Optional

from albert_tf import fileio


def copy_vocabulary(export_dir: str, spm_model_file: Optional[str] = None,
                    vocab_file: Optional[str] = None) -> Dict[str, str]:
    """Copies the vocabulary into `export_dir` (atomically): `spm_model_file`
    (SentencePiece; wins when both are given, as in the original) or `vocab_file`
    (WordPiece). Returns the metadata naming it: {"vocabulary_file": base name,
    "tokenizer": "sentencepiece" | "wordpiece"} (the `FullTokenizer` argument it is), or {}
    when neither is given."""
    vocabulary_file = spm_model_file or vocab_file
    if not vocabulary_file:
        return {}
    name = os.path.basename(vocabulary_file)
    target = os.path.join(export_dir, name)
    if os.path.abspath(target) != os.path.abspath(vocabulary_file):
        with fileio.atomic_path(target) as tmp:
            shutil.copyfile(vocabulary_file, tmp)
    return {"vocabulary_file": name,
            "tokenizer": "sentencepiece" if spm_model_file else "wordpiece"}
