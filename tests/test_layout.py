"""tests/ mirrors the packages: a test file sits in the folder of the package it tests
(tests/tasks/span_qa/ for albert_tf/tasks/span_qa/, tests/data_prep/ for data_prep/, ...),
the command lines' tests in tests/cli/, whole-repo tests and those of albert_tf's top-level
modules at tests/, the modules the tests share in tests/helpers/. Every folder is a package:
files of the same name in two folders would otherwise collide in pytest's module names."""
from tests.conftest import HELPERS, REPO_ROOT

TESTS = REPO_ROOT / "tests"
OWN_FOLDERS = {"cli", "helpers"}  # folders of tests/ that mirror no package
TOP_PACKAGES = {"data_prep", "bench"}  # repository folders besides albert_tf with tests


def folders():
    return sorted(path for path in TESTS.rglob("*")
                  if path.is_dir() and path.name != "__pycache__")


def test_every_folder_is_a_package():
    assert [path for path in folders() if not (path / "__init__.py").exists()] == []


def test_every_folder_mirrors_a_package():
    wrong = []
    for path in folders():
        parts = path.relative_to(TESTS).parts
        if parts[0] in OWN_FOLDERS | TOP_PACKAGES:
            mirrored = len(parts) == 1 or (REPO_ROOT.joinpath(*parts) / "__init__.py").exists()
        else:
            mirrored = (REPO_ROOT.joinpath("albert_tf", *parts) / "__init__.py").exists()
        if not mirrored:
            wrong.append(str(path.relative_to(REPO_ROOT)))
    assert wrong == []


def test_helpers_live_in_helpers_and_tests_outside():
    misplaced = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name in ("__init__.py", "conftest.py"):
            continue
        if (path.parent == HELPERS) == path.name.startswith("test_"):
            misplaced.append(str(path.relative_to(REPO_ROOT)))
    assert misplaced == []
