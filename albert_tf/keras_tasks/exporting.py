"""A Keras task's files for other runtimes: the CLI's export, and keras-hub presets.

    classifier.export("exported/")                          # raw-text SavedModel
    classifier.export("exported/", format=("saved_model", "onnx"), int8=True,
                      check_data=dev_texts)
    albert_tf.pipeline("text-classification", model="exported/")

`export_text_classifier` builds what run_classifier.py's `--export_dir` holds from the
task's network, preprocessor and labels: the SavedModel of
`tasks.classification.export.ClassifierServingModule` (signatures `serving_default` on raw
text and `serve_tokens`), the ONNX / LiteRT files of `classifier_portable_model`, the
vocabulary and `albert_tf_export.json`. The CLI's option and task objects are filled from
the task (a custom task of the task's labels), so the two doors write one format through
one code path.
"""
from __future__ import annotations

import os
import tempfile
from typing import Dict, Iterable, Sequence, Tuple

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.export import portable, records

# Keras' own names for the formats (keras.Model.export) and ours (--export_format).
FORMAT_NAMES = {"saved_model": "saved_model", "tf_saved_model": "saved_model",
                "onnx": "onnx", "tflite": "tflite", "litert": "tflite"}


def export_formats(formats) -> Tuple[str, ...]:
    """formats: a name or names, Keras' ("tf_saved_model", "litert") or the CLI's
    ("saved_model", "tflite") -> the CLI's names; one line for an unknown one."""
    names = [formats] if isinstance(formats, str) else list(formats)
    unknown = [name for name in names if name not in FORMAT_NAMES]
    if unknown or not names:
        raise UserValueError(f"export format {unknown[0] if unknown else names!r}: give "
                             f"one or more of {sorted(FORMAT_NAMES)}")
    return tuple(dict.fromkeys(FORMAT_NAMES[name] for name in names))


def check_arguments(input_signature, options: Dict, signatures: str, names: str) -> None:
    """Refuses what Keras' `export` takes and the CLI's export does not: an input
    signature (`signatures`: what the export's are), options other than `names`."""
    if input_signature is not None:
        raise UserValueError(f"export writes the CLI's signatures ({signatures}); it takes no "
                             "input_signature")
    unknown = sorted(set(options) - {"int8_min_agreement"})
    if unknown:
        raise UserValueError(f"export: unknown option(s) {', '.join(unknown)} ({names})")


def export_text_classifier(task, export_dir: str, formats: Iterable[str] = ("saved_model",),
                           *, text_pair: bool = False, int8: bool = False, fp16: bool = False,
                           check_data=None,
                           int8_min_agreement: float = portable.DEFAULT_INT8_MIN_AGREEMENT
                           ) -> Dict:
    """Writes an `AlbertTextClassifier`'s export to `export_dir` (see the module docstring).

    text_pair: the raw-text signature takes (text_a, text_b), as a sentence-pair task's.
    A multi-label classifier's labels are predicted above probability 0.5 each
      (run_classifier.py's untuned baseline; its tuned thresholds need its dev set).
    int8 / fp16: also the quantized ONNX / LiteRT files, each checked against float32 on
      `check_data` (texts, or pairs) when given and kept only above `int8_min_agreement`.
    Returns the CLI job's export results: {"export_dir", "onnx": path, ...}.
    """
    from albert_tf.tasks.classification import export as classifier_export

    formats = export_formats(formats)
    if task.preprocessor is None:
        raise UserValueError("export needs the model's preprocessor (the vocabulary the "
                             "raw-text signature tokenizes with)")
    export_dir = os.path.normpath(export_dir)
    results: Dict = {"export_dir": export_dir}
    with tempfile.TemporaryDirectory() as vocabulary_dir:
        options, spec = _cli_objects(task, export_dir, formats, text_pair, int8, fp16,
                                     task.preprocessor.write_vocabulary(vocabulary_dir))
        thresholds = [0.5] * task.num_classes if spec.multi_label else None
        if "saved_model" in formats:
            classifier_export.export_classifier(task.network, options, spec, thresholds)
        portable_model = classifier_export.classifier_portable_model(
            task.network, options, spec, thresholds)
        vocabulary = dict(spm_model_file=options.spm_model_file, vocab_file=options.vocab_file)
        results.update(_portable_files(
            export_dir, portable_model, formats, vocabulary, int8, fp16,
            None if check_data is None else lambda: _numpy_features(task, check_data),
            int8_min_agreement, task.config))
    return results


