"""`AlbertTagger`: sentences -> a label per word (named-entity recognition), run_ner.py's
model and windows.

    tagger = albert_tf.from_pretrained("albert_base_v2", "token-classification",
                                       labels=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    tagger.compile()                                  # the original's AdamW, warmup, decay
    tagger.fit(sentences, tags, batch_size=32, epochs=3)
    tagger.predict_tags([["Alice", "lives", "in", "Paris"]])
        -> [["B-PER", "O", "O", "B-LOC"]]
    tagger.score(dev_sentences, dev_tags)             # entity precision / recall / F1

Sentences are lists of words, or raw texts split into words (`tagging_inputs.py`). Each
sentence becomes run_ner.py's windows; each word is labelled at its first sub-token and
predicted from its max-context window. The loss is run_ner.py's: the mean over the
batch's labelled words of the cross-entropy, or with `use_crf` of a linear-chain CRF's
negative log-likelihood over each window's words (the CRF's transitions are the model's
variables, so the task computes this loss itself: `compile(loss=...)` replaces it).
Decoding is Viterbi under the tag scheme's constraints (no I-X after O) when the network
has them (`constrain_decoding`, the default), for both heads.

`predict` returns the predicted label ids per word, int32 [N, W] (W the most words of a
sentence, -1 past a sentence's end); `predict_tags` the label names.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks import tagging_inputs
from albert_tf.keras_tasks.inputs import DEFAULT_BATCH_SIZE
from albert_tf.keras_tasks.metrics import WordAccuracy
from albert_tf.keras_tasks.exits import ExitTraining
from albert_tf.keras_tasks.task import Task
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.tasks.tagging import metrics, schemes
from albert_tf.tasks.tagging import export as tagging_export


def default_doc_stride(sequence_length: int) -> int:
    """run_ner.py's --doc_stride default: 64, or what fits in a window."""
    return min(tagging_export.DEFAULT_DOC_STRIDE, sequence_length - 2)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTagger(ExitTraining, Task):
    """An `AlbertTokenClassifier` network on sentences (see the module docstring).

    Args:
      network: an `AlbertTokenClassifier` (softmax or CRF; its `allowed` transitions
        constrain decoding).
      preprocessor: an `AlbertPreprocessor` (its vocabulary, casing and sequence_length
        make the windows).
      labels: the label names, index = label id; with "O", in `tag_scheme`.
      tag_scheme: "iob2" or "bioes", the labels' scheme.
      doc_stride: sub-tokens between the windows of a long sentence (default run_ner.py's).
      word_split: how a raw text is split into words ("basic" or "characters").
    Calling it on token features (and `word_mask`) returns float32 logits [B, S, K].
    """

    task_name = "token-classification"
    inputs_in_python = True  # a tf.data.Dataset is read into memory (dataset_rows)
    reads_pooled_output = False

    def __init__(self, network: AlbertTokenClassifier, preprocessor=None,
                 labels: Sequence[str] = (), tag_scheme: str = "iob2",
                 doc_stride: Optional[int] = None, word_split: str = "basic", **kwargs):
        super().__init__(network, preprocessor, **kwargs)
        self.labels = [str(name) for name in labels]
        if word_split not in tagging_inputs.WORD_SPLITS:
            raise UserValueError(f"word_split={word_split!r}: one of "
                                 f"{', '.join(tagging_inputs.WORD_SPLITS)}")
        self.word_split = word_split
        length = preprocessor.sequence_length if preprocessor is not None else \
            network.config.max_position_embeddings
        self.doc_stride = default_doc_stride(length) if doc_stride is None else int(doc_stride)
        try:
            self.tag_scheme = tagging_export.check_settings(
                self.labels, tag_scheme, length, self.doc_stride, network.num_labels)
        except ValueError as error:
            raise UserValueError(f"token-classification: {error}") from None

    @property
    def num_classes(self) -> int:
        return self.network.num_labels

    @property
    def use_crf(self) -> bool:
        return self.network.use_crf

    def call(self, features, training=False):
        network = self.network
        if (training and network.exit_heads != "none") or (
                not training and network.early_exit is not None):
            # The exits' logits (training), or each row's at the layer it exited at.
            return tf.cast(self.exit_outputs(features, training)["logits"], tf.float32)
        return tf.cast(network.logits(features, training=training), tf.float32)

    # --- loss, metrics -----------------------------------------------------------------------

    def default_loss(self):
        return None  # `task_loss`: the CRF's needs the network's transitions

    def task_loss(self, y, y_pred):
        """run_ner.py's: the batch's summed loss over its labelled words, per word."""
        terms = self.network.loss_terms(y_pred, y)
        scored = tf.reduce_sum(terms["scored"])
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            # Per word of the global batch, as run_ner.py: this replica's sum over all the
            # replicas' words, times N (compute_loss divides each replica's loss by N).
            scored = context.all_reduce(tf.distribute.ReduceOp.SUM, scored) / float(
                context.num_replicas_in_sync)
        return tf.math.divide_no_nan(tf.reduce_sum(terms["loss_sum"]), scored)

    def default_metrics(self):
        return [WordAccuracy(name="word_accuracy")]

    # --- data ------------------------------------------------------------------------------

    def windows(self, sentences) -> Dict[str, np.ndarray]:
        """run_ner.py's windows of `sentences` (see `tagging_inputs.windows`)."""
        return tagging_inputs.windows(sentences, self.python_tokenizer, self.labels,
                                      self.preprocessor.sequence_length, self.doc_stride)

    def dataset(self, x, y=None, batch_size=None, needs_labels=False, shuffle=False):
        if needs_labels and y is None:
            raise UserValueError("token-classification: fit and evaluate need tags: "
                                 "fit(x=sentences, y=tags), one tag per word")
        sentences = tagging_inputs.sentences_of(x, y, self.labels, self.word_split,
                                                 self.tag_scheme)
        return tagging_inputs.window_dataset(self.windows(sentences), y is not None,
                                             batch_size or DEFAULT_BATCH_SIZE, shuffle)

    # --- prediction --------------------------------------------------------------------------

    def predict_step(self, data):
        features = data[0] if isinstance(data, tuple) else data
        return self.network.decode(self(features, training=False), features["word_mask"])

    def predict(self, x, batch_size=None, **kwargs) -> np.ndarray:
        """Each word's predicted label id, int32 [N, W] (-1 past a sentence's words)."""
        sentences = tagging_inputs.sentences_of(self.in_memory(x)[0], None, self.labels,
                                                self.word_split)
        arrays = self.windows(sentences)
        if not len(arrays["input_ids"]):
            predictions = np.zeros((0, self.preprocessor.sequence_length), np.int32)
        else:
            dataset = tagging_inputs.window_dataset(arrays, False,
                                                    batch_size or DEFAULT_BATCH_SIZE, False)
            predictions = keras.Model.predict(self, dataset, **kwargs)
        return tagging_inputs.merged_word_ids(arrays, predictions, sentences,
                                              self.labels.index(schemes.OUTSIDE))

    def predict_tags(self, x, batch_size=None, **kwargs) -> List[List[str]]:
        """Each word's predicted label name, one list per sentence."""
        ids = self.predict(x, batch_size, **kwargs)
        return [[self.labels[i] for i in row if i >= 0] for row in ids]

    def score(self, x, y=None, batch_size=None, **kwargs) -> Dict[str, float]:
        """run_ner.py's evaluation of the predictions against the tags y (or those of a
        dataset x of (sentences, tags)): entity
        `precision`, `recall`, `f1` (micro; conlleval's chunks, as seqeval's default),
        `token_accuracy`, and `precision_X` / `recall_X` / `f1_X` per entity type X."""
        x, y = self.in_memory(x, y)
        if y is None:
            raise UserValueError("token-classification: score needs tags: score(x=sentences, "
                                 "y=tags), one tag per word")
        sentences = tagging_inputs.sentences_of(x, y, self.labels, self.word_split,
                                                 self.tag_scheme)
        predicted = self.predict_tags([s.words for s in sentences], batch_size, **kwargs)
        gold = [schemes.convert(s.tags, self.tag_scheme, "iob2") for s in sentences]
        found = metrics.entity_scores(gold, [schemes.repair(schemes.convert(
            tags, self.tag_scheme, "iob2"), "iob2")[0] for tags in predicted])
        result = {key: found[key] for key in ("precision", "recall", "f1", "token_accuracy")}
        for kind, figures in sorted(found["per_type"].items()):
            for name in ("precision", "recall", "f1"):
                result[f"{name}_{kind}"] = figures[name]
        return result

    # --- serving ----------------------------------------------------------------------------

    def export(self, filepath, format="saved_model", verbose=None, input_signature=None, *,
               int8: bool = False, fp16: bool = False, check_data=None, **kwargs):
        """Writes run_ner.py's export to `filepath`: a SavedModel finding entities in raw
        text (`serving_default`) and pre-split words (`serve_words`), and / or "onnx",
        "tflite" ("litert") on token features, with the vocabulary and
        albert_tf_export.json, for `albert_tf.pipeline("token-classification", ...)`.
        `check_data`: sentences the int8 files are checked on. Returns {"export_dir", and
        the portable files' paths}."""
        from albert_tf.keras_tasks import exporting

        exporting.check_arguments(input_signature, kwargs, "raw text, words and token ids",
                                  "format, int8, fp16, check_data, int8_min_agreement")
        return exporting.export_tagger(self, filepath, format, int8=int8, fp16=fp16,
                                       check_data=check_data, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(labels=self.labels, tag_scheme=self.tag_scheme,
                      doc_stride=self.doc_stride, word_split=self.word_split)
        return config
