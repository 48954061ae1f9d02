"""Model sources: what a pipeline runs, read from what a path holds.

`load_source(path)` returns a `ModelSource`: the tokenizer, the head, the label names, the
longest row the model takes, and `run(features, names=None)`: int32 token features [B, S]
(numpy) in, the head's outputs (numpy) out (a Keras model's only those in `names`). The paths it reads:

  a sentence-transformers directory  modules.json (Transformer, Pooling, Normalize) over a
                                     Hugging Face ALBERT directory: an encoder with its
                                     pooling (`checkpoints.sentence_transformers`)
  a Hugging Face ALBERT directory    config.json + model.safetensors + spiece.model (or
                                     vocab.txt); the head is config.json's architectures
  an official TF1 / TF-Hub directory albert_config.json + vocabulary + checkpoint: the
                                     pretrained model (fill-mask, feature-extraction)
  an albert-tf export                a fine-tuning run's --export_dir (or a run directory
                                     with one in export/): model.onnx (ONNX Runtime),
                                     model.tflite (LiteRT) or the SavedModel's
                                     serve_tokens, described by albert_tf_export.json or
                                     the ONNX/LiteRT file's own metadata

Heads and their outputs (`run`; a Keras model's also `sequence_output` [B, S, H]):
  masked_lm         mlm_logits [B, S, V]
  encoder           (sequence_output only)
  classifier        logits [B, K]
  token_classifier  logits [B, S, K]
  span              start_logits, end_logits [B, S]
  multiple_choice   logits [B] (one score per row: a row is one choice)
  sentence_embedding  embedding [B, D] (an export's; a Keras encoder's is pooled by the
                    sentence-embedding pipeline from `sequence_output`)
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from albert_tf.errors import UserFileNotFoundError, UserValueError
from albert_tf.export.records import EXPORT_RECORD
from albert_tf.fileio import read_json

EXPORT_FILES = ("model.onnx", "model.tflite", "saved_model.pb")
# convert's --model names (a Hugging Face class's, see checkpoints.hf.ARCHITECTURE_MODELS)
# -> the pipeline head.
MODEL_HEADS = {"pretrainer": "masked_lm", "encoder": "encoder", "classifier": "classifier",
               "token_classifier": "token_classifier", "span_labeler": "span",
               "multiple_choice": "multiple_choice"}
# An export's metadata "task" -> the pipeline head.
EXPORT_HEADS = {"classifier": "classifier", "tagging": "token_classifier", "squad_v1": "span",
                "sentence_embedding": "sentence_embedding"}
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")
# What each head returns (an export the same but `sequence_output`).
HEAD_OUTPUTS = {"masked_lm": ("mlm_logits",), "encoder": (), "classifier": ("logits",),
                "token_classifier": ("logits",), "multiple_choice": ("logits",),
                "span": ("start_logits", "end_logits"), "sentence_embedding": ("embedding",)}


@dataclasses.dataclass
class ModelSource:
    """A loaded model as the pipelines use it (see the module docstring).

    labels: the output names of a classifier or token classifier (None: LABEL_<i>);
    problem_type: Hugging Face's ("single_label_classification", "multi_label_classification",
      "regression") or None; max_length: tokens per row, [CLS] and [SEP] included;
    kind: what was read ("huggingface", "official", "onnx", "tflite", "saved_model");
    reading: how an export's job read long texts (`long_text`, `doc_stride`,
      `window_aggregation`; see tasks/classification/long_text.py), the pipeline's defaults.
    """

    tokenizer: object
    head: str
    run: Callable[[Mapping[str, np.ndarray]], Dict[str, np.ndarray]]
    max_length: int
    kind: str
    path: str
    labels: Optional[List[str]] = None
    problem_type: Optional[str] = None
    num_outputs: Optional[int] = None
    reading: Dict[str, object] = dataclasses.field(default_factory=dict)
    # How token vectors become a sentence vector (a sentence-transformers directory's, or
    # the sentence-embedding pipeline's defaults): {"pooling": (modes), "normalize": bool}.
    pooling: Dict[str, object] = dataclasses.field(default_factory=dict)
    # A Keras source's model (its layers and early exit can be set); an export's light
    # inference as exported (`export.portable.light_inference_metadata`).
    model: Optional[object] = None
    light: Dict[str, object] = dataclasses.field(default_factory=dict)
    # A multiple-choice model that exits early: the run of whole questions (features
    # [G, C, S] and choice_mask [G, C] -> logits [G, C], exit_layer [G]), whose choices
    # exit together (`choice_runner`).
    run_choices: Optional[Callable] = None

    def label(self, index: int) -> str:
        return self.labels[index] if self.labels else f"LABEL_{index}"


# What an export's metadata says about reading long texts (the text-classification defaults).
READING = ("long_text", "doc_stride", "window_aggregation")
# What it says of its light inference (`export.portable.light_inference_metadata`).
LIGHT = ("inference_layers", "exit_heads", "early_exit", "num_hidden_layers")
# The heads whose models exit early (`modeling.exiting.ExitingModel`) in a pipeline.
EXIT_HEADS = ("classifier", "token_classifier", "multiple_choice")


def set_light_inference(source: ModelSource, num_layers: Optional[int] = None,
                        patience: Optional[int] = None,
                        exit_confidence: Optional[float] = None) -> ModelSource:
    """`source` running `num_layers` layers and/or exiting early (`modeling.early_exit`): a
    Keras source's model is set so; an export's graph was fixed when it was exported, so
    settings other than its own are refused in one line. Returns `source`."""
    if num_layers is None and patience is None and exit_confidence is None:
        return source
    if source.model is None:
        return _check_exported_light(source, num_layers, patience, exit_confidence)
    from albert_tf.modeling.early_exit import EarlyExit

    model = source.model
    try:
        if num_layers is not None:
            target = getattr(model, "encoder", model)
            from albert_tf.modeling.encoder import check_inference_layers
            target.inference_layers = check_inference_layers(num_layers, model.config)
        if patience is not None or exit_confidence is not None:
            if source.head not in EXIT_HEADS or not hasattr(model, "early_exit"):
                raise UserValueError(
                    f"model={source.path}: a {source.head} model has no per-layer exits; "
                    f"a pipeline's early exit (patience, exit_confidence) is for text and "
                    f"token classification and multiple choice (num_layers works for every "
                    f"model)")
            model.early_exit = EarlyExit(patience, exit_confidence)
    except ValueError as err:
        if isinstance(err, UserValueError):
            raise
        raise UserValueError(f"model={source.path}: {err}") from None
    source.run = keras_runner(model, source.head)
    if source.head == "multiple_choice" and getattr(model, "early_exit", None) is not None:
        source.run_choices = choice_runner(model)
    return source


def choice_runner(model) -> Callable:
    """`ModelSource.run_choices` of an `AlbertMultipleChoice` that exits early: one
    tf.function per number of choices C (the model groups a question's C rows by it)."""
    import tensorflow as tf

    functions = {}

    def run(features: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        choices = features["input_ids"].shape[1]
        if choices not in functions:
            def call(inputs, choices=choices):
                model.num_choices = choices  # read while tracing: fixed in this function
                outputs = model(inputs, training=False)
                return {"logits": tf.cast(outputs["logits"], tf.float32),
                        "exit_layer": outputs["exit_layer"]}

            spec = tf.TensorSpec([None, choices, None], tf.int32)
            functions[choices] = tf.function(call, input_signature=[dict(
                {name: spec for name in TOKEN_FEATURES},
                choice_mask=tf.TensorSpec([None, choices], tf.int32))])
        inputs = {name: tf.constant(features[name], tf.int32)
                  for name in TOKEN_FEATURES + ("choice_mask",)}
        return {name: value.numpy() for name, value in functions[choices](inputs).items()}

    return run


def _check_exported_light(source: ModelSource, num_layers, patience, exit_confidence):
    exported = source.light.get("early_exit") or {}
    asked = {"num_layers": (num_layers, source.light.get("inference_layers")),
             "patience": (patience, exported.get("patience")),
             "exit_confidence": (exit_confidence, exported.get("confidence"))}
    for option, (wanted, has) in asked.items():
        if wanted is not None and wanted != has:
            runs = ", ".join(f"{name}={value}" for name, value in (
                ("inference_layers", source.light.get("inference_layers")),
                ("patience", exported.get("patience")),
                ("exit_confidence", exported.get("confidence"))) if value is not None)
            raise UserValueError(
                f"model={source.path}: an export's graph is fixed when exported "
                f"({runs or 'every layer, no early exit'}); {option}={wanted} needs an "
                f"export made with it (the CLI's --inference_layers / --patience / "
                f"--exit_confidence, or a Keras task's export) or a Keras model source")
    return source


def load_source(path: str, do_lower_case: Optional[bool] = None) -> ModelSource:
    """Reads `path` (see the module docstring); one line naming the path when it holds
    none of them. An export's ONNX or LiteRT file is read without importing TensorFlow."""
    if not os.path.exists(path):
        raise UserFileNotFoundError(f"model={path}: no such file or directory")
    chosen = os.path.basename(path) if os.path.isfile(path) else None
    if chosen is not None and chosen.endswith((".onnx", ".tflite")):  # int8, fp16 files too
        return _export_source(os.path.dirname(path) or ".", do_lower_case, chosen)
    if os.path.isdir(path) and os.path.exists(os.path.join(path, EXPORT_RECORD)):
        return _export_source(path, do_lower_case, None)
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "modules.json")):
        return _sentence_transformers_source(path, do_lower_case)
    if is_hf_dir(path):
        return _huggingface_source(path, do_lower_case)
    if os.path.isdir(path) and has_official_config(path):  # also a TF-Hub module directory
        return _official_source(path, do_lower_case)
    export_dir = export_dir_of(path)
    if export_dir is not None:
        return _export_source(export_dir, do_lower_case, None)
    raise UserValueError(
        f"model={path}: not a model this library reads: a Hugging Face ALBERT directory "
        "(config.json + model.safetensors), an official directory (albert_config.json, "
        f"vocabulary, checkpoint) or an albert-tf export ({', '.join(EXPORT_FILES)})")


