"""Downstream tasks: readers, feature conversion, metrics and jobs (GLUE, SQuAD, RACE)."""
