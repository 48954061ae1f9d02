"""GLUE, CLUE and custom classifiers served: raw text in, label names out.

Signatures (see `ClassifierServingModule`):
  serving_default(text_a [B][, text_b [B]]: tf.string)
      -> probabilities float32 [B, K], predictions tf.string [B] (label names; the float32
         score for regression)
      and logits float32 [B, K] (what a long text's windows aggregate)
      multi-label: probabilities float32 [B, K] (a sigmoid per label), predictions int32
         [B, K] (1: above the label's threshold), labels tf.string [B, M] (those labels'
         names in label order, padded with "" to the longest row's M)
      with --long_text=windows or head_tail (`long_text.py`), also num_windows int32 [B]:
         the inputs each text was read as (1 but for windows over a long text)
  serve_tokens(input_ids, input_mask, segment_ids: int32 [B, S]) -> the same outputs (one
      input per row: the windows are the raw-text signature's)
`export_classifier` writes that SavedModel for run_classifier.py; `classifier_portable_model`
is the ONNX / LiteRT function (token ids in). Raw text is tokenized and packed in the graph
with `albert_tf.export.pack_pair`, as `albert_tf.tasks.classification.glue` packs it in
Python. The SavedModel loads with `tf.saved_model.load` when only TensorFlow and
tensorflow-text are imported.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import tensorflow as tf

from albert_tf import export
from albert_tf.export import onnx as onnx_export, portable
from albert_tf.export.portable import light_inference_metadata
from albert_tf.finetuning.options import TaskOptions
from albert_tf.tasks.classification import glue, long_text as long_text_rules, metrics

# Windows of one long text per model call in the raw-text signature.
WINDOW_BATCH = 16


class ClassifierServingModule(tf.Module):
    """Serving wrapper of an `AlbertClassifier` (GLUE) with two signatures.

    `serving_default(text_a[, text_b])`: tf.string [B] raw sentences (text_b
      only for sentence-pair tasks; an empty text_b packs that row as a single
      sentence). Tokenized and packed in the graph to max_seq_length.
    `serve_tokens(input_ids, input_mask, segment_ids)`: int32 [B, S], any S
      up to the model's max_position_embeddings.
    Both return `probabilities` float32 [B, K] (K = 1: the regression score)
    and `predictions`: tf.string [B] label names, or float32 [B] scores for
    regression (labels=None).
    """

    def __init__(self, model, tokenizer, max_seq_length: int, labels: Optional[Sequence[str]],
                 pair: bool, name: Optional[str] = None, layer_norm: str = "auto",
                 thresholds: Optional[Sequence[float]] = None,
                 long_text: Optional[long_text_rules.LongText] = None):
        super().__init__(name=name)
        self.long_text = long_text or long_text_rules.LongText()
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.pair = pair
        self.regression = labels is None
        self.label_names = None if labels is None else tf.constant(list(labels), tf.string)
        self.num_outputs = 1 if labels is None else len(labels)
        # Multi-label: the per-label decision thresholds, as float32 logits [K].
        self.thresholds = (None if thresholds is None
                           else tf.constant(metrics.logit_thresholds(thresholds)))
        # Early exit: each row's exit layer too (int32 [B]; a long text's deepest window's).
        self.exits = getattr(model, "early_exit", None) is not None
        self._outputs = export.model_outputs(
            model, ["probabilities", "predictions", "logits"] + (["exit_layer"] if self.exits
                                                                 else []), layer_norm)
        if pair:
            self.serving_default = tf.function(
                self._serve_pair, input_signature=[tf.TensorSpec([None], tf.string, "text_a"),
                                                   tf.TensorSpec([None], tf.string, "text_b")])
        else:
            self.serving_default = tf.function(
                self._serve_single, input_signature=[tf.TensorSpec([None], tf.string, "text_a")])
        self.serve_tokens = tf.function(self._serve_tokens,
                                        input_signature=[export.token_input_signature()])

    def _finish(self, features, outputs=None):
        outputs = self._outputs(features) if outputs is None else outputs
        exits = {"exit_layer": outputs["exit_layer"]} if self.exits else {}
        if self.thresholds is not None:
            return dict(multi_label_outputs(outputs["probabilities"], outputs["logits"],
                                            self.thresholds, self.label_names),
                        logits=outputs["logits"], **exits)
        if self.regression:
            predictions = outputs["probabilities"][:, 0]
        else:
            predictions = tf.gather(self.label_names, outputs["predictions"])
        # The logits too: what a text's windows aggregate (the pipeline reads them).
        return {"probabilities": outputs["probabilities"], "predictions": predictions,
                "logits": outputs["logits"], **exits}

    def pack_text(self, text_a, text_b=None):
        """Raw strings [B] -> int32 features [B, max_seq_length]."""
        ids_b = None if text_b is None else self.tokenizer(text_b)
        return export.pack_pair(self.tokenizer(text_a), ids_b, self.max_seq_length,
                                self.tokenizer.cls_id, self.tokenizer.sep_id,
                                max(self.tokenizer.pad_id, 0))  # -1: no pad token, as glue pads

    def _serve_single(self, text_a):
        if self.long_text.mode == "truncate":
            return self._finish(self.pack_text(text_a))
        ids = tf.cast(self.tokenizer(text_a), tf.int32).with_row_splits_dtype(tf.int64)
        budget = self.max_seq_length - 2
        if self.long_text.mode == "head_tail":
            outputs = self._finish(self.pack_ids(head_tail_ids(ids, budget)))
            return dict(outputs, num_windows=tf.ones([tf.shape(text_a)[0]], tf.int32))
        windows, row = window_ids(ids, budget, self.long_text.stride(budget))
        window_outputs = self.window_outputs(self.pack_ids(windows))
        aggregate = (tf.math.segment_max if self.long_text.aggregation == "max"
                     else tf.math.segment_mean)
        logits = aggregate(window_outputs["logits"], row)
        text_outputs = {"probabilities": self.probabilities(logits),
                        "predictions": tf.argmax(logits, -1, tf.int32), "logits": logits}
        if self.exits:
            text_outputs["exit_layer"] = tf.math.segment_max(window_outputs["exit_layer"], row)
        outputs = self._finish(None, outputs=text_outputs)
        return dict(outputs, num_windows=tf.math.bincount(
            row, minlength=tf.shape(text_a)[0], dtype=tf.int32))

    def pack_ids(self, ids):
        tok = self.tokenizer
        return export.pack_pair(ids, None, self.max_seq_length, tok.cls_id, tok.sep_id,
                                max(tok.pad_id, 0))

    def probabilities(self, logits):
        """What the model's `probabilities` output is of its `logits`."""
        if self.thresholds is not None:
            return tf.sigmoid(logits)
        return logits if self.regression else tf.nn.softmax(logits, axis=-1)

    def window_outputs(self, features):
        """{"logits": float32 [W, K]} of W packed windows (and with early exit
        "exit_layer": int32 [W]), WINDOW_BATCH windows per model call (a long text's
        windows do not all go through the model at once)."""
        wanted = {"logits": (tf.float32, [self.num_outputs])}
        if self.exits:
            wanted["exit_layer"] = (tf.int32, [])
        return export.in_chunks(self._outputs, features, WINDOW_BATCH, wanted)

    def _serve_pair(self, text_a, text_b):
        return self._finish(self.pack_text(text_a, text_b))

    def _serve_tokens(self, features):
        return self._finish(features)

    def signatures(self) -> Dict[str, Callable]:
        return {"serving_default": self.serving_default, "serve_tokens": self.serve_tokens}


