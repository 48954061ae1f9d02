"""Flag defaults that follow the user's other flags.

A flag's default is written for the other flags' defaults: `run_ner.py --doc_stride`'s 64
for `--max_seq_length` 128, an evaluation batch of 8 for one replica. When the user moves
the other flag, a fixed default would stop the run (`--max_seq_length=64`: "--doc_stride
must be in [1, 62], got 64", about a value the user never gave) or quietly mean something
else (a warmup longer than the run never reaches the learning rate). So each rule here
gives the default from the flags it depends on; it equals the fixed default wherever that
one fits, so runs that never moved the other flags are unchanged. A flag the user gave is
kept, and where it conflicts with another flag the user gave, the run is refused with one
line naming both.

Each CLI names the rules it uses and calls `apply` after parsing, once the replica count
is known (`strategy.num_replicas_in_sync`). Flags set by `--hparams=paper` count as given.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, Optional, Sequence, Tuple

from absl import flags, logging

from albert_tf.errors import UserValueError

Values = Dict[str, object]  # flag name -> value (the flags in question only)


@dataclasses.dataclass(frozen=True)
class Rule:
    """`flag`'s default computed from `depends_on` (flag names; "replicas" is the replica
    count), and the conflict, if any, between an explicit `flag` and them.

    default(values, replicas) -> the default; equals the flag's fixed default where that fits.
    conflict(values, replicas) -> None, or the one-line reason a value cannot stand.
    note(values, replicas) -> None, or a warning about a given value that stands.
    """

    flag: str
    depends_on: Tuple[str, ...]
    default: Callable[[Values, int], object]
    conflict: Optional[Callable[[Values, int], Optional[str]]] = None
    why: str = ""
    note: Optional[Callable[[Values, int], Optional[str]]] = None


def _multiple_of_replicas(fixed: int) -> Callable[[Values, int], int]:
    """The smallest multiple of the replica count that is at least `fixed`: each replica
    gets whole examples, and one replica keeps `fixed`."""
    return lambda values, replicas: math.ceil(fixed / replicas) * replicas


def _divisible_by_replicas(flag: str) -> Callable[[Values, int], Optional[str]]:
    def conflict(values, replicas):
        if values[flag] % replicas:
            return (f"--{flag} {values[flag]} must be divisible by the number of replicas "
                    f"({replicas}): give a multiple of {replicas}, or leave it out to get "
                    f"{_multiple_of_replicas(values[flag])(values, replicas)}")
        return None
    return conflict


def _warmup_share(fixed: int, fixed_steps: int, steps_flag: str, flag: str) -> Rule:
    """The original's warmup (`fixed` steps of a `fixed_steps`-step run), scaled down to
    shorter runs: at most `fixed`, the same share of a shorter run."""
    def default(values, replicas):
        return min(fixed, math.ceil(fixed * values[steps_flag] / fixed_steps))

    def conflict(values, replicas):
        if values[flag] > values[steps_flag]:
            return (f"--{flag} {values[flag]} is longer than --{steps_flag} "
                    f"{values[steps_flag]}: the learning rate would never reach "
                    "--learning_rate")
        return None
    return Rule(flag, (steps_flag,), default, conflict,
                f"{fixed} for {fixed_steps} steps, the same share of a shorter run")


def _fixed_or_half(fixed: int, max_seq_length: int, reserved: int) -> int:
    """`fixed` where it fits in `max_seq_length` with `reserved` tokens to spare (the
    checks the features make), else half of `max_seq_length`."""
    return fixed if fixed <= max_seq_length - reserved else max(1, max_seq_length // 2)


def _ner_doc_stride(values, replicas):
    window = values["max_seq_length"] - 2
    return 64 if 64 <= window else max(1, window // 2)


def _ner_doc_stride_conflict(values, replicas):
    window = values["max_seq_length"] - 2
    if not 0 < values["doc_stride"] <= window:
        return (f"--doc_stride {values['doc_stride']} must be in [1, --max_seq_length - 2 = "
                f"{window}] (--max_seq_length {values['max_seq_length']})")
    return None


def _squad_document_window(values) -> int:
    return values["max_seq_length"] - values["max_query_length"] - 3


def _squad_doc_stride(values, replicas):
    """128 where consecutive windows still overlap (the stride is shorter than a window),
    else half a window: the original moves a window by min(stride, window), so a longer
    stride silently means windows that share no token."""
    window = _squad_document_window(values)
    return 128 if 128 < window else max(1, window // 2)


def _squad_doc_stride_note(values, replicas) -> Optional[str]:
    window = _squad_document_window(values)
    if 0 < window <= values["doc_stride"]:
        return (f"--doc_stride {values['doc_stride']} is at least a document window "
                f"(--max_seq_length {values['max_seq_length']} - --max_query_length "
                f"{values['max_query_length']} - 3 = {window} tokens): as in the original, "
                "a window moves by its length, so consecutive windows share no token")
    return None


RULES: Dict[str, Rule] = {rule.flag + ":" + name: rule for name, rule in (
    ("ner", Rule("doc_stride", ("max_seq_length",), _ner_doc_stride, _ner_doc_stride_conflict,
                 "64, or half the window where 64 does not fit")),
    ("squad", Rule("max_query_length", ("max_seq_length",),
                   lambda values, replicas: _fixed_or_half(64, values["max_seq_length"], 4),
                   None, "64 where it leaves a document token, else half of it")),
    ("squad", Rule("doc_stride", ("max_seq_length", "max_query_length"), _squad_doc_stride,
                   None, "128 where windows still overlap, else half the document window",
                   _squad_doc_stride_note)),
    ("race", Rule("max_qa_length", ("max_seq_length",),
                  lambda values, replicas: _fixed_or_half(128, values["max_seq_length"], 3),
                  None, "128 where it leaves a context token, else half of it")),
    ("8", Rule("eval_batch_size", ("replicas",), _multiple_of_replicas(8),
               _divisible_by_replicas("eval_batch_size"),
               "8, rounded up to a multiple of the replicas")),
    ("8", Rule("predict_batch_size", ("replicas",), _multiple_of_replicas(8),
               _divisible_by_replicas("predict_batch_size"),
               "8, rounded up to a multiple of the replicas")),
    ("64", Rule("eval_batch_size", ("replicas",), _multiple_of_replicas(64),
                _divisible_by_replicas("eval_batch_size"),
                "64, rounded up to a multiple of the replicas")),
    ("pretraining", _warmup_share(3125, 125000, "num_train_steps", "num_warmup_steps")),
    ("race", _warmup_share(1000, 12000, "train_step", "warmup_step")),
)}


def _given(name: str, values) -> bool:
    return name in values and values[name].present > 0


def apply(rule_names: Sequence[str], replicas: int = 1, values=flags.FLAGS,
          hparams_set: Sequence[str] = ()) -> Dict[str, object]:
    """Sets each named rule's flag (`RULES` key, e.g. "doc_stride:ner") that the command
    line did not give to its default from the other flags, logging one line where that
    differs from the fixed default; refuses (UserValueError, one line naming both flags)
    a given flag that conflicts with the others, and warns about one that stands but
    surprises (`Rule.note`). `hparams_set`: flags --hparams=paper set: kept where they fit,
    else replaced by the rule's default (logged). Returns {flag: value} of the defaults
    that moved."""
    moved = {}
    for name in rule_names:
        rule = RULES[name]
        current = {flag: values[flag].value for flag in (rule.flag,) + rule.depends_on
                   if flag != "replicas"}
        given = _given(rule.flag, values)
        reason = (rule.conflict(current, replicas)
                  if rule.conflict and (given or rule.flag in hparams_set) else None)
        if reason and given:
            raise UserValueError(reason)
        if reason:  # a --hparams=paper value: the rule's default instead
            logging.info("--%s %s from --hparams=paper does not fit: %s", rule.flag,
                         current[rule.flag], reason)
        elif given or rule.flag in hparams_set:
            note = rule.note(current, replicas) if rule.note else None
            if note:
                logging.warning("%s", note)
            continue
        value = rule.default(current, replicas)
        if value != values[rule.flag].value:
            given = ", ".join(f"{flag} {replicas}" if flag == "replicas"
                              else f"--{flag} {current[flag]}" for flag in rule.depends_on)
            logging.info("--%s %s (its default follows %s: %s)", rule.flag, value, given,
                         rule.why)
            values[rule.flag].value = value
            moved[rule.flag] = value
    return moved
