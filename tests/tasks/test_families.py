"""Every task family has one shape (the same modules, a registry of its data sets, an
`evaluate` scorer), and the registry is the one table of data sets: each CLI's
--task_name accepts exactly the names its family registers."""
import ast
import importlib
import subprocess
import sys

import pytest

from albert_tf.tasks import registry
from tests.conftest import REPO_ROOT

# data/readers: datasets.py (the registry records) plus the family's format modules.
FAMILY_MODULES = ("datasets", "features", "job", "metrics", "postprocess", "export",
                  "__main__")


@pytest.mark.parametrize("family", registry.FAMILIES)
def test_every_family_has_the_same_modules_each_with_code_of_its_own(family):
    folder = REPO_ROOT / "albert_tf" / "tasks" / family
    for name in FAMILY_MODULES:
        path = folder / f"{name}.py"
        assert path.exists(), f"{path.relative_to(REPO_ROOT)} is missing"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = [node for node in tree.body if isinstance(
            node, (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign, ast.For, ast.If))]
        assert defined, f"{path.relative_to(REPO_ROOT)} defines nothing (a re-export shim?)"


@pytest.mark.parametrize("family", registry.FAMILIES)
def test_every_family_registers_its_data_sets(family):
    names = registry.names(family)
    assert names, family
    for name in names:
        data_set = registry.get(family, name.upper())
        assert (data_set.name, data_set.family) == (name, family)
        assert callable(data_set.reader) and data_set.metric
        assert data_set.language in ("en", "zh")


def test_an_unknown_data_set_is_one_line_naming_the_flag_and_the_names():
    with pytest.raises(ValueError, match=r"--task_name 'nope' is not a multiple choice data "
                                         r"set: one of race, c3"):
        registry.get("multiple_choice", "nope")


def test_a_name_is_registered_once_per_family():
    data_set = registry.get("tagging", "conll2003")
    assert registry.register(data_set) is data_set  # the same record again is harmless
    with pytest.raises(ValueError, match="already registered for tagging"):
        registry.register(registry.DataSet("conll2003", "tagging", print, "f1"))
    with pytest.raises(ValueError, match="family 'vision' is not one of"):
        registry.DataSet("x", "vision", print, "accuracy")


@pytest.mark.parametrize("family", registry.FAMILIES)
def test_every_family_has_an_evaluate_command(family):
    result = subprocess.run([sys.executable, "-m", f"albert_tf.tasks.{family}", "evaluate",
                             "--help"], capture_output=True, text=True, cwd=REPO_ROOT,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--predictions" in result.stdout or "prediction" in result.stdout.lower()


def test_the_clis_task_names_are_the_registered_data_sets():
    from albert_tf.tasks.classification import clue, glue, multilabel
    from albert_tf.tasks.multiple_choice.job import MultipleChoiceOptions
    from albert_tf.tasks.tagging import readers
    from albert_tf.option_fields import field_specs

    assert field_specs(MultipleChoiceOptions)["task_name"].choices == \
        registry.names("multiple_choice")
    assert readers.TASKS == registry.names("tagging")
    assert set(registry.names("classification")) == \
        set(glue.TASKS) | set(clue.TASKS) | {multilabel.GOEMOTIONS, glue.CUSTOM_TASK}
    assert registry.names("span_qa") == ("squad_v1", "squad_v2", "cmrc2018")


def test_every_data_set_with_published_hyperparameters_is_registered():
    """--hparams=paper's table names data sets the families know (by name or alias)."""
    from albert_tf.finetuning import hparams

    known = {data_set.name for data_set in registry.all_data_sets()}
    assert set(hparams.TABLE) <= known, set(hparams.TABLE) - known