def has_official_config(path: str) -> bool:
    from albert_tf.checkpoints import official

    try:
        official.find_config_file(path)
    except FileNotFoundError:
        return False
    return True


def is_hf_dir(path: str) -> bool:
    """config.json + safetensors weights (`checkpoints.restore.looks_like_hf_dir`, without
    importing the checkpoint readers)."""
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")) and (
        os.path.exists(os.path.join(path, "model.safetensors"))
        or os.path.exists(os.path.join(path, "model.safetensors.index.json")))


def export_dir_of(path: str) -> Optional[str]:
    """The export directory `path` names, by its files: a directory holding an export, or a
    run directory with one in export/ (a Hugging Face or official directory never is: they
    are read first)."""
    for candidate in (path, os.path.join(path, "export")):
        if os.path.isdir(candidate) and any(
                os.path.exists(os.path.join(candidate, name))
                for name in (EXPORT_RECORD,) + EXPORT_FILES):
            return candidate
    return None


# --- Keras models: Hugging Face and official directories -------------------------------------


def keras_runner(model, head: str) -> Callable:
    """`run` for a Keras model of this library: one tf.function (rows of any length), traced
    as the SavedModel export traces it (`export.call_for_export`: the LayerNorm spelling that
    is fastest where it runs)."""
    import tensorflow as tf

    from albert_tf.export import saved_model

    if head == "multiple_choice":
        def call(features):
            with saved_model.fused_ops.exporting_layer_norms_as("auto"):
                encoded = model.encoder(features, training=False)
                logits = model.classifier(encoded["pooled_output"], training=False)
            return {"logits": tf.cast(logits[:, 0], tf.float32),
                    "sequence_output": tf.cast(encoded["sequence_output"], tf.float32)}
    elif getattr(model, "early_exit", None) is not None:  # no hidden states: rows exit
        call = saved_model.model_outputs(model, HEAD_OUTPUTS[head] + ("exit_layer",))
    else:
        call = saved_model.model_outputs(model, HEAD_OUTPUTS[head] + ("sequence_output",))

    functions = {}

    def run(features: Mapping[str, np.ndarray], names=None) -> Dict[str, np.ndarray]:
        """The outputs `names` (default all of the head's): a task fetches only those it
        reads (a classifier's [B, K] logits, not the [B, S, H] hidden states); each row's
        `exit_layer` too under early exit."""
        if names and getattr(model, "early_exit", None) is not None:
            names = tuple(names) + ("exit_layer",)
        key = tuple(names) if names else None
        if key not in functions:
            functions[key] = tf.function(
                (lambda f: {n: v for n, v in call(f).items() if n in key}) if key else call,
                reduce_retracing=True)
        inputs = {name: tf.constant(features[name], tf.int32) for name in TOKEN_FEATURES}
        return {name: value.numpy() for name, value in functions[key](inputs).items()}

    return run


