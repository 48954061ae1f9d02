"""Distillation: a smaller student trained to copy a fine-tuned teacher (run_distill.py,
`albert_tf.distill`).

  students.py         the student's config (`tiny`, `small`, `layers:k`) and its weights
                      taken from the teacher where they fit
  teacher.py          the teacher read from any source `albert_tf.from_pretrained` reads,
                      and its family (classification, tagging, multiple choice, span QA)
  objective.py        the loss: the family's own loss on the labels, the teacher's soft
                      targets at a temperature, TinyBERT's hidden states (a projection
                      where the widths differ), MiniLMv2's self-attention relations
  job.py              the jobs (run_classifier.py's, run_ner.py's, run_race.py's,
                      run_squad.py's v1.1, with the student and the loss above): a normal
                      run directory, evaluated, exported; unlabelled transfer text for
                      classification
  keras_distiller.py  `albert_tf.distill`: the same student and loss in Keras' fit

Layer 7 (a program). May import every layer below and `albert_tf.keras_tasks` (it reads
teachers through `from_pretrained`'s sources); it runs the families' jobs.
See docs/fast_inference.md.
"""
