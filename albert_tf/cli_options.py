"""Flags from options classes, and options classes from flags (absl).

`define_flags(OptionsClass)` defines one absl flag per field the class declares with
`albert_tf.option_fields.option` (name, type, default, help and enum choices all come
from the field); `options_from_flags(OptionsClass, **given)` builds the object from the
parsed flags plus the values a CLI computes itself (the model's config, the guard's
options). A CLI calls `flags.adopt_module_key_flags(cli_options)` to list them in --help.
"""
from __future__ import annotations

from typing import Any, Sequence

from absl import flags

from albert_tf import option_fields

_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
           float: flags.DEFINE_float, str: flags.DEFINE_string, list: flags.DEFINE_list}


def define_flags(options_class: type, *, skip: Sequence[str] = (),
                 values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines the flags of `options_class`'s option fields (except the fields in `skip`)."""
    for spec in option_fields.field_specs(options_class).values():
        if spec.field in skip:
            continue
        default = list(spec.default) if spec.kind is list and spec.default else spec.default
        if spec.choices:
            flags.DEFINE_enum(spec.flag, default, list(spec.choices), spec.help,
                              flag_values=values)
        else:
            _DEFINE[spec.kind](spec.flag, default, spec.help, flag_values=values)


def define_renamed_flag(old: str, new: str, values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines --`old`, the deprecated spelling of the defined flag --`new`: same type and
    default (the CLI moves its value to --`new`, with a warning)."""
    flag = values[new]
    kind = {"bool": bool, "int": int, "float": float, "list": list}.get(
        flag.flag_type(), str)
    _DEFINE[kind](old, flag.default, f"Deprecated spelling of --{new}, accepted with a "
                  "warning.", flag_values=values)


def options_from_flags(options_class: type, values: flags.FlagValues = flags.FLAGS,
                       **given: Any) -> Any:
    """`options_class(**fields)`: each option field from its flag (lists as tuples), each
    field in `given` as given; fields neither declares keep their defaults."""
    fields = dict(given)
    for spec in option_fields.field_specs(options_class).values():
        if spec.field in fields or spec.flag not in values:
            continue
        value = values[spec.flag].value
        if spec.kind is list:  # an empty list is "not given" where the field's default is None
            value = tuple(value) if value or spec.default is not None else None
        fields[spec.field] = value
    return options_class(**fields)
