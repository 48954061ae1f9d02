"""`from_pretrained(source, task=None, **options)`: a Keras task model on raw text.

Sources:
  a Hugging Face ALBERT directory        config.json + model.safetensors + spiece.model /
                                         vocab.txt, any head (`pipelines.sources`)
  an official TF1 / TF-Hub directory     albert_config.json + vocabulary + checkpoint
  a sentence-transformers directory      modules.json (Transformer, Pooling, Normalize;
                                         either generation of module paths): a
                                         sentence-embedding task with its pooling
  a keras-hub preset directory           AlbertBackbone, AlbertTextClassifier or
                                         AlbertMaskedLM (`checkpoints.keras_hub`; keras-hub
                                         need not be installed)
  a run_classifier.py, run_ner.py or     model.ckpt-best in the model of its
  run_race.py output directory           albert_tf_run.json; the vocabulary from its
                                         export/ (or vocabulary_file=)
  an export directory (any CLI's          the SavedModel's weights in the model its
  --export_dir, a task's export(); or    albert_tf_export.json describes (task, labels,
  a run directory holding one)           settings, albert_config)
  a `.keras` file of a task saved here   (or the task model object itself)
The task is the source's head when it has one (a Hugging Face classifier is a
text-classification task, with its labels); else `task=` names it, with the pipelines'
task names. A new head (another task, or another number of classes) starts from the
source's encoder weights and the original's initialisation (truncated normal, 0.02).

Options (each task's in its builder below):
  sequence_length   tokens per packed row; default the source's (its tokenizer's
                    model_max_length, else max_position_embeddings); longer is refused
  do_lower_case     the tokenizer's casing (default the source's; True for official)
  vocabulary_file   the SentencePiece model or vocab.txt, for a source without one
  text-classification: num_classes (alias num_labels), labels (alias id2label: a list or
                    Hugging Face's {id: name}), problem_type ("single_label_classification",
                    "multi_label_classification", "regression"; or multi_label=True),
                    dropout (on the pooled output, default 0.1 as run_classifier.py),
                    exit_heads (below)
  token-classification: labels (the label names, with "O"; alias id2label), tag_scheme
                    ("iob2" or "bioes"), use_crf, constrain_decoding (default True),
                    doc_stride (default run_ner.py's), word_split ("basic" or "characters",
                    how a raw text becomes words), dropout (default 0.1), exit_heads
  multiple-choice:  packing ("race", 4 options; or "c3", 2-4), max_qa_length (RACE's;
                    default run_race.py's), dropout (default 0.1), exit_heads
  exit_heads        (the three above) "none", "shared" or "per_layer": an exit after every
                    layer, trained by fit with PABEE's depth-weighted loss
                    (docs/fast_inference.md); default the source's. The source's
                    inference_layers and early_exit are kept.
  sentence-embedding: pooling ("mean"; cls, max, mean_sqrt_len, or several), normalize
                    (False), scale (20: the losses' scale of the cosines)
  question-answering: doc_stride, max_query_length (run_squad.py's defaults, or what fits),
                    n_best_size (20), max_answer_length (30 tokens); SQuAD v2.0:
                    version_2_with_negative (default the source's), start_n_top,
                    end_n_top (5, 5), null_score_diff_threshold, dropout (0.1)
  fill-mask:        fit's instances, as create_pretraining_data.py's flags: masked_lm_prob
                    (0.15), max_predictions_per_seq (20), ngram (3), do_whole_word_mask
                    (True), short_seq_prob (0.1), random_seed (12345)
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, Optional

import keras

from albert_tf.errors import UserFileNotFoundError, UserValueError
from albert_tf.keras_tasks.feature_extractor import AlbertFeatureExtractor
from albert_tf.keras_tasks.masked_lm import AlbertMaskedLM
from albert_tf.keras_tasks.multiple_choice import AlbertMultipleChoiceTask
from albert_tf.keras_tasks.preprocessor import AlbertPreprocessor
from albert_tf.keras_tasks.question_answerer import AlbertQuestionAnswerer
from albert_tf.keras_tasks.sentence_embedder import AlbertSentenceEmbedder
from albert_tf.keras_tasks.tagger import AlbertTagger
from albert_tf.keras_tasks.task import Task, load_task_file
from albert_tf.keras_tasks.text_classifier import PROBLEM_TYPES, AlbertTextClassifier
from albert_tf.modeling.early_exit import check_exit_heads
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.exiting import ExitingModel
from albert_tf.modeling.models import (AlbertClassifier, AlbertMultipleChoice, AlbertPretrainer,
                                       AlbertSpanLabeler, AlbertSquadV2)
from albert_tf.modeling.sentence_encoder import AlbertSentenceEncoder
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.training import run_dir

# The pipelines' aliases.
TASK_ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification",
                "masked-lm": "fill-mask"}
# A source's head (convert's --model name) -> the task it serves as it is.
HEAD_TASKS = {"classifier": "text-classification", "token_classifier": "token-classification",
              "span_labeler": "question-answering", "squad_v2": "question-answering",
              "multiple_choice": "multiple-choice", "pretrainer": "fill-mask",
              "encoder": "feature-extraction", "sentence_encoder": "sentence-embedding"}
ALL_TASKS = ("text-classification", "token-classification", "question-answering",
             "multiple-choice", "fill-mask", "sentence-embedding", "feature-extraction")


@dataclasses.dataclass
class Source:
    """What a source gives a task: a built network of this library (weights loaded), its
    convert --model name, the preprocessor's vocabulary and casing (a preprocessor, or a
    Python tokenizer), the longest row, and a head's labels / problem type."""

    network: keras.Model
    name: str
    max_length: int
    preprocessor: Optional[AlbertPreprocessor] = None
    tokenizer: object = None
    labels: Optional[List[str]] = None
    problem_type: Optional[str] = None
    # Task settings the source records (the builders' defaults): a tagger's tag_scheme,
    # doc_stride, word_split; a multiple-choice model's max_qa_length.
    settings: Dict = dataclasses.field(default_factory=dict)

    @property
    def encoder(self) -> AlbertEncoder:
        return self.network if isinstance(self.network, AlbertEncoder) else self.network.encoder

    def make_preprocessor(self, sequence_length: int) -> AlbertPreprocessor:
        if self.preprocessor is not None:
            return self.preprocessor.with_sequence_length(sequence_length)
        tokenizer = self.tokenizer
        return AlbertPreprocessor(getattr(tokenizer, "spm_model_file", None)
                                  or tokenizer.vocab_file, tokenizer.do_lower_case,
                                  sequence_length)