def head_tail_ids(ids: tf.RaggedTensor, budget: int) -> tf.RaggedTensor:
    """`long_text.head_tail` of each row of int32 ids [B, (T)]: [B, (min(T, budget))]."""
    length = ids.row_lengths()
    kept = tf.minimum(length, budget)
    position = tf.ragged.range(kept).flat_values
    row = tf.repeat(tf.range(tf.shape(length, out_type=tf.int64)[0]), kept)
    long = tf.gather(length, row) > budget
    head = long_text_rules.head_tokens(budget)
    source = tf.where(long & (position >= head), position + tf.gather(length, row) - budget,
                      position)
    return tf.RaggedTensor.from_row_lengths(
        tf.gather(ids.flat_values, tf.gather(ids.row_starts(), row) + source), kept)


def window_ids(ids: tf.RaggedTensor, budget: int, stride: int):
    """`long_text.window_starts` windows of each row of int32 ids [B, (T)]: (windows int32
    [W, (<= budget)] in row order, row int32 [W]); a row without ids is one empty window.
    Linear in the total length: each window gathers its own ids."""
    length = ids.row_lengths()
    count = 1 + (tf.maximum(length - budget, 0) + stride - 1) // stride
    row = tf.repeat(tf.range(tf.shape(length, out_type=tf.int64)[0]), count)
    start = tf.ragged.range(count).flat_values * stride
    kept = tf.minimum(tf.gather(length, row) - start, budget)
    position = tf.ragged.range(kept)
    source = (tf.gather(tf.gather(ids.row_starts(), row) + start, position.value_rowids())
              + position.flat_values)
    windows = tf.RaggedTensor.from_row_lengths(tf.gather(ids.flat_values, source), kept)
    return windows, tf.cast(row, tf.int32)


