"""Offline data preparation: SentencePiece training and pretraining TFRecords.

Modules (one job each):
  text_input         files -> documents of normalised sentences (gzip, BOM, CRLF, Gutenberg)
  sentence_split     rule-based sentence splitter for raw text (English and Chinese)
  zh_words           Chinese whole-word masking flags from a segmenter (optional rjieba)
  pairing            the original's SOP/NSP pair construction and truncate_seq_pair
  masking            whole-word n-gram masking with 80/10/10 replacement
  example_codec      tf.train.Example wire-format encoder for the fixed schema
  tfrecord           TFRecord framing and CRC32C in NumPy
  pipeline           options, blocks, worker tasks, shuffle-by-buckets, local runner
  beam_pipeline      the same tasks as an Apache Beam pipeline (optional extra)
CLIs: train_sentencepiece.py, create_pretraining_data.py.

`tokenization` and `fileio` below are `albert_tf.tokenization` and
`albert_tf.fileio` (private copies when `albert_tf` is not imported yet),
loaded without executing `albert_tf/__init__.py` (which imports TensorFlow and
Keras): the data path must start fast in every worker
process and run where TensorFlow is absent (the Beam workers).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType


def _load_light(submodule: str) -> ModuleType:
    """`albert_tf.<submodule>`, or a private copy of it if `albert_tf` is not imported yet.

    The private copy is registered as `data_prep._albert_tf_<submodule>`, never
    under the real name: a pre-registered `albert_tf.<submodule>` would stop
    the later real `import albert_tf` from binding it as a package attribute.
    """
    real = f"albert_tf.{submodule}"
    if real in sys.modules:
        return sys.modules[real]
    if "albert_tf" in sys.modules:
        return importlib.import_module(real)
    private = f"{__name__}._albert_tf_{submodule}"
    if private in sys.modules:
        return sys.modules[private]
    package = importlib.util.find_spec("albert_tf")
    if package is None or not package.submodule_search_locations:
        raise ImportError("albert_tf is not importable; install the project (pip install .)")
    location = list(package.submodule_search_locations)[0]
    spec = importlib.util.spec_from_file_location(private, f"{location}/{submodule}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[private] = module
    spec.loader.exec_module(module)
    return module


tokenization = _load_light("tokenization")
fileio = _load_light("fileio")