def read_source(source, do_lower_case: Optional[bool] = None,
                vocabulary_file: Optional[str] = None) -> Source:
    """A `Source` from a task model, a .keras file, a keras-hub preset, a run directory, a
    Hugging Face or an official directory; one line naming the path otherwise.
    `vocabulary_file`: for a source that holds none (a run directory without an export)."""
    if isinstance(source, Task):
        return _task_source(source, do_lower_case)
    if not isinstance(source, (str, os.PathLike)):
        raise UserValueError(f"from_pretrained takes a path or a task model of albert_tf, "
                             f"got {type(source).__name__}")
    path = os.fspath(source)
    if not os.path.exists(path):
        raise UserFileNotFoundError(f"{path}: no such file or directory")
    if path.endswith(".keras") and os.path.isfile(path):
        return _task_source(load_task_file(path, path), do_lower_case)
    from albert_tf.checkpoints import keras_hub, sentence_transformers
    from albert_tf.pipelines import sources

    if keras_hub.is_preset_dir(path):
        return _keras_hub_source(path, do_lower_case)
    run = run_dir.read_record(path)
    if run is not None and run.kind == run_dir.FINETUNING:  # a pretraining run: official
        if _run_export_record(path) and not _reads_run_weights(run):
            return _export_source(os.path.join(path, "export"), do_lower_case)
        return _run_source(path, run, do_lower_case, vocabulary_file)
    if sentence_transformers.is_sentence_transformers_dir(path):
        return _sentence_transformers_source(path, do_lower_case)
    if sources.is_hf_dir(path):
        read = sources.read_huggingface(path, do_lower_case)
    elif os.path.isdir(path) and sources.has_official_config(path):
        read = sources.read_official(path, do_lower_case)
    elif sources.export_dir_of(path) is not None:
        return _export_source(sources.export_dir_of(path), do_lower_case)
    else:
        raise UserValueError(
            f"{path}: not a model from_pretrained reads: a Hugging Face ALBERT directory "
            "(config.json + model.safetensors), an official directory (albert_config.json, "
            "vocabulary, checkpoint), a keras-hub preset (config.json + model.weights.h5), a "
            "run_classifier.py run directory (albert_tf_run.json) or a .keras file of an "
            "albert_tf task")
    return Source(read.model, read.name, read.max_length, tokenizer=read.tokenizer,
                  labels=read.labels, problem_type=read.problem_type)


def _sentence_transformers_source(path: str, do_lower_case: Optional[bool]) -> Source:
    """A sentence-transformers directory (either generation of module paths): its
    Transformer's Hugging Face model under its Pooling and Normalize, as an
    `AlbertSentenceEncoder`; its max_seq_length bounds the rows."""
    from albert_tf.checkpoints import sentence_transformers
    from albert_tf.pipelines import sources

    spec = sentence_transformers.read_sentence_transformers_dir(path)
    if not sources.is_hf_dir(spec.transformer_path):
        raise UserFileNotFoundError(f"{spec.transformer_path}: the Transformer module's "
                                    "directory has no config.json + model.safetensors")
    if do_lower_case is None and spec.lowercase:
        do_lower_case = True
    read = sources.read_huggingface(spec.transformer_path, do_lower_case)
    encoder = read.model if isinstance(read.model, AlbertEncoder) else read.model.encoder
    network = AlbertSentenceEncoder(encoder.config, spec.pooling, spec.normalize)
    network.build()
    network.encoder.set_weights(encoder.get_weights())
    length = min(read.max_length, spec.max_seq_length or read.max_length)
    return Source(network, "sentence_encoder", length, tokenizer=read.tokenizer)