def export_tagger(task, export_dir: str, formats: Iterable[str] = ("saved_model",), *,
                  int8: bool = False, fp16: bool = False, check_data=None,
                  int8_min_agreement: float = portable.DEFAULT_INT8_MIN_AGREEMENT) -> Dict:
    """Writes an `AlbertTagger`'s export to `export_dir`: what run_ner.py's `--export_dir`
    holds (`tasks.tagging.export`: the SavedModel of `TaggingServingModule`, the ONNX /
    LiteRT files of `portable_model`), with the vocabulary and albert_tf_export.json.
    check_data: sentences (words or texts) whose windows check the int8 files."""
    from albert_tf.keras_tasks import tagging_inputs
    from albert_tf.tasks.tagging import export as tagging_export

    formats = export_formats(formats)
    preprocessor = _require_preprocessor(task)
    export_dir = os.path.normpath(export_dir)
    results: Dict = {"export_dir": export_dir}
    settings = dict(max_seq_length=preprocessor.sequence_length, doc_stride=task.doc_stride,
                    do_lower_case=preprocessor.do_lower_case)
    with tempfile.TemporaryDirectory() as vocabulary_dir:
        vocabulary = _vocabulary_files(preprocessor, vocabulary_dir)
        if "saved_model" in formats:
            tagging_export.export_saved_model(task.network, export_dir, task.labels,
                                              task.tag_scheme, word_split=task.word_split,
                                              **vocabulary, **settings)
        portable_model = tagging_export.portable_model(task.network, task.labels,
                                                       task.tag_scheme, **settings)
        def check_features():
            sentences = tagging_inputs.sentences_of(check_data, None, task.labels,
                                                    task.word_split)
            return tagging_inputs.model_features(task.windows(sentences))

        results.update(_portable_files(export_dir, portable_model, formats, vocabulary, int8,
                                       fp16, None if check_data is None else check_features,
                                       int8_min_agreement, task.config))
    return results


def export_multiple_choice(task, export_dir: str, formats: Iterable[str] = ("saved_model",),
                           *, int8: bool = False, fp16: bool = False, check_data=None,
                           int8_min_agreement: float = portable.DEFAULT_INT8_MIN_AGREEMENT
                           ) -> Dict:
    """Writes an `AlbertMultipleChoiceTask`'s export to `export_dir`: what run_race.py's
    `--export_dir` holds (`tasks.multiple_choice.export`: the raw-text SavedModel and the
    ONNX / LiteRT files of `portable_model`), with the vocabulary and
    albert_tf_export.json. check_data: questions whose rows check the int8 files."""
    from albert_tf.keras_tasks import choice_inputs
    from albert_tf.tasks.multiple_choice import export as race_export

    formats = export_formats(formats)
    preprocessor = _require_preprocessor(task)
    export_dir = os.path.normpath(export_dir)
    results: Dict = {"export_dir": export_dir}
    settings = dict(max_seq_length=preprocessor.sequence_length,
                    max_qa_length=task.max_qa_length, do_lower_case=preprocessor.do_lower_case)
    with tempfile.TemporaryDirectory() as vocabulary_dir:
        vocabulary = _vocabulary_files(preprocessor, vocabulary_dir)
        if "saved_model" in formats:
            race_export.export_saved_model(task.network, export_dir, task_name=task.packing,
                                           **vocabulary, **settings)
        portable_model = race_export.portable_model(task.network, task.packing, **settings)
        results.update(_portable_files(
            export_dir, portable_model, formats, vocabulary, int8, fp16,
            None if check_data is None else (
                lambda: choice_inputs.model_features(task.packed(check_data))),
            int8_min_agreement, task.config))
    return results


