"""RACE and C3 SavedModels: raw text in (article, question, options), probabilities out.

The raw-text signature repeats `albert_tf.tasks.multiple_choice.race`'s feature conversion as
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
The tokenizer is SentencePiece (`InGraphTokenizer`) or WordPiece
(`InGraphWordPieceTokenizer`), as `tokenization.in_graph_tokenizer` builds it.

C3 (`C3ServingModule`): the same graph-side repetition of C3's features
(`albert_tf.tasks.multiple_choice.features.featurize_c3`: `[CLS] context [SEP] question
[SEP] option [SEP]` with the baseline's three-way truncation, `truncate_lengths`), and
an absent option is an empty string:
  serving_default(context [B], question [B], options [B, 4]: tf.string; "" = no option)
      -> probabilities float32 [B, 4] (exactly 0 for absent options),
         prediction_ids int32 [B] (never an absent option), predictions tf.string [B]
         (the chosen option's text); a row without any option gets 0.25 each and
         prediction 0 (give every question at least one option)
  serve_tokens(input_ids, input_mask, segment_ids: int32 [B, 4, S], choice_mask int32 [B, 4])
      -> the same outputs but `predictions`
The SavedModel loads with `tf.saved_model.load` when only TensorFlow and
tensorflow-text are imported.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import tensorflow as tf

from albert_tf import export
from albert_tf.modeling.models import MASKED_CHOICE_LOGIT
from albert_tf.tasks import registry
from albert_tf.tasks.multiple_choice.features import (LABELS, NUM_CHOICES, validate_c3_length,
                                                   validate_race_lengths)

# A masked choice's logit: exp() of it underflows to exactly 0 in float32, while a
# finite value keeps log_softmax finite for the real choices.
MASKED_LOGIT = MASKED_CHOICE_LOGIT


def mask_choice_logits(logits, choice_mask):
    """float32 logits [B, C] with the choices where `choice_mask` [B, C] is 0 set to
    MASKED_LOGIT, so softmax gives them probability 0 and argmax never picks them."""
    logits = tf.cast(logits, tf.float32)
    return tf.where(tf.cast(choice_mask, tf.bool), logits, tf.constant(MASKED_LOGIT, tf.float32))


def masked_outputs(outputs, choice_mask) -> Dict[str, tf.Tensor]:
    """`logits`, `probabilities` [B, C] and `predictions` int32 [B] of a multiple-choice
    model's outputs, with the choices outside `choice_mask` masked (what
    `AlbertMultipleChoice` does itself when its inputs carry `choice_mask`)."""
    logits = mask_choice_logits(outputs["logits"], choice_mask)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}


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


def _dense_choices(ids, segments, max_seq_length: int, num_choices: int):
    """Ragged rows [B*C, (T)] of ids and segment ids -> the model's int32 [B, C, S] features."""
    shape = [None, max_seq_length]
    flat = {"input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "segment_ids": segments.to_tensor(0, shape=shape)}
    return {name: tf.reshape(value, [-1, num_choices, max_seq_length])
            for name, value in flat.items()}


def pack_choices(article_ids: tf.RaggedTensor, qa_ids: tf.RaggedTensor, max_seq_length: int,
                 max_qa_length: int, cls_id: int, sep_id: int,
                 num_choices: int = NUM_CHOICES) -> Dict[str, tf.Tensor]:
    """`[CLS] article [SEP] qa [SEP]` per choice, as `features.race_choice_ids`.

    article_ids: int32 ragged [B, (T)]; qa_ids: int32 ragged [B * C, (T)] (row
    b * C + c is choice c of example b). Returns int32 `input_ids`,
    `input_mask`, `segment_ids` [B, C, S].
    """
    validate_race_lengths(max_seq_length, max_qa_length)
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
    return _dense_choices(ids, segments, max_seq_length, num_choices)



def exit_outputs(model) -> List[str]:
    """["exit_layer"] for a model with an early-exit rule (each question's exit), else []."""
    return ["exit_layer"] if getattr(model, "early_exit", None) is not None else []


def exit_layer_of(outputs) -> Dict[str, tf.Tensor]:
    return {"exit_layer": outputs["exit_layer"]} if "exit_layer" in outputs else {}

class RaceServingModule(tf.Module):
    """Serving wrapper of an `AlbertMultipleChoice` with `serving_default` (raw text)
    and `serve_tokens` (ids) signatures; see the module docstring.

    tokenizer: `tokenization.in_graph_tokenizer(...)` of the model's vocabulary and
    do_lower_case (its `preprocess` normalises the article, question and options as
    the Python reader does: `preprocess_text` for SentencePiece, nothing for WordPiece).
    """

    def __init__(self, model, tokenizer, max_seq_length: int, max_qa_length: int,
                 name: Optional[str] = None, layer_norm: str = "auto"):
        super().__init__(name=name)
        validate_race_lengths(max_seq_length, max_qa_length)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self.letters = tf.constant(list(LABELS), tf.string)
        self._outputs = export.model_outputs(model, ["probabilities", "predictions"]
                                             + exit_outputs(model), layer_norm)
        self.serving_default = tf.function(self._serve_text, input_signature=[
            tf.TensorSpec([None], tf.string, "article"),
            tf.TensorSpec([None], tf.string, "question"),
            tf.TensorSpec([None, NUM_CHOICES], tf.string, "options")])
        self.serve_tokens = tf.function(self._serve_tokens, input_signature=[
            export.token_input_signature(max_seq_length, batch_dims=(None, NUM_CHOICES))])

    def features(self, article, question, options) -> Dict[str, tf.Tensor]:
        """Raw strings -> int32 features [B, 4, S] (equal to `features.featurize_race`'s)."""
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
                "predictions": tf.gather(self.letters, ids), "prediction_ids": ids,
                **exit_layer_of(outputs)}

    def _serve_text(self, article, question, options):
        return self._finish(self.features(article, question, options))

    def _serve_tokens(self, features):
        return self._finish(features)

    def signatures(self) -> Dict[str, Callable]:
        return {"serving_default": self.serving_default, "serve_tokens": self.serve_tokens}


