"""Task families, one package each and all of one shape: `datasets` (the family's data sets,
registered in `registry`), `features`, `job`, `metrics`, `postprocess`, `export` and
`__main__` (`python -m albert_tf.tasks.<family> evaluate`, the family's scorer).

  classification/    GLUE, CLUE, custom TSV / JSON lines (run_classifier.py)
  span_qa/           SQuAD v1.1 / v2.0, CMRC 2018 (run_squad.py)
  multiple_choice/   RACE, C3 (run_race.py)
  tagging/           CoNLL-2003, CLUENER2020, MSRA, custom NER files (run_ner.py)
  registry.py        every family's data sets by name (`registry.get(family, name)`)
  squad.py           the span_qa names at their former paths, and
                     `python -m albert_tf.tasks.squad evaluate`, the former name of the
                     SQuAD / CMRC scorer `python -m albert_tf.tasks.span_qa evaluate`

A family may import albert_tf.finetuning, the registry and everything below them, never
another family.
"""
