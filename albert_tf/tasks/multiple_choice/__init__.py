"""Multiple choice reading comprehension: RACE and C3.

datasets.py (RACE and C3 as registry records, with what differs between them), race.py
and c3.py (reading their files), features.py (features, TFRecord caches, tf.data),
metrics.py (accuracy overall and per level), postprocess.py (probabilities -> the
prediction files; scoring them), export.py (raw-text SavedModel and ONNX), job.py
(run_race.py's job), __main__.py (`evaluate`: the predictions file's accuracy).

May import: albert_tf.finetuning and everything below it; no other task family.
"""
