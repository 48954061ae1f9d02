"""Token classification (named-entity recognition): CoNLL-2003, CLUENER2020, MSRA, custom.

schemes.py (tag schemes: IOB1, IOB2/BIO, BIOES; conversion, the conlleval repair rule,
the allowed transitions), metrics.py (entity-level precision, recall and F1 as seqeval
1.2.2 computes them, token accuracy), readers.py (the files of each format, with one-line
errors naming file:line). The CRF layer is a model layer: albert_tf.modeling.crf.

May import: albert_tf.finetuning and everything below it; no other task family.
"""