def hf_tokenizer(path: str, do_lower_case: Optional[bool]):
    """(the Python tokenizer of a Hugging Face directory, its tokenizer_config.json)."""
    from albert_tf.checkpoints import hf
    from albert_tf.tokenization import load_tokenizer

    settings = hf.read_hf_tokenizer_config(path)
    lower = settings.get("do_lower_case", True) if do_lower_case is None else do_lower_case
    spm_model = os.path.join(path, "spiece.model")
    vocab = os.path.join(path, "vocab.txt")
    if os.path.exists(spm_model):
        return load_tokenizer(spm_model_file=spm_model, do_lower_case=lower), settings
    if os.path.exists(vocab):
        return load_tokenizer(vocab_file=vocab, do_lower_case=lower), settings
    tokenizer_json = os.path.join(path, "tokenizer.json")
    if os.path.exists(tokenizer_json):  # transformers 5 saves only this
        from albert_tf.tokenization.tokenizer_json import vocabulary_file_from_tokenizer_json

        kind, rebuilt = vocabulary_file_from_tokenizer_json(tokenizer_json)
        files = {"spm_model_file" if kind == "sentencepiece" else "vocab_file": rebuilt}
        return load_tokenizer(do_lower_case=lower, **files), settings
    raise UserFileNotFoundError(f"{path}: no tokenizer (spiece.model, vocab.txt or "
                                "tokenizer.json)")


