"""Records a CLI's flags as `--helpfull` shows them: name, type, default, and whether
`--help` lists it. Run as `python tests/helpers/cli_flag_record.py run_classifier` (prints JSON);
tests/cli/test_flag_record.py compares every CLI with tests/cli/flags_record.json, the
record taken before the CLIs' flags moved beside their options."""
import importlib
import json
import sys

from absl import flags


def record(module_name: str) -> dict:
    module = importlib.import_module(module_name)
    values = flags.FLAGS
    listed = {flag.name for flag in values.get_key_flags_for_module(module)}
    shown = {}
    for name, flag in values._flags().items():  # noqa: SLF001 -- absl has no public walk
        if name != flag.name:  # a short name
            continue
        shown[name] = {"type": flag.flag_type(), "default": flag.default,
                       "in_help": name in listed}
    return dict(sorted(shown.items()))


if __name__ == "__main__":
    print(json.dumps(record(sys.argv[1]), indent=1, sort_keys=True, default=str))