def multi_label_outputs(probabilities, logits, logit_thresholds,
                        label_names) -> Dict[str, tf.Tensor]:
    """{"probabilities" [B, K], "predictions" int32 [B, K] (above threshold: logits
    against the thresholds' float32 logits, as `metrics.above_thresholds`), "labels"
    tf.string [B, M]: the chosen names in label order, padded with ""}."""
    chosen = logits > logit_thresholds[tf.newaxis, :]
    names = tf.ragged.boolean_mask(
        tf.broadcast_to(label_names, tf.shape(chosen)), chosen)
    return {"probabilities": probabilities, "predictions": tf.cast(chosen, tf.int32),
            "labels": names.to_tensor(default_value="")}


def export_classifier(model, options: TaskOptions, spec: glue.TaskSpec,
                      thresholds: Optional[Sequence[float]] = None) -> str:
    """Saves `model` as a SavedModel (raw-text and token signatures) to options.export_dir
    (`thresholds`: a multi-label task's, [K]; options.long_text_rule(), when it has one: how
    the raw-text signature reads long texts)."""
    rule = getattr(options, "long_text_rule", None)
    if getattr(spec, "multi_label", False) and thresholds is None:
        thresholds = [0.5] * len(spec.labels)
    module = ClassifierServingModule(model, options.in_graph_tokenizer(), options.max_seq_length,
                                     None if spec.is_regression else spec.labels,
                                     pair=spec.is_pair, layer_norm=options.export_layer_norm,
                                     thresholds=thresholds, long_text=rule() if rule else None)
    return export.save_serving_model(options.export_dir, module, module.signatures())


def classifier_portable_model(model, options: TaskOptions, spec: glue.TaskSpec,
                              thresholds: Optional[Sequence[float]] = None
                              ) -> portable.PortableModel:
    """The classifier's ONNX / LiteRT function: token ids -> `probabilities`, `logits`, and
    `predictions` (int32 label index, or the score for regression, or int32 [B, K] above
    the label's threshold for a multi-label task, `thresholds` [K]), with its metadata.
    options: run_classifier.py's (`task_name`, `max_seq_length`, `do_lower_case` are read)."""
    regression, multi = spec.is_regression, getattr(spec, "multi_label", False)
    if multi and thresholds is None:
        thresholds = [0.5] * len(spec.labels)
    names = ["probabilities", "logits"]
    if getattr(model, "early_exit", None) is not None:
        names.append("exit_layer")
    fn = onnx_export.model_function(model, names,
                                    argmax_of=None if regression or multi else "logits")
    if multi:
        sigmoids, limits = fn, metrics.logit_thresholds(thresholds)

        def fn(features):
            outputs = sigmoids(features)
            # A constant made here, not captured: a captured tensor would be a model input.
            above = outputs["logits"] > tf.constant(limits)[tf.newaxis, :]
            outputs["predictions"] = tf.cast(above, tf.int32)
            return outputs
    if regression:  # `predictions` = the score, as the SavedModel's
        scores = fn

        def fn(features):
            outputs = scores(features)
            outputs["predictions"] = outputs["logits"][:, 0]
            return outputs
    metadata = {"task": "classifier", "task_name": options.task_name,
                "labels": None if regression else list(spec.labels), "pair": spec.is_pair,
                "max_seq_length": options.max_seq_length,
                "do_lower_case": options.do_lower_case}
    if multi:
        metadata.update(multi_label=True, thresholds=[float(t) for t in thresholds])
    metadata.update(light_inference_metadata(model))
    rule = getattr(options, "long_text_rule", None)
    if rule is not None and rule().mode != "truncate":  # the pipeline reads texts the same way
        metadata.update(rule().describe(options.max_seq_length - 2))
    # A regression score has no label to agree on: its int8 files are not checked.
    return portable.PortableModel(fn, export.token_input_signature(), metadata,
                                  compare=() if regression else
                                  (("predictions", "rows" if multi else "values"),))