@dataclasses.dataclass
class KerasCheckpoint:
    """A Hugging Face or official directory read as a Keras model of this library.

    model: built, weights loaded (`convert.build_model`'s classes); name: its convert
    --model name ("pretrainer", "classifier", ...); tokenizer: the Python tokenizer;
    max_length: tokens per row; labels / problem_type / num_labels: a head's, else None.
    """

    model: object
    name: str
    tokenizer: object
    max_length: int
    labels: Optional[List[str]] = None
    problem_type: Optional[str] = None
    num_labels: Optional[int] = None


def read_huggingface(path: str, do_lower_case: Optional[bool] = None) -> KerasCheckpoint:
    """A Hugging Face ALBERT directory (any head) as a Keras model."""
    from albert_tf import convert
    from albert_tf.checkpoints import hf

    values = hf.read_hf_config(path)
    source = os.path.join(path, "config.json")
    name, num_labels = hf.model_of_hf_config(values, source)
    tokenizer, settings = hf_tokenizer(path, do_lower_case)
    config = hf.config_from_hf(values, source)
    model = convert.build_model(name, config, num_labels, num_choices=1)
    hf.load_hf_checkpoint(model, path)
    max_length = min(int(settings.get("model_max_length") or config.max_position_embeddings),
                     config.max_position_embeddings)
    return KerasCheckpoint(model, name, tokenizer, max_length,
                           hf.labels_from_hf_config(values, source), values.get("problem_type"),
                           num_labels if name in ("classifier", "token_classifier") else None)


def read_official(path: str, do_lower_case: Optional[bool] = None) -> KerasCheckpoint:
    """An official TF1 / TF-Hub directory as the pretrained Keras model (AlbertPretrainer)."""
    from albert_tf.checkpoints import from_official_dir

    official = from_official_dir(path, do_lower_case=True if do_lower_case is None
                                 else do_lower_case)
    return KerasCheckpoint(official.model, "pretrainer", official.tokenizer,
                           official.config.max_position_embeddings)


