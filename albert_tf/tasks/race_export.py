"""RACE SavedModel: raw text in (article, question, 4 options), probabilities and letter out.

The raw-text signature repeats `albert_tf.tasks.race`'s feature conversion as
graph ops, so the served probabilities equal the Python path's:
normalisation and SentencePiece ids come from
`albert_tf.tokenization.InGraphTokenizer`; the "_" replacement, the qa
truncation (keep the last `max_qa_length` ids), the article truncation and the
`[CLS] article [SEP] qa [SEP]` packing are written here with ragged ops because
no tensorflow-text op has the original's RACE rules (its trimmers drop from the
end of each segment, never keep a suffix).

Signatures (see `RaceServingModule`):
  serving_default(article [B], question [B], options [B, 4]: tf.string)
      -> probabilities float32 [B, 4], predictions tf.string [B] ("A".."D"),
         prediction_ids int32 [B]
  serve_tokens(input_ids, input_mask, segment_ids: int32 [B, 4, S])
      -> the same outputs
The SavedModel loads with `tf.saved_model.load` when only TensorFlow and
tensorflow-text are imported.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

import tensorflow as tf

from albert_tf import export
from albert_tf.tasks import race


def qa_texts(question, options):
    """The original's question+option texts, on already-normalised strings.

    question: tf.string [B]; options: tf.string [B, C]. Returns tf.string [B, C]:
    the question with every "_" replaced by the option, or question + " " +
    option when it has no "_" (as `race.question_option_text`).
    """
    num_choices = tf.shape(options)[1]
    questions = tf.reshape(tf.repeat(question[:, None], num_choices, axis=1), [-1])
    flat_options = tf.reshape(options, [-1])
    parts = tf.strings.split(questions, sep="_")  # k underscores -> k + 1 parts
    lengths = parts.row_lengths()
    rows = parts.value_rowids()
    position = tf.range(tf.shape(parts.values, out_type=tf.int64)[0]) - tf.gather(
        parts.row_starts(), rows)
    is_last = position == tf.gather(lengths, rows) - 1
    joined = tf.where(is_last, parts.values,
                      tf.strings.join([parts.values, tf.gather(flat_options, rows)]))
    replaced = tf.strings.reduce_join(parts.with_values(joined), axis=1)
    appended = tf.strings.join([questions, flat_options], separator=" ")
    result = tf.where(lengths > 1, replaced, appended)
    return tf.reshape(result, tf.shape(options))


def _keep_first(ids: tf.RaggedTensor, counts) -> tf.RaggedTensor:
    positions = tf.ragged.range(ids.row_lengths())
    return tf.ragged.boolean_mask(ids, positions < counts[:, None])


def _keep_last(ids: tf.RaggedTensor, counts) -> tf.RaggedTensor:
    positions = tf.ragged.range(ids.row_lengths())
    start = ids.row_lengths() - counts
    return tf.ragged.boolean_mask(ids, positions >= start[:, None])


def _fill_rows(value, lengths, dtype=tf.int32) -> tf.RaggedTensor:
    return tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(lengths)], tf.constant(value, dtype)), lengths)


def pack_choices(article_ids: tf.RaggedTensor, qa_ids: tf.RaggedTensor, max_seq_length: int,
                 max_qa_length: int, cls_id: int, sep_id: int,
                 num_choices: int = race.NUM_CHOICES) -> Dict[str, tf.Tensor]:
    """`[CLS] article [SEP] qa [SEP]` per choice, as `race.choice_ids`.

    article_ids: int32 ragged [B, (T)]; qa_ids: int32 ragged [B * C, (T)] (row
    b * C + c is choice c of example b). Returns int32 `input_ids`,
    `input_mask`, `segment_ids` [B, C, S].
    """
    race.validate_lengths(max_seq_length, max_qa_length)
    qa_ids = tf.cast(qa_ids, tf.int32).with_row_splits_dtype(tf.int64)
    article_ids = tf.cast(article_ids, tf.int32).with_row_splits_dtype(tf.int64)
    batch = article_ids.nrows()
    context = tf.gather(article_ids, tf.repeat(tf.range(batch), num_choices))
    qa_len = tf.minimum(qa_ids.row_lengths(), max_qa_length)
    qa = _keep_last(qa_ids, qa_len)
    context_len = tf.minimum(context.row_lengths(), max_seq_length - 3 - qa_len)
    context = _keep_first(context, context_len)
    ones = tf.ones_like(qa_len)
    ids = tf.concat([_fill_rows(cls_id, ones), context, _fill_rows(sep_id, ones), qa,
                     _fill_rows(sep_id, ones)], axis=1)
    segments = tf.concat([_fill_rows(0, context_len + 2), _fill_rows(1, qa_len + 1)], axis=1)
    shape = [None, max_seq_length]
    flat = {"input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "segment_ids": segments.to_tensor(0, shape=shape)}
    return {name: tf.reshape(value, [-1, num_choices, max_seq_length])
            for name, value in flat.items()}


class RaceServingModule(tf.Module):
    """Serving wrapper of an `AlbertMultipleChoice` with `serving_default` (raw text)
    and `serve_tokens` (ids) signatures; see the module docstring.

    tokenizer: an `InGraphTokenizer` with the model's SentencePiece model and
    do_lower_case (it normalises the article, question and options as the
    Python reader does).
    """

    def __init__(self, model, tokenizer, max_seq_length: int, max_qa_length: int,
                 name: Optional[str] = None, layer_norm: str = "auto"):
        super().__init__(name=name)
        race.validate_lengths(max_seq_length, max_qa_length)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self.letters = tf.constant(list(race.LABELS), tf.string)
        self._outputs = export.model_outputs(model, ["probabilities", "predictions"],
                                             layer_norm)
        self.serving_default = tf.function(self._serve_text, input_signature=[
            tf.TensorSpec([None], tf.string, "article"),
            tf.TensorSpec([None], tf.string, "question"),
            tf.TensorSpec([None, race.NUM_CHOICES], tf.string, "options")])
        self.serve_tokens = tf.function(self._serve_tokens, input_signature=[
            export.token_input_signature(max_seq_length, batch_dims=(None, race.NUM_CHOICES))])

    def features(self, article, question, options) -> Dict[str, tf.Tensor]:
        """Raw strings -> int32 features [B, 4, S] (equal to `race.featurize`'s)."""
        tok = self.tokenizer
        texts = qa_texts(tok.preprocess(question), tok.preprocess(options))
        qa_ids = tok.encode_preprocessed(tf.reshape(texts, [-1]))
        article_ids = tok.encode_preprocessed(tok.preprocess(article))
        return pack_choices(article_ids, qa_ids, self.max_seq_length, self.max_qa_length,
                            tok.cls_id, tok.sep_id)

    def _finish(self, features):
        outputs = self._outputs(features)
        ids = tf.cast(outputs["predictions"], tf.int32)
        return {"probabilities": outputs["probabilities"],
                "predictions": tf.gather(self.letters, ids), "prediction_ids": ids}

    def _serve_text(self, article, question, options):
        return self._finish(self.features(article, question, options))

    def _serve_tokens(self, features):
        return self._finish(features)

    def signatures(self) -> Dict[str, Callable]:
        return {"serving_default": self.serving_default, "serve_tokens": self.serve_tokens}


def export_saved_model(model, export_dir: str, spm_model_file: str, max_seq_length: int,
                       max_qa_length: int, do_lower_case: bool = True,
                       layer_norm: str = "auto") -> str:
    """Writes `model` (an `AlbertMultipleChoice` with its final weights) as a SavedModel
    with the raw-text and token signatures, atomically; returns export_dir. `layer_norm`
    as in `export.call_for_export`."""
    from albert_tf.tokenization import InGraphTokenizer

    tokenizer = InGraphTokenizer(spm_model_file, do_lower_case=do_lower_case)
    module = RaceServingModule(model, tokenizer, max_seq_length, max_qa_length,
                               layer_norm=layer_norm)
    return export.save_serving_model(export_dir, module, module.signatures())
