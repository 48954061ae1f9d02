"""The student's config and its first weights.

`student_config(teacher_config, spec)`: spec "tiny" (4 layers, H=312: brightmart's
albert_tiny), "small" (6 layers, H=384), or "layers:k" (the teacher's own config run k
times: ALBERT's shared layer makes a shallower teacher a student). The vocabulary, the
positions and the segment types are always the teacher's: the student reads the teacher's
tokens. A preset may be wider than a small teacher: the soft targets need no common width,
and the hidden-state loss reads the student through a learned projection.

`initialise_from_teacher(student, teacher)`: copies every weight whose TF1 name and shape
the two share (a `layers:k` student: all of them; `tiny` / `small`: the word embeddings when
E matches), so that the student starts from what the teacher learned.
"""
from __future__ import annotations

import dataclasses
from typing import Dict

from albert_tf.config import AlbertConfig
from albert_tf.errors import UserValueError

PRESETS: Dict[str, Dict[str, int]] = {
    "tiny": {"num_hidden_layers": 4, "hidden_size": 312, "intermediate_size": 1248,
             "num_attention_heads": 12, "embedding_size": 128},
    "small": {"num_hidden_layers": 6, "hidden_size": 384, "intermediate_size": 1536,
              "num_attention_heads": 12, "embedding_size": 128},
}


def student_config(teacher: AlbertConfig, spec: str) -> AlbertConfig:
    """The student's AlbertConfig for `spec` (see the module docstring); one line naming
    --student when it is not one of them or asks for more than the teacher has."""
    spec = (spec or "").strip()
    if spec.startswith("layers:"):
        text = spec.split(":", 1)[1]
        if not text.isdigit() or not 1 <= int(text) < teacher.num_hidden_layers:
            raise UserValueError(f"--student={spec}: layers:k needs k from 1 to "
                                 f"{teacher.num_hidden_layers - 1} (fewer than the teacher's "
                                 f"{teacher.num_hidden_layers} layers)")
        groups = min(teacher.num_hidden_groups, int(text))
        return dataclasses.replace(teacher, num_hidden_layers=int(text),
                                   num_hidden_groups=groups)
    if spec not in PRESETS:
        raise UserValueError(f"--student={spec!r}: tiny, small or layers:k")
    values = PRESETS[spec]
    return dataclasses.replace(teacher, num_hidden_groups=1, inner_group_num=1,
                               parameter_sharing="all", **values)


def initialise_from_teacher(student, teacher) -> int:
    """Copies the teacher's weights into the student where TF1 name and shape agree;
    returns how many were copied. Both models built."""
    from albert_tf.checkpoints import names

    theirs = names.variables_for(teacher)
    copied = 0
    for name, variable in names.variables_for(student).items():
        source = theirs.get(name)
        if source is not None and tuple(source.shape) == tuple(variable.shape):
            variable.assign(source)
            copied += 1
    return copied
