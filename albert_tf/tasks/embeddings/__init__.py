"""Sentence embeddings (run_embeddings.py): an encoder and its pooling trained so that the
cosine similarity of two texts' vectors says how alike they are.

datasets.py (STS-B, LCQMC, custom pairs / triplets / texts as registry records), features.py
(packing, caches, tf.data), job.py (the options, the losses as a training objective, the
job), metrics.py (Spearman and Pearson of cosine similarities, as sentence-transformers'
EmbeddingSimilarityEvaluator), postprocess.py (similarity files), export.py (the
SavedModel: text -> embedding; ONNX / LiteRT; a sentence-transformers directory),
__main__.py (`evaluate`: the scorer of a similarity file).

May import: albert_tf.finetuning and everything below it; no other task family.
"""
