"""Multiple choice reading comprehension: RACE and C3.

race.py (RACE's files, features, caches), c3.py (C3's files), export.py (raw-text
SavedModel and ONNX), job.py (run_race.py's job).

May import: albert_tf.finetuning and everything below it; no other task family.
"""
