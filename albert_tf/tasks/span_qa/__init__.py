"""Span question answering: SQuAD v1.1 / v2.0 and CMRC 2018.

data.py (SQuAD JSON), datasets.py (the data sets: SQuAD v1.1, v2.0 and CMRC 2018, and
which one run_squad.py's flags and predict file name), alignment.py (paragraph tokens
mapped to original characters), features.py (windows, labels, TFRecord caches),
wordpiece.py (WordPiece alignment for Chinese), postprocess.py (n-best and the
predictions files), metrics.py (the official SQuAD scripts), cmrc_metrics.py and
cmrc_tokenize.py (the official CMRC 2018 metric), scoring.py (a predictions file scored
against a data file, and each data set's scoring of the job's predictions), export.py
(raw-text SavedModel and ONNX), job.py (run_squad.py's job), __main__.py
(`python -m albert_tf.tasks.span_qa evaluate`, the scorer).

May import: albert_tf.finetuning and everything below it; no other task family.
"""
