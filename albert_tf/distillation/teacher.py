"""The teacher: a fine-tuned text classifier, NER tagger or multiple-choice model read from
any source `albert_tf.from_pretrained` reads (a run directory, an export directory, a
Hugging Face directory with a head, a .keras file), with its labels and vocabulary.

`teacher_family(path)` says which family a teacher is of from its files alone (no model
built, no TensorFlow): run_distill.py defines that family's flags before parsing them.
"""
from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from typing import Dict, List, Optional

from albert_tf.errors import UserFileNotFoundError, UserValueError

FAMILIES = ("classification", "tagging", "multiple_choice", "span_qa")
# What each family's teacher is, for messages.
FAMILY_MODELS = {"classification": "text classifier", "tagging": "NER tagger",
                 "multiple_choice": "multiple-choice model",
                 "span_qa": "SQuAD v1.1 / CMRC 2018 reader"}
# Hugging Face architectures, .keras task classes and export tasks of the families.
_NAMES = {"AlbertForTokenClassification": "tagging", "AlbertForMultipleChoice":
          "multiple_choice", "AlbertTagger": "tagging", "AlbertMultipleChoiceTask":
          "multiple_choice", "AlbertMultipleChoice": "multiple_choice",
          "tagging": "tagging", "multiple_choice": "multiple_choice",
          "AlbertForQuestionAnswering": "span_qa", "squad_v1": "span_qa",
          "AlbertQuestionAnswerer": "span_qa"}


@dataclasses.dataclass
class Teacher:
    """network: the built task network, weights loaded; family: one of FAMILIES; labels:
    its label names (None for regression and multiple choice); vocabulary: its tokens' file bytes and kind ("sentencepiece" or
    "wordpiece"); do_lower_case: its casing."""

    path: str
    network: object
    family: str
    labels: Optional[List[str]]
    vocabulary: bytes
    tokenizer_kind: str
    do_lower_case: bool
    max_length: int  # tokens per row it reads (its run's --max_seq_length, else positions)

    @property
    def config(self):
        return self.network.config

    def write_vocabulary(self, directory: str) -> str:
        """Writes the teacher's vocabulary into `directory` (spiece.model or vocab.txt);
        returns its path: the student's vocabulary."""
        from albert_tf import fileio

        name = "spiece.model" if self.tokenizer_kind == "sentencepiece" else "vocab.txt"
        path = os.path.join(directory, name)
        os.makedirs(directory, exist_ok=True)
        with fileio.atomic_open(path, "wb") as handle:
            handle.write(self.vocabulary)
        return path


def teacher_family(path: Optional[str]) -> str:
    """The family (FAMILIES) of the teacher at `path`, read from its records alone: a run's
    albert_tf_run.json, an export's albert_tf_export.json, a Hugging Face config.json's
    architecture or a .keras file's task class; "classification" for anything else
    (`load_teacher` then checks the model itself)."""
    if not path or not os.path.exists(path):
        return "classification"
    record = _json_in(path, "albert_tf_run.json")
    if record is not None:
        task = str(record.get("task", ""))
        return ("tagging" if task.startswith("ner ") else
                "multiple_choice" if task in ("race", "c3") else
                "span_qa" if task.startswith("squad v1") else "classification")
    for name in ("albert_tf_export.json", os.path.join("export", "albert_tf_export.json")):
        record = _json_in(path, name)
        if record is not None:
            return _NAMES.get(str(record.get("task")), "classification")
    config = _json_in(path, "config.json") or {}
    for architecture in config.get("architectures") or ():
        if architecture in _NAMES:
            return _NAMES[architecture]
    if path.endswith(".keras") and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            try:
                saved = json.loads(archive.read("config.json"))
            except (KeyError, ValueError):
                return "classification"
        return _NAMES.get(str(saved.get("class_name")), "classification")
    return "classification"


def _json_in(directory: str, name: str) -> Optional[dict]:
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def network_family(network) -> Optional[str]:
    """The family (FAMILIES) of a built task network; None for the others."""
    from albert_tf.modeling.models import (AlbertClassifier, AlbertMultipleChoice,
                                           AlbertSpanLabeler)
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    for kind, family in ((AlbertClassifier, "classification"),
                         (AlbertTokenClassifier, "tagging"),
                         (AlbertMultipleChoice, "multiple_choice"),
                         (AlbertSpanLabeler, "span_qa")):
        if isinstance(network, kind):
            return family
    return None


_LOADED: Dict[str, Teacher] = {}


def load_teacher(path: str, vocabulary_file: Optional[str] = None) -> Teacher:
    """The teacher at `path` (read once per process: a later call returns it, whatever its
    `vocabulary_file`); one line naming --teacher when it is not a model of FAMILIES.
    `vocabulary_file`: for a teacher that holds none (a run directory without an export:
    its --spm_model_file or --vocab_file)."""
    if path not in _LOADED:
        _LOADED[path] = _read_teacher(path, vocabulary_file)
    return _LOADED[path]


def _read_teacher(path: str, vocabulary_file: Optional[str]) -> Teacher:
    from albert_tf.keras_tasks.from_pretrained import read_source
    from albert_tf.modeling.models import AlbertMultipleChoice
    from albert_tf.tasks.multiple_choice.features import NUM_CHOICES

    try:
        read = read_source(path, vocabulary_file=vocabulary_file)
    except UserFileNotFoundError as error:
        text = str(error)
        text = text[len(path) + 2:] if text.startswith(f"{path}: ") else text
        raise UserFileNotFoundError(f"--teacher={path}: {text}") from None
    except UserValueError as error:
        if "vocabulary_file=" not in str(error):
            raise
        raise UserValueError(f"--teacher={path}: the run has no export/ with its vocabulary: "
                             f"give the run's --spm_model_file or --vocab_file") from None
    family = network_family(read.network)
    if family is None:
        raise UserValueError(f"--teacher={path} is a {read.name} model; run_distill.py "
                             f"distils text classifiers, NER taggers, multiple-choice models "
                             f"and SQuAD v1.1 / CMRC 2018 readers (a fine-tuned run, export, "
                             f"Hugging Face directory with a head, or .keras file)")
    network = read.network
    network.early_exit = None  # the teacher answers from every layer
    network.inference_layers = None
    if isinstance(network, AlbertMultipleChoice):
        # Its head scores each choice alone (a Hugging Face model reads any number): it
        # reads the 4 choices of a RACE / C3 question as the student does.
        network.num_choices = NUM_CHOICES
    preprocessor = read.make_preprocessor(read.max_length)
    return Teacher(path, network, family, read.labels, preprocessor._vocabulary,
                   preprocessor.tokenizer_kind, preprocessor.do_lower_case,
                   int(read.max_length or network.config.max_position_embeddings))