def _keras_hub_source(path: str, do_lower_case: Optional[bool]) -> Source:
    """A keras-hub preset (backbone, text classifier or masked LM) as the models of this
    library, read without keras-hub (`checkpoints.keras_hub`)."""
    from albert_tf import convert
    from albert_tf.checkpoints import assign, keras_hub

    preset = keras_hub.read_preset(path)
    name = {"backbone": "encoder", "classifier": "classifier",
            "masked_lm": "pretrainer"}[preset.task]
    network = convert.build_model(name, preset.config, num_labels=preset.num_classes or 2)
    assign.assign_named_arrays(network, keras_hub.shapes_of(preset.arrays),
                               preset.arrays.__getitem__, path, "keras-hub")
    # keras-hub's tokenizer does not lower-case; the original (and this library) does.
    preprocessor = AlbertPreprocessor(preset.vocabulary_file,
                                      True if do_lower_case is None else do_lower_case,
                                      preset.config.max_position_embeddings)
    length = min(preset.sequence_length or preset.config.max_position_embeddings,
                 preset.config.max_position_embeddings)
    return Source(network, name, length, preprocessor)


def _run_source(path: str, identity, do_lower_case: Optional[bool],
                vocabulary_file: Optional[str]) -> Source:
    """A run_classifier.py, run_ner.py or run_race.py output directory: its best weights
    (model.ckpt-best) in the model its record describes (albert_tf_run.json: the model,
    the labels, a tagger's scheme and CRF); the vocabulary, casing, length (and a
    classifier's problem, a tagger's stride) from its export (export/albert_tf_export.json),
    else `vocabulary_file`. `identity`: the run's record (`training.run_dir.RunIdentity`)."""
    from albert_tf.checkpoints import load_tf1_checkpoint
    from albert_tf.config import AlbertConfig

    tagging = identity.task.startswith("ner ") and "labels" in identity.details
    choosing = identity.task in ("race", "c3")
    if not (tagging or choosing) and (not _is_classification_task(identity.task)
                                      or "labels" not in identity.details):
        raise UserValueError(f"{path}: a run of {identity.task!r} without an export/: "
                             "from_pretrained reads run_classifier.py's, run_ner.py's and "
                             "run_race.py's best weights, and any run's export (rerun it "
                             "with --export_dir)")
    if not os.path.exists(os.path.join(path, "model.ckpt-best.index")):
        raise UserFileNotFoundError(f"{path}: no model.ckpt-best (the run has not finished "
                                    "its first evaluation)")
    record = _run_export_record(path) or {}
    vocabulary = vocabulary_file or (record and os.path.join(path, "export",
                                                             record["vocabulary_file"]))
    if not vocabulary:
        raise UserValueError(f"{path}: the run has no export/ with its vocabulary: give "
                             "vocabulary_file= (its --spm_model_file or --vocab_file)")
    config = AlbertConfig(**identity.model)
    if choosing:
        read = Source(AlbertMultipleChoice(config), "multiple_choice", 0,
                      settings={"packing": identity.task})
    else:
        read = (_tagger_run(identity, config) if tagging
                else _classifier_run(identity, config, record))
    read.network.build()
    load_tf1_checkpoint(read.network, os.path.join(path, "model.ckpt-best"))
    lower = record.get("do_lower_case", True)
    read.preprocessor = AlbertPreprocessor(vocabulary, lower if do_lower_case is None
                                           else do_lower_case,
                                           config.max_position_embeddings)
    read.max_length = int(record.get("max_seq_length") or config.max_position_embeddings)
    for name in ("doc_stride", "max_qa_length"):
        if (tagging or choosing) and record.get(name):
            read.settings[name] = int(record[name])
    return read


def _reads_run_weights(identity) -> bool:
    """Whether `_run_source` reads this run's model.ckpt-best (run_classifier.py's,
    run_ner.py's and run_race.py's runs); the others are read through their export."""
    if identity.task in ("race", "c3"):
        return True
    if identity.task.startswith("ner "):
        return "labels" in identity.details
    return _is_classification_task(identity.task) and "labels" in identity.details


# An export's task (albert_tf_export.json) -> its network's convert --model name.
EXPORT_NETWORKS = {"classifier": "classifier", "tagging": "token_classifier",
                   "squad_v1": "span_labeler", "squad_v2": "squad_v2",
                   "multiple_choice": "multiple_choice",
                   "sentence_embedding": "sentence_encoder"}


