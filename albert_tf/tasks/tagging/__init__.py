"""Token classification (named-entity recognition): CoNLL-2003, CLUENER2020, MSRA, custom.

schemes.py (tag schemes: IOB1, IOB2/BIO, BIOES; conversion, the conlleval repair rule,
the allowed transitions), metrics.py (entity-level precision, recall and F1 as seqeval
1.2.2 computes them, token accuracy), readers.py (the files of each format, with one-line
errors naming file:line), features.py (words to sub-tokens, overlapping windows, each
word predicted from its max-context window; TFRecord caches), postprocess.py (the
predictions files, written and scored), datasets.py (the data sets: reader, split files,
predictions file), export.py (the SavedModel: raw text ->
entities; ONNX logits and `decode_onnx_logits`), job.py (run_ner.py's job), __main__.py
(`python -m albert_tf.tasks.tagging evaluate`). The model is
albert_tf.modeling.token_classifier (its CRF: albert_tf.modeling.crf).

May import: albert_tf.finetuning and everything below it; no other task family.
"""