def truncate_lengths(lengths, budget):
    """`features.truncate_lengths` on int64 [N, K] lengths (K segments in tie order), budget a
    Python int: the same level search, vectorised (a bounded binary search)."""
    lengths = tf.cast(lengths, tf.int64)
    excess = tf.reduce_sum(lengths, axis=1) - budget                              # [N]

    def removed(level):                                                           # [N]
        return tf.reduce_sum(tf.maximum(lengths - level[:, None], 0), axis=1)

    def halve(lo, hi):
        mid = (lo + hi) // 2
        fits = removed(mid) <= excess
        return tf.where(fits, lo, mid + 1), tf.where(fits, mid, hi)

    # The smallest level whose cut removes at most `excess` (64 halvings cover any int64).
    lo, _ = tf.while_loop(lambda lo, hi: tf.reduce_any(lo < hi), halve,
                          (tf.zeros_like(excess), tf.reduce_max(lengths, axis=1)),
                          maximum_iterations=64)
    level = lo[:, None]
    rest = (excess - removed(lo))[:, None]
    reaches = lengths >= level
    rank = tf.cumsum(tf.cast(reaches, tf.int64), axis=1, exclusive=True)
    cut = tf.where(reaches & (rank < rest), level - 1, tf.minimum(lengths, level))
    return tf.where(excess[:, None] > 0, cut, lengths)


def pack_c3_choices(context_ids: tf.RaggedTensor, question_ids: tf.RaggedTensor,
                    option_ids: tf.RaggedTensor, max_seq_length: int, cls_id: int, sep_id: int,
                    num_choices: int = NUM_CHOICES) -> Dict[str, tf.Tensor]:
    """`[CLS] context [SEP] question [SEP] option [SEP]` per choice, as `features.c3_choice_ids`.

    context_ids, question_ids: int ragged [B, (T)]; option_ids: int ragged [B * C, (T)]
    (row b * C + c is option c of example b). Returns int32 `input_ids`,
    `input_mask`, `segment_ids` [B, C, S].
    """
    def prepare(ids):
        return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)

    option_ids = prepare(option_ids)
    rows = tf.repeat(tf.range(prepare(context_ids).nrows()), num_choices)
    context = tf.gather(prepare(context_ids), rows)
    question = tf.gather(prepare(question_ids), rows)
    kept = truncate_lengths(tf.stack([context.row_lengths(), option_ids.row_lengths(),
                                      question.row_lengths()], axis=1), max_seq_length - 4)
    context = _keep_first(context, kept[:, 0])
    option = _keep_first(option_ids, kept[:, 1])
    question = _keep_first(question, kept[:, 2])
    ones = tf.ones_like(kept[:, 0])
    ids = tf.concat([_fill_rows(cls_id, ones), context, _fill_rows(sep_id, ones), question,
                     _fill_rows(sep_id, ones), option, _fill_rows(sep_id, ones)], axis=1)
    segments = tf.concat([_fill_rows(0, kept[:, 0] + 2),
                          _fill_rows(1, kept[:, 1] + kept[:, 2] + 2)], axis=1)
    return _dense_choices(ids, segments, max_seq_length, num_choices)