def _export_source(export_dir: str, do_lower_case: Optional[bool]) -> Source:
    """An albert-tf export (a CLI's --export_dir, or a task's export()): the network its
    record describes (albert_tf_export.json: the task, labels, settings and the model's
    albert_config) with the SavedModel's weights; the vocabulary and casing the export's."""
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.pipelines import sources

    record = sources.read_export_metadata(export_dir)
    task = record.get("task")
    if task not in EXPORT_NETWORKS:
        raise UserValueError(f"{export_dir}: a {task} export; from_pretrained reads "
                             f"{', '.join(EXPORT_NETWORKS)} exports")
    if "albert_config" not in record:
        raise UserValueError(f"{export_dir}: the export does not record its model's config "
                             "(exports written before 2026-12-07): read the run "
                             "directory it was exported from, or export it again")
    variables = os.path.join(export_dir, "variables", "variables")
    if not os.path.exists(variables + ".index"):
        raise UserFileNotFoundError(f"{export_dir}: no SavedModel (its ONNX and LiteRT files "
                                    "hold no trainable weights): export with "
                                    "format=\"saved_model\" or read the run directory")
    config = AlbertConfig.from_dict(record["albert_config"])
    read = _export_network(task, config, record, variables)
    if not read.network.built:
        read.network.build()
    status = tf.train.Checkpoint(model=read.network).read(variables)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as error:
        raise UserValueError(f"{export_dir}: the SavedModel's weights do not fit the model "
                             f"its record describes ({str(error).splitlines()[0][:160]})"
                             ) from None
    status.expect_partial()
    vocabulary = os.path.join(export_dir, record.get("vocabulary_file") or "")
    if not record.get("vocabulary_file") or not os.path.exists(vocabulary):
        raise UserFileNotFoundError(f"{export_dir}: the export's vocabulary file "
                                    f"{record.get('vocabulary_file')!r} is missing")
    lower = record.get("do_lower_case", True)
    read.preprocessor = AlbertPreprocessor(vocabulary, lower if do_lower_case is None
                                           else do_lower_case, config.max_position_embeddings)
    read.max_length = int(record.get("max_seq_length") or config.max_position_embeddings)
    return read


def _export_network(task: str, config, record: Dict, variables: str) -> Source:
    """The network (in a Source) an export's record describes, with its labels and the
    task settings it records."""
    import tensorflow as tf

    from albert_tf import convert

    name = EXPORT_NETWORKS[task]
    labels = record.get("labels")
    settings = {key: record[key] for key in ("doc_stride", "max_query_length", "n_best_size",
                                             "max_answer_length", "max_qa_length",
                                             "tag_scheme", "null_score_diff_threshold")
                if record.get(key) is not None}
    # The export's light inference (exit heads, layers run, early exit), as exported.
    light = {key: record[key] for key in ("exit_heads", "inference_layers", "early_exit")
             if record.get(key) is not None}
    if task == "classifier":
        multi = bool(record.get("multi_label"))
        return Source(AlbertClassifier(config, num_labels=len(labels) if labels else 1,
                                       multi_label=multi, **light), name, 0, labels=labels,
                      problem_type=("regression" if not labels else
                                    "multi_label_classification" if multi
                                    else "single_label_classification"))
    if task == "tagging":
        reader = tf.train.load_checkpoint(variables)
        key = "word_split/.ATTRIBUTES/VARIABLE_VALUE"
        settings["word_split"] = (reader.get_tensor(key).decode()
                                  if reader.has_tensor(key) else "basic")
        return Source(AlbertTokenClassifier(config, num_labels=len(labels),
                                            use_crf=bool(record.get("use_crf")), **light),
                      name, 0, labels=labels, settings=settings)
    if task == "sentence_embedding":
        return Source(AlbertSentenceEncoder(config, record.get("pooling") or ["mean"],
                                            bool(record.get("normalize"))), name, 0)
    if task == "multiple_choice":
        settings["packing"] = record.get("task_name") or "race"
    return Source(convert.build_model(name, config), name, 0, settings=settings)


def _classifier_run(identity, config, record: Dict) -> Source:
    labels = identity.details.get("labels")
    multi = bool(record.get("multi_label"))
    network = AlbertClassifier(config, num_labels=1 if labels is None else len(labels),
                               multi_label=multi)
    problem = ("regression" if labels is None else
               "multi_label_classification" if multi else "single_label_classification")
    return Source(network, "classifier", 0,
                  labels=None if labels is None else [str(name) for name in labels],
                  problem_type=problem)


