"""The teacher: a fine-tuned classifier read from any source `albert_tf.from_pretrained`
reads (a run directory, an export directory, a Hugging Face directory with a head, a
.keras file), with its labels and vocabulary."""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import List, Optional

from albert_tf.errors import UserValueError


@dataclasses.dataclass
class Teacher:
    """network: the built classifier, weights loaded; labels: its label names (None for
    regression); vocabulary: its tokens' file bytes and kind ("sentencepiece" or
    "wordpiece"); do_lower_case: its casing."""

    path: str
    network: object
    labels: Optional[List[str]]
    vocabulary: bytes
    tokenizer_kind: str
    do_lower_case: bool

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


@functools.lru_cache(maxsize=4)
def load_teacher(path: str, vocabulary_file: Optional[str] = None) -> Teacher:
    """The teacher at `path` (cached); one line naming --teacher when it is not a text
    classifier. `vocabulary_file`: for a teacher that holds none (a run directory without
    an export: its --spm_model_file or --vocab_file)."""
    from albert_tf.keras_tasks.from_pretrained import read_source
    from albert_tf.modeling.models import AlbertClassifier

    try:
        read = read_source(path, vocabulary_file=vocabulary_file)
    except UserValueError as error:
        if "vocabulary_file=" not in str(error):
            raise
        raise UserValueError(f"--teacher={path}: the run has no export/ with its vocabulary: "
                             f"give the run's --spm_model_file or --vocab_file") from None
    if not isinstance(read.network, AlbertClassifier):
        raise UserValueError(f"--teacher={path} is a {read.name} model; run_distill.py "
                             f"distils text classifiers (a fine-tuned run, export, Hugging "
                             f"Face directory with a classification head, or .keras file)")
    network = read.network
    network.early_exit = None  # the teacher answers from every layer
    network.inference_layers = None
    preprocessor = read.make_preprocessor(read.max_length)
    return Teacher(path, network, read.labels, preprocessor._vocabulary,
                   preprocessor.tokenizer_kind, preprocessor.do_lower_case)
