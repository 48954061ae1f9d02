"""Task families, one package each: readers, features, metrics, post-processing, serving
modules and the family's fine-tuning job.

  classification/    GLUE, CLUE, custom TSV / JSON lines (run_classifier.py)
  span_qa/           SQuAD v1.1 / v2.0, CMRC 2018 (run_squad.py)
  multiple_choice/   RACE, C3 (run_race.py)
  squad.py           the span_qa names at their former paths, and
                     `python -m albert_tf.tasks.squad evaluate`, the former name of the
                     SQuAD / CMRC scorer `python -m albert_tf.tasks.span_qa evaluate`

A family may import albert_tf.finetuning and everything below it, never another family.
"""