def _tagger_run(identity, config) -> Source:
    from albert_tf.tasks.tagging import datasets

    details = identity.details
    labels = [str(name) for name in details["labels"]]
    scheme = str(details.get("tag_scheme") or "iob2")
    # The builder constrains decoding (constrain_decoding=True): run_ner.py's
    # --constrain_decoding is not recorded, and True is its default.
    network = AlbertTokenClassifier(config, num_labels=len(labels),
                                    use_crf=bool(details.get("use_crf")))
    task_name = identity.task.split(" ", 1)[1]
    try:
        word_split = datasets.get(task_name).settings["word_split"]
    except (KeyError, ValueError):
        word_split = "basic"
    return Source(network, "token_classifier", 0, labels=labels,
                  settings={"tag_scheme": scheme, "word_split": word_split})


def _is_classification_task(name: str) -> bool:
    from albert_tf.tasks.classification import datasets

    try:
        datasets.get(name)
    except (KeyError, ValueError):
        return False
    return True


def _run_export_record(path: str) -> Optional[Dict]:
    from albert_tf.export.records import EXPORT_RECORD
    from albert_tf.fileio import read_json

    record = os.path.join(path, "export", EXPORT_RECORD)
    return read_json(record) if os.path.exists(record) else None


def _task_source(task: Task, do_lower_case: Optional[bool]) -> Source:
    if task.preprocessor is None:
        raise UserValueError(f"{type(task).__name__} has no preprocessor: a new task needs "
                             "its vocabulary")
    if do_lower_case is not None and do_lower_case != task.preprocessor.do_lower_case:
        raise UserValueError(f"do_lower_case={do_lower_case}: this model's vocabulary was "
                             f"trained with do_lower_case={task.preprocessor.do_lower_case}")
    name = {AlbertClassifier: "classifier", AlbertTokenClassifier: "token_classifier",
            AlbertMultipleChoice: "multiple_choice",
            AlbertPretrainer: "pretrainer", AlbertEncoder: "encoder",
            AlbertSpanLabeler: "span_labeler", AlbertSquadV2: "squad_v2",
            AlbertSentenceEncoder: "sentence_encoder"}.get(type(task.network), "model")
    settings = {key: getattr(task, key) for key in ("tag_scheme", "doc_stride", "word_split",
                                                    "max_qa_length", "packing")
                if hasattr(task, key)}
    if isinstance(task, AlbertMaskedLM):
        config = task.get_config()
        settings.update({name: config[name] for name in MASKED_LM_OPTIONS})
    if isinstance(task, AlbertQuestionAnswerer):
        config = task.get_config()
        settings.update({name: config[name] for name in QUESTION_ANSWERING_OPTIONS
                         + ("null_score_diff_threshold",) if config[name] is not None})
    return Source(task.network, name, task.preprocessor.sequence_length, task.preprocessor,
                  labels=getattr(task, "labels", None),
                  problem_type=getattr(task, "problem_type", None), settings=settings)


def from_pretrained(source, task: Optional[str] = None, *, sequence_length: Optional[int] = None,
                    do_lower_case: Optional[bool] = None, vocabulary_file: Optional[str] = None,
                    **options) -> Task:
    """A Keras task model on raw text from `source` (see the module docstring)."""
    read = read_source(source, do_lower_case, vocabulary_file)
    task = _resolve_task(task, read)
    builder = BUILDERS[task]
    positions = read.encoder.config.max_position_embeddings
    length = read.max_length if sequence_length is None else int(sequence_length)
    if length > positions:
        raise UserValueError(f"sequence_length={length} is longer than the model's {positions} "
                             "positions (max_position_embeddings)")
    if length < 3:
        raise UserValueError(f"sequence_length must be at least 3, got {length}")
    return builder(read, read.make_preprocessor(length), dict(options))


def _resolve_task(task: Optional[str], read: Source) -> str:
    if task is None:
        task = HEAD_TASKS.get(read.name)
        if task is None:
            raise UserValueError("this source has no task head: name one with task= ("
                                 f"{', '.join(ALL_TASKS)})")
        return task
    task = TASK_ALIASES.get(task, task)
    if task not in ALL_TASKS:
        raise UserValueError(f"task {task!r}: one of {', '.join(ALL_TASKS)} (aliases "
                             f"{', '.join(TASK_ALIASES)})")
    return task


def _refuse_unknown(options: Dict, task: str) -> None:
    if options:
        raise UserValueError(f"{task}: unknown option(s) {', '.join(sorted(options))}")


def _label_names(value) -> Optional[List[str]]:
    """labels as a list, from a list or Hugging Face's id2label {id: name}."""
    if value is None:
        return None
    if isinstance(value, dict):
        try:
            order = sorted(value, key=int)
        except (TypeError, ValueError):
            raise UserValueError("id2label maps ids 0..K-1 to names") from None
        if [int(k) for k in order] != list(range(len(order))):
            raise UserValueError("id2label maps ids 0..K-1 to names")
        return [str(value[k]) for k in order]
    return [str(name) for name in value]