def _huggingface_source(path: str, do_lower_case: Optional[bool]) -> ModelSource:
    read = read_huggingface(path, do_lower_case)
    head = MODEL_HEADS[read.name]
    # Without problem_type, a one-output classifier is read as Hugging Face reads it (sigmoid).
    return ModelSource(read.tokenizer, head, keras_runner(read.model, head), read.max_length,
                       "huggingface", path, read.labels, read.problem_type, read.num_labels,
                       model=read.model)


def _sentence_transformers_source(path: str, do_lower_case: Optional[bool]) -> ModelSource:
    from albert_tf.checkpoints import sentence_transformers

    spec = sentence_transformers.read_sentence_transformers_dir(path)
    if not is_hf_dir(spec.transformer_path):
        raise UserFileNotFoundError(f"{spec.transformer_path}: the Transformer module's "
                                    "directory has no config.json + model.safetensors")
    source = _huggingface_source(spec.transformer_path, do_lower_case)
    if spec.max_seq_length:
        source.max_length = min(source.max_length, spec.max_seq_length)
    source.path, source.kind = path, "sentence_transformers"
    source.pooling = {"pooling": spec.pooling, "normalize": spec.normalize,
                      "lowercase": spec.lowercase}
    return source


def _official_source(path: str, do_lower_case: Optional[bool]) -> ModelSource:
    read = read_official(path, do_lower_case)
    return ModelSource(read.tokenizer, "masked_lm", keras_runner(read.model, "masked_lm"),
                       read.max_length, "official", path, model=read.model)


# --- exports ----------------------------------------------------------------------------------


def read_export_metadata(export_dir: str) -> Dict:
    """What an export says of itself: albert_tf_export.json, else model.onnx's or
    model.tflite's metadata."""
    record = os.path.join(export_dir, EXPORT_RECORD)
    if os.path.exists(record):
        return read_json(record)
    if os.path.exists(os.path.join(export_dir, "model.onnx")):
        from albert_tf.export.records import read_onnx_metadata

        return read_onnx_metadata(os.path.join(export_dir, "model.onnx"))
    if os.path.exists(os.path.join(export_dir, "model.tflite")):
        from albert_tf.export.litert_runtime import read_metadata

        return read_metadata(os.path.join(export_dir, "model.tflite"))
    raise UserValueError(f"{export_dir}: a SavedModel without {EXPORT_RECORD} (exports written "
                         "before albert-tf 0.46 have none): export it again, or add "
                         "--export_format=saved_model,onnx")


def _export_source(export_dir: str, do_lower_case: Optional[bool],
                   chosen: Optional[str] = None) -> ModelSource:
    """An export's source; `chosen` ("model.onnx" / "model.tflite") picks that file, else
    the SavedModel, then model.onnx, then model.tflite."""
    from albert_tf.tokenization import load_tokenizer

    metadata = read_export_metadata(export_dir)
    task = metadata.get("task")
    head = EXPORT_HEADS.get(task)
    if head is None:
        raise UserValueError(f"{export_dir}: a {task} export; the pipelines read classifier, "
                             "tagging, SQuAD v1 and sentence-embedding exports (use the run's "
                             "Hugging Face or TF1 checkpoint for the others)")
    if metadata.get("use_crf"):
        raise UserValueError(f"{export_dir}: a tagging export with a CRF; the pipeline decodes "
                             "each token on its own (as Hugging Face's), which would ignore the "
                             "CRF's transitions: serve the SavedModel's serving_default, or "
                             "predict with run_ner.py --do_predict")
    vocabulary = os.path.join(export_dir, metadata.get("vocabulary_file") or "")
    if not metadata.get("vocabulary_file") or not os.path.exists(vocabulary):
        raise UserFileNotFoundError(f"{export_dir}: the export's vocabulary file "
                                    f"{metadata.get('vocabulary_file')!r} is missing")
    lower = metadata.get("do_lower_case", True) if do_lower_case is None else do_lower_case
    if metadata.get("tokenizer") == "wordpiece":
        tokenizer = load_tokenizer(vocab_file=vocabulary, do_lower_case=lower)
    else:
        tokenizer = load_tokenizer(spm_model_file=vocabulary, do_lower_case=lower)
    run, kind = _export_runner(export_dir, head, chosen, bool(metadata.get("multi_label")),
                               exits="early_exit" in metadata)
    labels = metadata.get("labels")
    problem_type = ("regression" if task == "classifier" and not labels
                    else "multi_label_classification" if metadata.get("multi_label") else None)
    return ModelSource(tokenizer, head, run, int(metadata.get("max_seq_length") or 512), kind,
                       export_dir, labels, problem_type,
                       len(labels) if labels else (1 if head == "classifier" else None),
                       {key: metadata[key] for key in READING if key in metadata},
                       light={key: metadata[key] for key in LIGHT if key in metadata})


