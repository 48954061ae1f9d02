"""The ALBERT network: layers, the encoder, the task heads and the task models.

layers.py (embeddings, attention, the post-LN block), encoder.py (AlbertEncoder:
factorized embedding + groups of shared blocks + pooler), heads.py (masked-LM,
sentence-order, classification, span and multiple-choice heads), models.py (the
pretrainer and the task models, outputs as dicts, and their losses),
crf.py (a linear-chain CRF: log-likelihood and constrained Viterbi decoding, for
token classification), parameter_counts.py (the paper's table, `python -m
albert_tf.modeling.parameter_counts`).

May import: albert_tf.config, albert_tf.errors, albert_tf.kernels.
"""