def build_text_classifier(read: Source, preprocessor: AlbertPreprocessor,
                          options: Dict) -> AlbertTextClassifier:
    """text-classification options: see the module docstring."""
    num_classes = _option(options, "num_classes", "num_labels")
    labels = _label_names(_option(options, "labels", "id2label"))
    problem_type = options.pop("problem_type", None)
    if options.pop("multi_label", False):
        if problem_type not in (None, "multi_label_classification"):
            raise UserValueError(f"multi_label=True with problem_type={problem_type!r}")
        problem_type = "multi_label_classification"
    dropout = float(options.pop("dropout", 0.1))
    light = _light_settings(options, read)
    _refuse_unknown(options, "text-classification")
    if problem_type is not None and problem_type not in PROBLEM_TYPES:
        raise UserValueError(f"problem_type={problem_type!r}: one of {', '.join(PROBLEM_TYPES)}")
    if problem_type == "regression":
        if num_classes not in (None, 1) or labels:
            raise UserValueError("a regression classifier has one output and no label names")
        num_classes = 1
    if labels is not None and num_classes is not None and len(labels) != num_classes:
        raise UserValueError(f"{len(labels)} labels for num_classes={num_classes}")
    if num_classes is None and labels is not None:
        num_classes = len(labels)
    same_head = isinstance(read.network, AlbertClassifier) and num_classes in (
        None, read.network.num_labels)
    if same_head:
        return _reuse_classifier(read, preprocessor, labels, problem_type, dropout, light)
    if num_classes is None:
        raise UserValueError("text-classification needs num_classes=K (or labels=[...]) for "
                             "a new classification head")
    if not 0.0 <= dropout < 1.0:
        raise UserValueError(f"dropout must be in [0, 1), got {dropout}")
    network = AlbertClassifier(read.encoder.config, num_labels=int(num_classes),
                               dropout_rate=dropout,
                               multi_label=problem_type == "multi_label_classification",
                               **dict(light, early_exit=None))
    network.build()
    network.encoder.set_weights(read.encoder.get_weights())
    return AlbertTextClassifier(network, preprocessor, labels)


def _reuse_classifier(read: Source, preprocessor, labels, problem_type, dropout, light
                      ) -> AlbertTextClassifier:
    """The source's own classifier head, as it is (its labels, unless renamed)."""
    source = read.network
    stored = read.problem_type
    if problem_type is None:
        # Hugging Face reads a one-output head without problem_type as regression too.
        problem_type = stored or ("regression" if source.num_labels == 1
                                  else "single_label_classification")
    multi = problem_type == "multi_label_classification"
    if problem_type == "regression" and source.num_labels != 1:
        raise UserValueError(f"problem_type='regression' but the source's head has "
                             f"{source.num_labels} outputs")
    if not 0.0 <= dropout < 1.0:
        raise UserValueError(f"dropout must be in [0, 1), got {dropout}")
    # A copy: the new task never shares variables with a task model it was made from.
    network = AlbertClassifier(source.config, num_labels=source.num_labels,
                               dropout_rate=dropout, multi_label=multi, **light)
    _copy_weights(network, source)
    return AlbertTextClassifier(network, preprocessor, labels or read.labels)


def build_tagger(read: Source, preprocessor: AlbertPreprocessor, options: Dict) -> AlbertTagger:
    """token-classification options: see the module docstring."""
    from albert_tf.tasks.tagging import schemes

    if options.get("num_labels") is not None or options.get("num_classes") is not None:
        raise UserValueError("token-classification takes labels=[...] (the label names, "
                             "with 'O'), not a number of labels")
    labels = _label_names(_option(options, "labels", "id2label"))
    scheme = options.pop("tag_scheme", None) or read.settings.get("tag_scheme") or "iob2"
    use_crf = options.pop("use_crf", None)
    constrain = bool(options.pop("constrain_decoding", True))
    doc_stride = options.pop("doc_stride", None)
    word_split = options.pop("word_split", None) or read.settings.get("word_split", "basic")
    dropout = float(options.pop("dropout", 0.1))
    light = _light_settings(options, read)
    _refuse_unknown(options, "token-classification")
    source = read.network if isinstance(read.network, AlbertTokenClassifier) else None
    same_labels = source is not None and (labels is None or len(labels) == source.num_labels)
    labels = labels or (read.labels if same_labels else None)
    if not labels:
        raise UserValueError("token-classification needs labels=[...]: the label names, with "
                             "'O' (e.g. albert_tf.tasks.tagging.schemes.labels_from(tags, "
                             "'iob2') lists a data set's)")
    if "O" not in labels:
        raise UserValueError(f"the labels have no 'O' ({', '.join(labels[:6])}"
                             f"{', ...' if len(labels) > 6 else ''}): give labels=[...] naming "
                             "the head's outputs in order")
    if not 0.0 <= dropout < 1.0:
        raise UserValueError(f"dropout must be in [0, 1), got {dropout}")
    try:
        allowed = schemes.allowed_transitions(labels, scheme) if constrain else None
    except ValueError as error:
        raise UserValueError(f"token-classification: {error}") from None
    if doc_stride is None and preprocessor.sequence_length == read.max_length:
        doc_stride = read.settings.get("doc_stride")
    if use_crf is None:
        use_crf = bool(same_labels and source.use_crf)
    if not same_labels:
        light["early_exit"] = None  # a new head: nothing to exit by yet
    network = AlbertTokenClassifier(read.encoder.config, num_labels=len(labels),
                                    dropout_rate=dropout, use_crf=bool(use_crf),
                                    allowed=allowed, **light)
    network.build()
    # Copies: never shares variables with the model it was made from. A head of the same
    # labels is kept (the emissions, when a CRF is added to a softmax head, as run_ner.py's
    # --init_checkpoint keeps them); the CRF's transitions start at 0 unless the source's.
    network.encoder.set_weights(read.encoder.get_weights())
    if same_labels:
        network.classifier.set_weights(source.classifier.get_weights())
        _copy_exits(network, source)
        if network.use_crf and source.use_crf:
            network.crf.set_weights(source.crf.get_weights())
    return AlbertTagger(network, preprocessor, labels, scheme, doc_stride, word_split)