def _export_runner(export_dir: str, head: str, chosen: Optional[str],
                   multi_label: bool = False, exits: bool = False):
    """(run, kind) of the export's `chosen` file (an .onnx or .tflite file's name), else of
    its SavedModel, then model.onnx, then model.tflite (`multi_label`: a classifier's
    probabilities are sigmoids; `exits`: its graph exits early, each row's `exit_layer`
    is read too)."""
    names = HEAD_OUTPUTS[head] + (("exit_layer",) if exits else ())
    onnx_file = os.path.join(export_dir, chosen if chosen and chosen.endswith(".onnx")
                             else "model.onnx")
    tflite_file = os.path.join(export_dir, chosen if chosen and chosen.endswith(".tflite")
                               else "model.tflite")
    if chosen is None and os.path.exists(os.path.join(export_dir, "saved_model.pb")):
        return _saved_model_runner(export_dir, names, multi_label), "saved_model"
    if not (chosen or "").endswith(".tflite") and os.path.exists(onnx_file):
        import onnxruntime

        session = onnxruntime.InferenceSession(onnx_file, providers=["CPUExecutionProvider"])
        inputs = [i.name for i in session.get_inputs()]

        def run(features, wanted=None):  # an export returns its own outputs
            feed = {name: _export_feature(features, name) for name in inputs}
            return dict(zip(names, session.run(list(names), feed)))

        return run, "onnx"
    from albert_tf.export.litert_runtime import LiteRTModel

    model = LiteRTModel(tflite_file)

    def run(features, wanted=None):  # an export returns its own outputs
        outputs = model(**{name: _export_feature(features, name) for name in model.input_names})
        return {name: np.asarray(outputs[name]) for name in names}

    return run, "tflite"


def _export_feature(features: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """A feature by name; a tagging export's `word_mask` is every real token; a SQuAD
    export's `p_mask` (read by v2.0's head only; the pipelines serve v1.1) is zeros."""
    if name == "word_mask":
        return np.asarray(features["input_mask"], np.int32)
    if name == "p_mask" and name not in features:
        return np.zeros_like(np.asarray(features["input_ids"], np.int32))
    return np.asarray(features[name], np.int32)


def _saved_model_runner(export_dir: str, names, multi_label: bool = False) -> Callable:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the raw-text signatures hold)

    loaded = tf.saved_model.load(export_dir)
    function = loaded.signatures["serve_tokens"]
    inputs = set(function.structured_input_signature[1])

    def run(features, wanted=None):  # an export returns its own outputs
        feed = {name: tf.constant(_export_feature(features, name)) for name in inputs}
        outputs = {name: value.numpy() for name, value in function(**feed).items()}
        if "logits" in names and "logits" not in outputs:
            # A classifier's serve_tokens returns probabilities: their logarithms are the
            # logits up to a constant per row, which softmax (and argmax) do not see.
            # A multi-label classifier's are sigmoids: their logits are log(p / (1 - p)).
            probabilities = outputs["probabilities"].astype(np.float64)
            if multi_label:
                clipped = np.clip(probabilities, 1e-30, 1 - 1e-7)
                outputs["logits"] = np.log(clipped) - np.log1p(-clipped)
            else:
                outputs["logits"] = (probabilities if probabilities.shape[-1] == 1
                                     else np.log(np.maximum(probabilities, 1e-30)))
        return {name: outputs[name] if name == "exit_layer" else
                outputs[name].astype(np.float32) for name in names}

    run.loaded = loaded  # keeps the SavedModel's variables alive
    return run
