"""Option fields that declare their command-line flag: help text, default and check.

An options dataclass (FinetuningOptions, ClassificationOptions, PretrainingOptions, ...) declares
each field that a CLI exposes with `option(...)`; `albert_tf.cli_options.define_flags`
turns those fields into absl flags and `options_from_flags` builds the object back, so a
new common option is one field in one file. A family's options class changes a default by
redeclaring the bare field (`max_seq_length: int = 384`): the help and the check are found
on the nearest class up the MRO that declares them (`field_spec`).

Pure Python: no absl, no TensorFlow (options modules import it before either).
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

_HELP, _CHOICES, _CHECK = "help", "choices", "check"


@dataclasses.dataclass(frozen=True)
class Check:
    """A rule a value must keep: `holds(value)`; `rule` completes "--flag must ..."."""

    rule: str
    holds: Callable[[Any], bool]


POSITIVE = Check("be positive", lambda value: value > 0)
NON_NEGATIVE = Check("be non-negative", lambda value: value >= 0)
DROPOUT = Check("be in [0, 1)", lambda value: 0.0 <= value < 1.0)


def at_least(minimum: int) -> Check:
    return Check(f"be at least {minimum}", lambda value: value >= minimum)


def option(default: Any = dataclasses.MISSING, *, help: str,  # noqa: A002 -- absl's word
           choices: Optional[Sequence[str]] = None, check: Optional[Check] = None,
           default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field exposed as a flag of the same name (see the module docstring).

    help: the flag's --help text. choices: the values an enum flag accepts. check: a rule
    `check_fields` applies (skipped when the value is None).
    """
    metadata = {_HELP: help, _CHOICES: tuple(choices) if choices else None, _CHECK: check}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """What a CLI needs to know of one option field: its flag name, type, default, help,
    choices and check. `kind` is the flag's type: bool, int, float, str or list."""

    field: str
    flag: str
    kind: type
    default: Any
    help: str
    choices: Optional[Tuple[str, ...]]
    check: Optional[Check]
    required: bool


def _declared(cls: type, name: str) -> Optional[dataclasses.Field]:
    """The field `name` as declared with option(...) on the nearest class up the MRO."""
    for klass in cls.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and _HELP in field.metadata:
            return field
    return None


def _kind(annotation: Any) -> type:
    """bool / int / float / str / list from a field's type (Optional unwrapped; tuples and
    lists of strings are list flags)."""
    if typing.get_origin(annotation) is typing.Union:
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if typing.get_origin(annotation) in (tuple, list):
        return list
    if annotation in (bool, int, float, str):
        return annotation
    raise TypeError(f"an option field must be bool, int, float, str or a tuple of str; "
                    f"got {annotation!r}")


def field_specs(cls: type) -> Dict[str, FieldSpec]:
    """The flag-declaring fields of the options class `cls`, in declaration order, keyed by
    field name. `cls.FLAG_NAMES` (field -> flag) renames a flag for one family (the
    original run_race.py's --num_keep_checkpoint); `cls.NOT_FLAGS` lists fields this
    family's CLI does not expose (run_squad.py has no --train_step); `cls.FLAG_DEFAULTS`
    (field -> value) gives a flag another default than its field's."""
    hints = typing.get_type_hints(cls)
    renamed = getattr(cls, "FLAG_NAMES", {})
    flag_defaults = getattr(cls, "FLAG_DEFAULTS", {})
    hidden = set(getattr(cls, "NOT_FLAGS", ()))
    specs = {}
    for field in dataclasses.fields(cls):
        declared = _declared(cls, field.name)
        if declared is None or field.name in hidden:
            continue
        required = (field.default is dataclasses.MISSING
                    and field.default_factory is dataclasses.MISSING)
        default = None if required else (
            field.default if field.default is not dataclasses.MISSING
            else field.default_factory())
        specs[field.name] = FieldSpec(
            field=field.name, flag=renamed.get(field.name, field.name),
            kind=_kind(hints[field.name]), default=flag_defaults.get(field.name, default),
            help=declared.metadata[_HELP], choices=declared.metadata[_CHOICES],
            check=declared.metadata[_CHECK], required=required)
    return specs


def check_fields(options: Any, names: Optional[Sequence[str]] = None) -> None:
    """Raises ValueError("--flag must <rule>, got <value>") for the first field (of `names`,
    default all, in declaration order) whose value breaks its check. Fields the class does
    not expose as flags (`NOT_FLAGS`) are not checked."""
    specs = field_specs(type(options))
    for name in (names if names is not None else specs):
        spec = specs.get(name)
        if spec is None:
            continue
        value = getattr(options, name)
        if spec.check is not None and value is not None and not spec.check.holds(value):
            raise ValueError(f"--{spec.flag} must {spec.check.rule}, got {value}")


def _warn_renamed(old: str, new: str, stacklevel: int) -> None:
    import warnings

    warnings.warn(f"the option {old} is now {new}; the old name will be removed",
                  DeprecationWarning, stacklevel=stacklevel + 1)


def renamed_option(old_value: Any, value: Any, old: str, new: str) -> Any:
    """The value of an option whose keyword was renamed from `old` to `new`: `old_value`,
    with a DeprecationWarning, when the old keyword was given, else `value`."""
    if old_value is None:
        return value
    _warn_renamed(old, new, stacklevel=4)
    return old_value


def renamed_attribute(old: str, new: str) -> property:
    """A read-only property `old` answering with attribute `new`, with a DeprecationWarning
    (for an options class whose InitVar `old` accepts the old keyword: its class default
    would otherwise answer a read of the old attribute)."""
    def read(options):
        _warn_renamed(old, new, stacklevel=2)
        return getattr(options, new)
    return property(read)
