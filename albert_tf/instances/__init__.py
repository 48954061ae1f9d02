"""Pretraining instances: the original's sentence pairs (SOP) and whole-word n-gram masking,
as pure Python (no TensorFlow: data_prep's workers import them).

  pairing.py   documents -> sentence pairs (create_instances_from_document's rules)
  masking.py   a pair -> masked ids and targets (create_masked_lm_predictions' rules)
  seeds.py     derive_seed: every draw's generator, seeded from what it is for

data_prep builds pretraining TFRecords with them; the Keras masked LM
(`keras_tasks.masked_lm`) builds its instances in memory with them, pass by pass.

May import: the foundation (errors) only.
"""