class C3ServingModule(tf.Module):
    """Serving wrapper of an `AlbertMultipleChoice` for C3: raw `context`, `question` and
    `options` [B, 4] with "" for absent options (`serving_default`), or token ids with
    `choice_mask` (`serve_tokens`); absent options are masked. See the module docstring.

    tokenizer: `tokenization.in_graph_tokenizer(...)` of the model's vocabulary.
    """

    def __init__(self, model, tokenizer, max_seq_length: int, name: Optional[str] = None,
                 layer_norm: str = "auto"):
        super().__init__(name=name)
        validate_c3_length(max_seq_length)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        # The model masks the absent choices itself, from the `choice_mask` feature.
        self._outputs = export.model_outputs(model, ["probabilities", "predictions"]
                                             + exit_outputs(model), layer_norm)
        self.serving_default = tf.function(self._serve_text, input_signature=[
            tf.TensorSpec([None], tf.string, "context"),
            tf.TensorSpec([None], tf.string, "question"),
            tf.TensorSpec([None, NUM_CHOICES], tf.string, "options")])
        token_signature = export.token_input_signature(max_seq_length,
                                                       batch_dims=(None, NUM_CHOICES))
        token_signature["choice_mask"] = tf.TensorSpec([None, NUM_CHOICES], tf.int32,
                                                       "choice_mask")
        self.serve_tokens = tf.function(self._serve_tokens, input_signature=[token_signature])

    def features(self, context, question, options) -> Dict[str, tf.Tensor]:
        """Raw strings -> int32 features [B, 4, S] and `choice_mask` [B, 4] (equal to
        `features.featurize_c3`'s for the same texts)."""
        tok = self.tokenizer
        option_ids = tok.encode_preprocessed(tok.preprocess(tf.reshape(options, [-1])))
        features = pack_c3_choices(tok.encode_preprocessed(tok.preprocess(context)),
                                   tok.encode_preprocessed(tok.preprocess(question)),
                                   option_ids, self.max_seq_length, tok.cls_id, tok.sep_id)
        # Blank options are absent, as the Python reader refuses a blank choice.
        features["choice_mask"] = tf.cast(tf.not_equal(tf.strings.strip(options), ""),
                                          tf.int32)
        return features

    def _finish(self, features):
        outputs = self._outputs(features)
        return {"probabilities": outputs["probabilities"],
                "prediction_ids": outputs["predictions"], **exit_layer_of(outputs)}

    def _serve_text(self, context, question, options):
        result = self._finish(self.features(context, question, options))
        result["predictions"] = tf.gather(options, result["prediction_ids"], batch_dims=1)
        return result

    def _serve_tokens(self, features):
        return self._finish(features)

    def signatures(self) -> Dict[str, Callable]:
        return {"serving_default": self.serving_default, "serve_tokens": self.serve_tokens}


def export_saved_model(model, export_dir: str, spm_model_file: Optional[str],
                       max_seq_length: int, max_qa_length: int, do_lower_case: bool = True,
                       layer_norm: str = "auto", vocab_file: Optional[str] = None,
                       task_name: str = "race") -> str:
    """Writes `model` (an `AlbertMultipleChoice` with its final weights) as a SavedModel
    with the raw-text and token signatures, atomically; returns export_dir. The
    vocabulary: `spm_model_file` (SentencePiece, wins when both are given) or
    `vocab_file` (WordPiece). `task_name` "race" or "c3" (then `max_qa_length` is
    unused). `layer_norm` as in `export.call_for_export`."""
    from albert_tf.tokenization import in_graph_tokenizer

    tokenizer = in_graph_tokenizer(vocab_file=vocab_file, spm_model_file=spm_model_file,
                                   do_lower_case=do_lower_case)
    data = registry.get("multiple_choice", task_name).settings["data"]  # datasets.py's
    module = data.serving_module(model, tokenizer, max_seq_length, max_qa_length, layer_norm)
    return export.save_serving_model(export_dir, module, module.signatures())


def portable_model(model, task_name: str, max_seq_length: int, max_qa_length: int,
                   do_lower_case: bool = True):
    """The multiple-choice model's ONNX / LiteRT function (an
    `export.portable.PortableModel`): int32 [B, 4, max_seq_length] `input_ids`,
    `input_mask`, `segment_ids` (and `choice_mask` [B, 4], 0 for an absent option, for C3)
    -> `probabilities` float32 [B, 4] and `predictions` int32 [B] (the chosen option's
    index), as `serve_tokens` returns."""
    from albert_tf.export import onnx as onnx_export, portable
    data = registry.get("multiple_choice", task_name).settings["data"]
    signature = export.token_input_signature(max_seq_length, batch_dims=(None, NUM_CHOICES))
    if data.masked:
        signature["choice_mask"] = tf.TensorSpec([None, NUM_CHOICES], tf.int32,
                                                 "choice_mask")
    fn = onnx_export.model_function(model, ["probabilities", "predictions"] + exit_outputs(model),
                                    argmax_of="probabilities", choice_mask=data.masked)
    metadata = {"task": "multiple_choice", "task_name": task_name,
                "num_choices": NUM_CHOICES, "max_seq_length": max_seq_length,
                "max_qa_length": max_qa_length if data.uses_qa_length else None,
                "do_lower_case": do_lower_case, **portable.light_inference_metadata(model)}
    return portable.PortableModel(fn, signature, metadata)
