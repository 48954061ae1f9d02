"""Distillation: a smaller student trained to copy a fine-tuned teacher (run_distill.py).

  students.py   the student's config (`tiny`, `small`, `layers:k`) and its weights taken
                from the teacher where they fit
  teacher.py    the teacher read from any source `albert_tf.from_pretrained` reads
  objective.py  the loss: the teacher's soft targets at a temperature, plus the labels
  job.py        the job (run_classifier.py's, with the student and the loss above): a
                normal run directory, evaluated, exported

Layer 7 (a program). May import every layer below and `albert_tf.keras_tasks` (it reads
teachers through `from_pretrained`'s sources); it runs the classification family's job.
See docs/fast_inference.md.
"""
