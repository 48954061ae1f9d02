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
  beam_dask          what that pipeline needs on Beam's DaskRunner (cluster checks, waiting)
CLIs: train_sentencepiece.py, create_pretraining_data.py.

`tokenization` and `fileio` below are `albert_tf.tokenization` and
`albert_tf.fileio`: importing them does not load TensorFlow (`albert_tf/__init__.py`
imports its models lazily), so the data path starts fast in every worker process
and runs where TensorFlow is absent (the Beam workers).
"""
from __future__ import annotations

from albert_tf import fileio, tokenization  # noqa: F401  (re-exported for data_prep modules)