def build_multiple_choice(read: Source, preprocessor: AlbertPreprocessor,
                          options: Dict) -> AlbertMultipleChoiceTask:
    """multiple-choice options: see the module docstring."""
    max_qa_length = options.pop("max_qa_length", None)
    packing = options.pop("packing", None) or read.settings.get("packing", "race")
    dropout = float(options.pop("dropout", 0.1))
    light = _light_settings(options, read)
    _refuse_unknown(options, "multiple-choice")
    if not 0.0 <= dropout < 1.0:
        raise UserValueError(f"dropout must be in [0, 1), got {dropout}")
    if max_qa_length is None and preprocessor.sequence_length == read.max_length:
        max_qa_length = read.settings.get("max_qa_length")
    network = _start_from(AlbertMultipleChoice(read.encoder.config, num_choices=4,
                                               dropout_rate=dropout, **light), read)
    return AlbertMultipleChoiceTask(network, preprocessor,
                                    max_qa_length if packing == "race" else None, packing)


QUESTION_ANSWERING_OPTIONS = ("doc_stride", "max_query_length", "n_best_size",
                              "max_answer_length")


def build_question_answerer(read: Source, preprocessor: AlbertPreprocessor,
                            options: Dict) -> AlbertQuestionAnswerer:
    """question-answering: doc_stride, max_query_length, n_best_size, max_answer_length;
    version_2_with_negative (SQuAD v2.0's head; default the source's), start_n_top and
    end_n_top (v2.0's beam, 5 and 5), null_score_diff_threshold (v2.0; default the
    source's, else None), dropout (v2.0's answer-class dropout, 0.1); the source's head
    when it is the same."""
    settings = {name: options.pop(name) for name in QUESTION_ANSWERING_OPTIONS
                if name in options}
    v2 = options.pop("version_2_with_negative", None)
    v2 = read.name == "squad_v2" if v2 is None else bool(v2)
    beam = {name: int(options.pop(name, 5)) for name in ("start_n_top", "end_n_top")}
    threshold = options.pop("null_score_diff_threshold",
                            read.settings.get("null_score_diff_threshold"))
    dropout = float(options.pop("dropout", 0.1))
    _refuse_unknown(options, "question-answering")
    if not 0.0 <= dropout < 1.0:
        raise UserValueError(f"dropout must be in [0, 1), got {dropout}")
    if min(beam.values()) < 1:
        raise UserValueError("start_n_top and end_n_top must be at least 1")
    if preprocessor.sequence_length == read.max_length:  # the source's windows
        settings = {**{name: value for name, value in read.settings.items()
                       if name in QUESTION_ANSWERING_OPTIONS}, **settings}
    config = read.encoder.config
    network = _start_from(AlbertSquadV2(config, dropout_rate=dropout, **beam) if v2
                          else AlbertSpanLabeler(config), read)
    return AlbertQuestionAnswerer(network, preprocessor, null_score_diff_threshold=threshold
                                  if v2 else None, **settings)


def build_sentence_embedder(read: Source, preprocessor: AlbertPreprocessor,
                            options: Dict) -> AlbertSentenceEmbedder:
    """sentence-embedding: pooling ("mean" default; "cls", "max", "mean_sqrt_len", or a
    list / comma-separated modes), normalize (False), scale (20); a sentence-transformers
    source keeps its own pooling unless given."""
    source = read.network if isinstance(read.network, AlbertSentenceEncoder) else None
    pooling = options.pop("pooling", None)
    if isinstance(pooling, str):
        pooling = [mode.strip() for mode in pooling.split(",") if mode.strip()]
    pooling = pooling or (list(source.pooling) if source is not None else ["mean"])
    normalize = options.pop("normalize", None)
    normalize = bool(source.normalize if normalize is None and source is not None
                     else normalize)
    scale = float(options.pop("scale", 20.0))
    _refuse_unknown(options, "sentence-embedding")
    try:
        network = AlbertSentenceEncoder(read.encoder.config, pooling, normalize)
    except ValueError as error:
        raise UserValueError(f"sentence-embedding: {error}") from None
    network.build()
    network.encoder.set_weights(read.encoder.get_weights())  # a copy: no weights shared
    return AlbertSentenceEmbedder(network, preprocessor, scale)


