"""Sentence and sentence-pair classification: GLUE, CLUE, GoEmotions (multi-label), custom
TSV / JSON lines.

datasets.py (the data sets of --task_name as registry records), glue.py (GLUE's task
table and readers, custom tasks), clue.py (CLUE's files and submission format),
multilabel.py (GoEmotions, label sets, decision thresholds), long_text.py (how texts
longer than the model are read: --long_text),
features.py (packing, caches, tf.data), metrics.py (accuracy, F1, Matthews, Pearson /
Spearman; a task's metric set), postprocess.py (prediction files), export.py (raw-text
SavedModel and ONNX), job.py (run_classifier.py's job), __main__.py (`evaluate`: the
scorer of a predictions file).

May import: albert_tf.finetuning and everything below it; no other task family.
"""
