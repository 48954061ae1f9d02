"""Small Hugging Face ALBERT directories with random weights, for the pipeline tests and
the transformers oracle (tests/pipelines/test_transformers_oracle.py): every head, the real 30k-clean.model tokenizer.

    write_hf_dir(directory, head, spm_model_file, labels=None, seed=0, max_length=64)

Every kernel is drawn with std 0.1 (LayerNorms stay at 1 and 0): larger than training's
0.02 initialisation, so that tokens differ and predictions are far from ties (a float32
difference between TensorFlow and torch cannot flip a label).
"""
from __future__ import annotations

import os

import numpy as np

NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
NLI_LABELS = ["entailment", "neutral", "contradiction"]
SENTIMENT_LABELS = ["negative", "positive"]
GOEMOTIONS_LABELS = ["admiration", "anger", "joy", "sadness"]

# The heads and the convert --model that writes them.
HEADS = {"masked_lm": "pretrainer", "classifier": "classifier",
         "token_classifier": "token_classifier", "span": "span_labeler",
         "multiple_choice": "multiple_choice", "encoder": "encoder"}


def small_config(max_length: int = 64, vocab_size: int = 30000):
    from albert_tf.config import AlbertConfig

    return AlbertConfig(vocab_size=vocab_size, embedding_size=32, hidden_size=64,
                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        max_position_embeddings=max_length, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)


def write_hf_dir(directory: str, head: str, spm_model_file: str, labels=None, seed: int = 0,
                 max_length: int = 64, problem_type=None, vocab_file=None) -> str:
    """`spm_model_file` (SentencePiece), or None and `vocab_file` (WordPiece: the Chinese
    models' vocabulary, written as vocab.txt)."""
    import tensorflow as tf

    from albert_tf import convert
    from albert_tf.checkpoints import hf

    tf.keras.utils.set_random_seed(seed)
    vocab_size = 30000
    if vocab_file:
        with open(vocab_file, encoding="utf-8") as handle:
            vocab_size = sum(1 for _ in handle)
    model = convert.build_model(HEADS[head], small_config(max_length, vocab_size),
                                num_labels=len(labels) if labels else 1, num_choices=4)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "layer_norm" not in variable.path.lower() and "layernorm" not in variable.path.lower():
            # The masked LM's scores are tied to the word embeddings: spread them (std 1)
            # so that the top tokens are not near-ties among 30,000.
            std = 1.0 if head == "masked_lm" and "word_embeddings" in variable.path else 0.1
            variable.assign(rng.normal(0, std, variable.shape).astype(np.float32))
    hf.save_hf_checkpoint(model, directory, labels, spm_model_file=spm_model_file,
                          vocab_file=vocab_file, problem_type=problem_type)
    return directory


# The test models: name -> (head, labels, seed, problem_type).
MODEL_SET = {
    "sentiment": ("classifier", SENTIMENT_LABELS, 1, None),
    "multilabel": ("classifier", GOEMOTIONS_LABELS, 3, "multi_label_classification"),
    "regression": ("classifier", None, 4, None),
    "nli": ("classifier", NLI_LABELS, 2, None),
    "ner": ("token_classifier", NER_LABELS, 5, None),
    "qa": ("span", None, 6, None),
    "mlm": ("masked_lm", None, 7, None),
    "mc": ("multiple_choice", None, 8, None),
}


def write_model_set(root: str, spm_model_file: str, names=tuple(MODEL_SET)):
    """Writes the MODEL_SET directories `names` under `root`; returns name -> directory."""
    directories = {}
    for name in names:
        head, labels, seed, problem_type = MODEL_SET[name]
        extra = {"problem_type": problem_type} if problem_type else {}
        directories[name] = write_hf_dir(os.path.join(root, name), head, spm_model_file,
                                         labels, seed=seed, **extra)
    return directories


def write_sentence_transformers_dir(directory: str, spm_model_file: str, pooling=("mean",),
                                    normalize: bool = False, seed: int = 0,
                                    max_seq_length: int = 48, vocab_file=None,
                                    generation: int = 5) -> str:
    """A sentence-transformers directory of a random small ALBERT (weights as write_hf_dir's),
    written by `checkpoints.sentence_transformers` as sentence-transformers `generation`
    (5 or 6) lays it out."""
    import tensorflow as tf

    from albert_tf import convert
    from albert_tf.checkpoints import sentence_transformers

    tf.keras.utils.set_random_seed(seed)
    vocab_size = 30000
    if vocab_file:
        with open(vocab_file, encoding="utf-8") as handle:
            vocab_size = sum(1 for _ in handle)
    encoder = convert.build_model("encoder", small_config(64, vocab_size))
    rng = np.random.default_rng(seed)
    for variable in encoder.weights:
        if "layer_norm" not in variable.path.lower() and "layernorm" not in variable.path.lower():
            variable.assign(rng.normal(0, 0.1, variable.shape).astype(np.float32))
    sentence_transformers.save_sentence_transformers_dir(
        encoder, directory, pooling, normalize, max_seq_length, spm_model_file=spm_model_file,
        vocab_file=vocab_file, generation=generation)
    return directory


def write_official_dir(directory: str, hf_masked_lm_dir: str, spm_model_file: str):
    """A Hugging Face masked LM as an official download: TF1 checkpoint
    (model.ckpt-best), albert_config.json and the SentencePiece model. Returns the
    pretrainer written."""
    import shutil

    from albert_tf import convert, save_tf1_checkpoint
    from albert_tf.checkpoints import hf

    config = hf.config_from_hf_dir(hf_masked_lm_dir)
    model = convert.build_model("pretrainer", config)
    hf.load_hf_checkpoint(model, hf_masked_lm_dir)
    save_tf1_checkpoint(model, os.path.join(directory, "model.ckpt-best"))
    config.to_json_file(os.path.join(directory, "albert_config.json"))
    shutil.copyfile(spm_model_file, os.path.join(directory, "30k-clean.model"))
    return model