def export_question_answerer(task, export_dir: str,
                             formats: Iterable[str] = ("saved_model",), *, int8: bool = False,
                             fp16: bool = False, check_data=None,
                             int8_min_agreement: float = portable.DEFAULT_INT8_MIN_AGREEMENT
                             ) -> Dict:
    """Writes an `AlbertQuestionAnswerer`'s export to `export_dir`: what run_squad.py's
    `--export_dir` holds (`tasks.span_qa.export`: the SavedModel answering a question on a
    context, SQuAD v1.1 or v2.0 as the task's head, and the ONNX / LiteRT span files), with
    the vocabulary and albert_tf_export.json. check_data: questions whose windows check the
    int8 files."""
    from albert_tf.tasks.span_qa import export as squad_export

    formats = export_formats(formats)
    preprocessor = _require_preprocessor(task)
    export_dir = os.path.normpath(export_dir)
    results: Dict = {"export_dir": export_dir}
    features = task.options
    options = squad_export.ExportOptions(
        max_seq_length=features.max_seq_length, doc_stride=features.doc_stride,
        max_query_length=features.max_query_length, do_lower_case=preprocessor.do_lower_case,
        n_best_size=task.n_best_size, max_answer_length=task.max_answer_length,
        version_2_with_negative=task.v2,
        null_score_diff_threshold=task.null_score_diff_threshold)
    with tempfile.TemporaryDirectory() as vocabulary_dir:
        vocabulary = _vocabulary_files(preprocessor, vocabulary_dir)
        if "saved_model" in formats:
            squad_export.export_saved_model(task.network, export_dir, options=options,
                                            **vocabulary)

        results.update(_portable_files(
            export_dir, squad_export.portable_model(task.network, options), formats,
            vocabulary, int8, fp16,
            None if check_data is None else lambda: task.window_features(check_data),
            int8_min_agreement, task.config))
    return results


def export_sentence_embedder(task, export_dir: str, formats: Iterable[str] = ("saved_model",),
                             *, int8: bool = False, fp16: bool = False, check_data=None,
                             int8_min_agreement: float = portable.DEFAULT_INT8_MIN_AGREEMENT
                             ) -> Dict:
    """Writes an `AlbertSentenceEmbedder`'s export to `export_dir`: what
    run_embeddings.py's `--export_dir` holds (`tasks.embeddings.export`: the SavedModel
    embedding raw text, its sentence-transformers directory, the ONNX / LiteRT files), with
    the vocabulary and albert_tf_export.json. check_data: texts the int8 files are checked
    on. Returns {"export_dir", "sentence_transformers_dir" (with a SavedModel), and the
    portable files' paths}."""
    from albert_tf.tasks.embeddings import export as embedding_export
    from albert_tf.tasks.embeddings.job import EmbeddingOptions

    formats = export_formats(formats)
    preprocessor = _require_preprocessor(task)
    export_dir = os.path.normpath(export_dir)
    results: Dict = {"export_dir": export_dir}
    network = task.network
    with tempfile.TemporaryDirectory() as vocabulary_dir:
        vocabulary = _vocabulary_files(preprocessor, vocabulary_dir)
        options = EmbeddingOptions(
            albert_config=task.config, task_name="custom", data_dir="", output_dir="",
            do_lower_case=preprocessor.do_lower_case,
            max_seq_length=preprocessor.sequence_length, export_dir=export_dir,
            pooling=",".join(network.pooling), normalize=bool(network.normalize),
            **vocabulary)
        if "saved_model" in formats:
            embedding_export.export_saved_model(network, options)
            results["sentence_transformers_dir"] = (
                embedding_export.save_sentence_transformers_export(network, options))

        def check_features():
            packed = task.packed(list(check_data))
            return {"input_ids": packed["input_ids_a"], "input_mask": packed["input_mask_a"],
                    "segment_ids": np.zeros_like(packed["input_ids_a"])}

        results.update(_portable_files(
            export_dir, embedding_export.portable_model(network, options), formats,
            vocabulary, int8, fp16, None if check_data is None else check_features,
            int8_min_agreement, task.config))
    return results


