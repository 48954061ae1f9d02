"""How a task family's run_*.py reads its flags: `CommandLine`, one per job class.

`albert_tf.cli_finetuning` runs every family from its job class's `OPTIONS` (the options
dataclass, whose fields declare the flags) and `COMMAND_LINE` (what is left that differs
between the families' command lines). Pure data and functions of the parsed flag values
(anything with attribute access and `values[name].present`, such as absl's FLAGS): no
absl import, so the task packages do not depend on the CLI layer.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence, Tuple


def _no_check(values: Any) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """What differs between the fine-tuning CLIs.

    required: flags that must be given (checked first, in this order).
    hparams_task(values): the --hparams=paper table's task for these flags.
    default_rules(values): `cli_defaults` rules (names such as "eval_batch_size:8") applied
        once the replica count is known.
    check(values): family refusals that need the flags as typed (raise a UserError).
    print_predict_metrics: print the predicted split's scores as one JSON line on stdout.
    renamed_flags: old flag name -> current one, still accepted with a warning.
    flag_groups: more options classes whose fields are this CLI's flags too (the family
        builds them in `options_from_command_line`: run_classifier's custom task).
    """

    required: Tuple[str, ...]
    hparams_task: Callable[[Any], str]
    default_rules: Callable[[Any], Sequence[str]]
    check: Callable[[Any], None] = _no_check
    print_predict_metrics: bool = False
    renamed_flags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    flag_groups: Tuple[type, ...] = ()
