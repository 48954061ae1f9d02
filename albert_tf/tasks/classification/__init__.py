"""Sentence and sentence-pair classification: GLUE, CLUE, custom TSV / JSON lines.

glue.py (readers, features, caches), clue.py (CLUE's files and submission format),
metrics.py (accuracy, F1, Matthews, Pearson / Spearman), export.py (raw-text SavedModel
and ONNX), job.py (run_classifier.py's job).

May import: albert_tf.finetuning and everything below it; no other task family.
"""