def _portable_files(export_dir: str, portable_model, formats: Sequence[str], vocabulary: Dict,
                    int8: bool, fp16: bool, check_features, int8_min_agreement: float,
                    config) -> Dict:
    """The ONNX / LiteRT files `formats` asks for (the int8 ones checked on
    `check_features()`, when given), then albert_tf_export.json (with `config`, the
    model's AlbertConfig); returns their paths."""
    written = {}
    if set(formats) & set(portable.PORTABLE_FORMATS):
        written = portable.export_model_dir(
            export_dir, portable_model, formats, int8=int8, fp16=fp16,
            check_features=None if check_features is None else check_features(),
            int8_min_agreement=int8_min_agreement, **vocabulary)
    records.write_export_record(export_dir, portable_model.metadata, **vocabulary,
                                albert_config=config.to_dict())
    return written


def _require_preprocessor(task):
    if task.preprocessor is None:
        raise UserValueError("export needs the model's preprocessor (the vocabulary the "
                             "raw-text signature tokenizes with)")
    return task.preprocessor


def _vocabulary_files(preprocessor, directory: str) -> Dict:
    """{"spm_model_file", "vocab_file"}: the preprocessor's vocabulary written into
    `directory`, under the CLI's option names (one of them None)."""
    path = preprocessor.write_vocabulary(directory)
    sentencepiece = preprocessor.tokenizer_kind == "sentencepiece"
    return dict(spm_model_file=path if sentencepiece else None,
                vocab_file=None if sentencepiece else path)


def _cli_objects(task, export_dir: str, formats: Sequence[str], text_pair: bool, int8: bool,
                 fp16: bool, vocabulary_file: str):
    """run_classifier.py's options and task spec for this task (a custom task)."""
    from albert_tf.tasks.classification import glue
    from albert_tf.tasks.classification.job import ClassificationOptions

    preprocessor = task.preprocessor
    sentencepiece = preprocessor.tokenizer_kind == "sentencepiece"
    options = ClassificationOptions(
        albert_config=task.config, task_name="custom", data_dir="", output_dir="",
        spm_model_file=vocabulary_file if sentencepiece else None,
        vocab_file=None if sentencepiece else vocabulary_file,
        do_lower_case=preprocessor.do_lower_case,
        max_seq_length=preprocessor.sequence_length, export_dir=export_dir,
        export_format=tuple(formats), export_int8=int8, export_fp16=fp16)
    problem = task.problem_type
    labels = None if problem == "regression" else tuple(
        task.labels or [str(index) for index in range(task.num_classes)])
    layout = glue.SplitLayout("", False, 0, 1 if text_pair else None, -1)
    spec = glue.TaskSpec("custom", "", {"dev": layout}, labels,
                         metric="pearson" if labels is None else "accuracy",
                         multi_label=problem == "multi_label_classification")
    return options, spec


def _numpy_features(task, texts) -> Dict[str, np.ndarray]:
    """Token features of `texts` (what the int8 check runs the files on)."""
    features = task.preprocessor(texts)
    return {name: np.asarray(value) for name, value in features.items()}


def save_keras_hub_preset(task, directory: str, kind: str) -> list:
    """Writes `task` as a keras-hub preset of `kind` ("classifier", "masked_lm" or
    "backbone"; `checkpoints.keras_hub`) that keras-hub's from_preset loads; returns the
    files written."""
    from albert_tf.checkpoints import keras_hub

    preprocessor = task.preprocessor
    if preprocessor is None or preprocessor.tokenizer_kind != "sentencepiece":
        raise UserValueError("a keras-hub preset holds a SentencePiece model (keras-hub's "
                             "AlbertTokenizer); this model's vocabulary is "
                             f"{getattr(preprocessor, 'tokenizer_kind', None) or 'missing'}")
    network = task.network
    with tempfile.TemporaryDirectory() as vocabulary_dir:
        return keras_hub.write_preset(
            directory, task.config, keras_hub.tf1_arrays(network),
            preprocessor.write_vocabulary(vocabulary_dir), kind,
            num_classes=getattr(network, "num_labels", None),
            sequence_length=preprocessor.sequence_length,
            dropout=float(getattr(network, "dropout_rate", 0.1)))