def build_feature_extractor(read: Source, preprocessor: AlbertPreprocessor,
                            options: Dict) -> AlbertFeatureExtractor:
    """feature-extraction: a copy of the source's encoder (no options)."""
    _refuse_unknown(options, "feature-extraction")
    encoder = AlbertEncoder(read.encoder.config, name="encoder")
    encoder.build()
    encoder.set_weights(read.encoder.get_weights())
    return AlbertFeatureExtractor(encoder, preprocessor)


# fill-mask's options: the instances fit makes (create_pretraining_data.py's flags).
MASKED_LM_OPTIONS = ("masked_lm_prob", "max_predictions_per_seq", "ngram", "do_whole_word_mask",
                     "short_seq_prob", "random_seed")


def build_masked_lm(read: Source, preprocessor: AlbertPreprocessor,
                    options: Dict) -> AlbertMaskedLM:
    """fill-mask: the source's masked-LM and sentence-order heads when it has them (a
    Hugging Face masked LM, an official or keras-hub checkpoint, a pretraining run), else
    new heads on its encoder (the original's initialisation)."""
    settings = {name: options.pop(name) for name in MASKED_LM_OPTIONS if name in options}
    _refuse_unknown(options, "fill-mask")
    network = _start_from(AlbertPretrainer(read.encoder.config), read)
    if isinstance(read.network, AlbertPretrainer) and read.settings:
        settings = {**read.settings, **settings}
    return AlbertMaskedLM(network, preprocessor, **settings)


def _start_from(network: keras.Model, read: Source) -> keras.Model:
    """`network` built, with the source's weights copied in (never shared with the model
    they came from): all of them when the source is the same kind of model (its head and
    exits too), else its encoder's (a new head keeps its initialisation)."""
    network.build()
    if type(read.network) is type(network) and isinstance(network, ExitingModel):
        _copy_weights(network, read.network)
    elif type(read.network) is type(network):
        network.set_weights(read.network.get_weights())
    else:
        network.encoder.set_weights(read.encoder.get_weights())
    return network


def _light_settings(options: Dict, read: Source) -> Dict:
    """The network's light-inference arguments: `exit_heads` (the option, else the
    source's), and the source's `inference_layers` and `early_exit` (kept when its exits
    are)."""
    source = read.network if isinstance(read.network, ExitingModel) else None
    own = source.exit_heads if source is not None else "none"
    exit_heads = options.pop("exit_heads", None) or own
    try:
        check_exit_heads(exit_heads)
    except ValueError as error:
        raise UserValueError(str(error)) from None
    light = {"exit_heads": exit_heads}
    if source is not None and source.inference_layers is not None:
        light["inference_layers"] = source.inference_layers
    if source is not None and source.early_exit is not None and exit_heads == own:
        light["early_exit"] = source.early_exit.to_dict()
    return light


def _copy_weights(network, source) -> None:
    """The source's encoder, head and (where both have the same) exits into `network`, a
    model of the source's kind whose exits may differ; both built."""
    network.build()  # (idempotent: a fine-tuning model builds once)
    network.encoder.set_weights(source.encoder.get_weights())
    network.classifier.set_weights(source.classifier.get_weights())
    _copy_exits(network, source)


def _copy_exits(network, source) -> None:
    mine, theirs = getattr(network, "exits", None), getattr(source, "exits", None)
    if mine is not None and theirs is not None and [w.shape for w in mine.weights] == [
            w.shape for w in theirs.weights]:
        mine.set_weights(theirs.get_weights())


def _option(options: Dict, *names):
    """The value of the first of the aliases `names` that is given (removed from
    `options`); two of them given at once are refused."""
    given = [name for name in names if options.get(name) is not None]
    if len(given) > 1:
        raise UserValueError(f"give one of {' / '.join(given)}, not both")
    value = options[given[0]] if given else None
    for name in names:
        options.pop(name, None)
    return value


BUILDERS: Dict[str, Callable[[Source, AlbertPreprocessor, Dict], Task]] = {
    "text-classification": build_text_classifier,
    "token-classification": build_tagger,
    "multiple-choice": build_multiple_choice,
    "fill-mask": build_masked_lm,
    "feature-extraction": build_feature_extractor,
    "question-answering": build_question_answerer,
    "sentence-embedding": build_sentence_embedder,
}
