"""The package layering of docs/architecture.md, checked on the source.

Every import inside albert_tf counts, at the top of a module or inside a function
(a function-level import hides a cycle from Python, not from a reader). The rules:
no import cycle between modules; no module imports a layer above its own; a task
family does not import another family; no module imports another's private
(underscore-prefixed) name; library code imports modules at their current paths. The old paths of `albert_tf._moved` still import (its moved names still
read), with a DeprecationWarning naming the new path, and no .py or .md file of the
repository uses one.
"""
import ast
import importlib
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "albert_tf"

# Longest prefix wins. A module may import its own rank or below.
RANKS = {
    "albert_tf": 0, "albert_tf._moved": 0, "albert_tf._lazy": 0, "albert_tf.config": 0, "albert_tf.errors": 0,
    "albert_tf.fileio": 0, "albert_tf.option_fields": 0,
    "albert_tf.kernels": 1, "albert_tf.tokenization": 1, "albert_tf.instances": 1,
    "albert_tf.modeling": 2,
    "albert_tf.checkpoints": 3, "albert_tf.training": 3,
    "albert_tf.export": 4,
    "albert_tf.pretraining": 5, "albert_tf.finetuning": 5,
    "albert_tf.tasks": 6,
    # Programs: command-line entry points over everything else.
    "albert_tf.cli": 7, "albert_tf.cli_defaults": 7, "albert_tf.cli_options": 7,
    "albert_tf.cli_finetuning": 7, "albert_tf.convert": 7, "albert_tf.fill_mask": 7,
    "albert_tf.tasks.squad": 7, "albert_tf.tasks.span_qa.__main__": 7,
    "albert_tf.tasks.tagging.__main__": 7, "albert_tf.tasks.classification.__main__": 7,
    "albert_tf.tasks.multiple_choice.__main__": 7, "albert_tf.tasks.embeddings.__main__": 7,
    # The pipelines: text to answers from any model source, over the programs' readers.
    "albert_tf.pipelines": 7, "albert_tf.predict": 7,
    # The Keras tasks on raw text: from_pretrained reads every model source.
    "albert_tf.keras_tasks": 7,
    # Distillation: reads teachers through keras_tasks, runs the classification job.
    "albert_tf.distillation": 7,
}
TASK_FAMILIES = ("classification", "embeddings", "span_qa", "multiple_choice", "tagging")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def library_modules():
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(name: str, modules) -> str:
    """The module a dotted import name loads (a name inside a module resolves to it)."""
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_edges(path: pathlib.Path, modules):
    """(imported module, line) for every albert_tf import in the file, anywhere in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from package import submodule` imports the submodule; `from m import name`, m.
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules
                     else node.module for alias in node.names]
        else:
            continue
        for name in names:
            if name == "albert_tf" or name.startswith("albert_tf."):
                yield name, node.lineno


def rank(module: str) -> int:
    best = max((prefix for prefix in RANKS
                if module == prefix or module.startswith(prefix + ".")), key=len)
    return RANKS[best]


def family(module: str):
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "tasks" and parts[2] in TASK_FAMILIES \
        else None


def with_parent_packages(importer: str, imported: str):
    """`imported` and the packages Python initialises first to import it, except the
    importer's own ancestors (already initialised when the importer runs)."""
    parts = imported.split(".")
    for depth in range(min(2, len(parts)), len(parts) + 1):
        package = ".".join(parts[:depth])
        if depth == len(parts) or not (importer == package or importer.startswith(package + ".")):
            yield package


@pytest.fixture(scope="module")
def graph():
    modules = library_modules()
    edges = {}
    for name, path in modules.items():
        edges[name] = [(target, line) for imported, line in import_edges(path, modules)
                       for target in with_parent_packages(name, resolve(imported, modules))]
    return modules, edges


def test_library_code_imports_current_paths(graph):
    from albert_tf import _moved

    modules, edges = graph
    old = [f"{src}:{line} imports {name}" for src, found in edges.items()
           for name, line in found if name in _moved.MOVED
           or any(name.startswith(o + ".") for o in _moved.MOVED)]
    assert not old, "old module paths used inside albert_tf:\n" + "\n".join(old)


def test_no_module_imports_a_layer_above_its_own(graph):
    modules, edges = graph
    upward = []
    for src, found in edges.items():
        for name, line in found:
            dst = resolve(name, modules)
            if rank(dst) > rank(src):
                upward.append(f"{src}:{line} (layer {rank(src)}) imports {dst} "
                              f"(layer {rank(dst)})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


# Private modules that others import as modules: the package machinery of albert_tf.
INFRASTRUCTURE = ("albert_tf._lazy", "albert_tf._moved", "albert_tf._keras_names")


def private_imports(path: pathlib.Path):
    """(line, dotted name) of each underscore-prefixed name the file imports from an albert_tf
    module (`from m import _name`, `import m._name`), but INFRASTRUCTURE and dunders."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            private = [part for part in name.split(".")
                       if part.startswith("_") and not part.startswith("__")]
            if name.startswith("albert_tf.") and private and name not in INFRASTRUCTURE:
                yield node.lineno, name


def test_private_imports_are_found(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from albert_tf import _lazy, _moved, __version__\n"
                      "from albert_tf.modeling.models import AlbertClassifier, _nll\n"
                      "def f():\n    import albert_tf.x._y\n", encoding="utf-8")
    assert list(private_imports(source)) == [(2, "albert_tf.modeling.models._nll"),
                                                 (4, "albert_tf.x._y")]


def test_no_module_imports_a_private_name_of_another(graph):
    """A name another module needs is public (an underscore-free alias when it was private)."""
    modules, _ = graph
    found = [f"{src}:{line} imports {name}" for src, path in modules.items()
             for line, name in private_imports(path)]
    assert not found, "private names imported:\n" + "\n".join(found)


def test_task_families_do_not_import_each_other(graph):
    modules, edges = graph
    crossing = [f"{src}:{line} imports {name}" for src, found in edges.items()
                for name, line in found
                if family(src) and family(resolve(name, modules))
                and family(src) != family(resolve(name, modules))]
    assert not crossing, "\n".join(crossing)


def find_cycles(adjacency):
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in adjacency.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(adjacency):
        if node not in index:
            visit(node)
    return cycles


def test_find_cycles_finds_a_hidden_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles(graph):
    modules, edges = graph
    adjacency = {src: {resolve(name, modules) for name, _ in found} - {src}
                 for src, found in edges.items()}
    cycles = find_cycles(adjacency)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_package_says_what_it_holds_and_may_import():
    for init in PACKAGE.rglob("__init__.py"):
        name = module_name(init)
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, f"{name} has no docstring"
        if name not in ("albert_tf", "albert_tf.tasks"):
            assert "May import" in doc, f"{name}'s docstring does not say what it may import"


def test_old_module_paths_are_the_moved_modules():
    """Every public import shown in the docs before the move still works, as the same module."""
    from albert_tf import _moved

    for old, new in _moved.MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    from albert_tf import fused_ops, models, onnx_export, tokenization  # noqa: F401
    from albert_tf.tasks import glue, squad_export  # noqa: F401
    from albert_tf.kernels import fused_ops as current

    assert fused_ops is current
    import albert_tf

    assert albert_tf.AlbertEncoder.__module__ == "albert_tf.modeling.encoder"


def fresh_python_env():
    """The environment of a child Python that imports this checkout, with the default
    warning filters."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.pop("PYTHONWARNINGS", None)
    return env


OLD_PATH_IMPORTER = """\
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import albert_tf.tasks.span_qa.wordpiece
    import albert_tf.tasks.glue
    from albert_tf.tasks import glue_metrics, clue
    import albert_tf.tasks.glue
import albert_tf.tasks.classification.glue as new
print(json.dumps({"same": sys.modules["albert_tf.tasks.glue"] is new,
                  "spec": new.__spec__.name,
                  "warned": [[str(w.message), w.category.__name__, w.filename, w.lineno]
                             for w in caught]}))
"""


def test_an_old_path_warns_at_its_importer_naming_the_new_path(tmp_path):
    """The first import of an old path (statement or `from package import old`) warns once,
    at the importing line, naming the new path; the alias is still the new module (its
    own __spec__ kept); a new path never warns. In a fresh process: an old path already
    imported does not reach the finder again."""
    script = tmp_path / "importer.py"
    script.write_text(OLD_PATH_IMPORTER, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=fresh_python_env(), check=True)
    found = json.loads(done.stdout)
    assert found["same"] and found["spec"] == "albert_tf.tasks.classification.glue"
    removed = "(the old path will be removed)"
    assert found["warned"] == [
        [f"albert_tf.tasks.glue moved to albert_tf.tasks.classification.glue; import that "
         f"{removed}", "DeprecationWarning", str(script), 5],
        [f"albert_tf.tasks.glue_metrics moved to albert_tf.tasks.classification.metrics; "
         f"import that {removed}", "DeprecationWarning", str(script), 6],
        [f"albert_tf.tasks.clue moved to albert_tf.tasks.classification.clue; import that "
         f"{removed}", "DeprecationWarning", str(script), 6]]


def test_python_m_on_an_old_path_warns_by_default():
    done = subprocess.run([sys.executable, "-m", "albert_tf.tasks.glue"], capture_output=True,
                          text=True, cwd=REPO_ROOT, env=fresh_python_env(), check=True)
    assert ("DeprecationWarning: albert_tf.tasks.glue moved to "
            "albert_tf.tasks.classification.glue; run `python -m "
            "albert_tf.tasks.classification.glue`") in done.stderr


def old_path_uses(text: str, moved) -> list:
    """(line, old path) of each use of an old module path in `text`: the dotted name (an
    import, `python -m`, prose), `from albert_tf[.tasks] import <old name>` (also in
    parentheses over lines), or the old file path `albert_tf/<name>.py`."""
    found = []
    for old in moved:
        dotted = r"(?<![\w.])" + re.escape(old) + r"(?!\w)"
        file = r"(?<![\w./])" + re.escape(old.replace(".", "/")) + r"\.py"
        for match in re.finditer(f"{dotted}|{file}", text):
            found.append((text.count("\n", 0, match.start()) + 1, old))
    for match in re.finditer(r"\bfrom\s+(albert_tf(?:\.tasks)?)\s+import\s+(\([^)]*\)|[^\n]*)",
                             text):
        names = re.sub(r"#[^\n]*", "", match.group(2)).strip("()")
        for name in names.split(","):
            old = f"{match.group(1)}.{name.split()[0]}" if name.split() else ""
            if old in moved:
                found.append((text.count("\n", 0, match.start()) + 1, old))
    return sorted(set(found))


def test_old_path_uses_are_found():
    moved = {"albert_tf.fused_ops": "", "albert_tf.tasks.glue": ""}
    text = ("import albert_tf.fused_ops\nfrom albert_tf import (tokenization,\n  fused_ops)\n"
            "from albert_tf.tasks import glue  # x\npython -m albert_tf.tasks.glue\n"
            "see albert_tf/tasks/glue.py\nfrom albert_tf.kernels import fused_ops\n"
            "albert_tf.tasks.glue_job albert_tf.tasks.classification.glue\n")
    assert old_path_uses(text, moved) == [(1, "albert_tf.fused_ops"), (2, "albert_tf.fused_ops"),
                                          (4, "albert_tf.tasks.glue"),
                                          (5, "albert_tf.tasks.glue"), (6, "albert_tf.tasks.glue")]


def repository_texts():
    """(path relative to the repository, text) of every .py and .md file but the table of
    moved paths and this test."""
    skip = {(PACKAGE / "_moved.py").resolve(), pathlib.Path(__file__).resolve()}
    for suffix in ("*.py", "*.md"):
        for path in sorted(REPO_ROOT.rglob(suffix)):
            relative = path.relative_to(REPO_ROOT)
            if path.resolve() in skip or any(part.startswith(".") for part in relative.parts):
                continue
            yield relative, path.read_text(encoding="utf-8")


def test_nothing_in_the_repository_uses_an_old_path():
    """Every .py and .md file (but the table and this test) names modules at their new
    paths: code, docs, commands in prose."""
    from albert_tf import _moved

    used = [f"{relative}:{line}: {old} -> {_moved.MOVED[old]}"
            for relative, text in repository_texts()
            for line, old in old_path_uses(text, _moved.MOVED)]
    assert not used, "old module paths used:\n" + "\n".join(used)


OLD_NAME_READER = """\
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from albert_tf.export import {name}
    import albert_tf.export
    again = albert_tf.export.{name}
from {new} import {name} as new
print(json.dumps({{"same": {name} is new and again is new,
                  "warned": [[str(w.message), w.filename, w.lineno] for w in caught
                             if w.category is DeprecationWarning]}}))
"""


def test_an_old_name_reads_with_a_warning_naming_its_new_module(tmp_path):
    """A name of `_moved.MOVED_NAMES` (a public name that moved up a layer) still reads from
    its old package, as the same object, warning once, at the reading line."""
    from albert_tf import _moved

    for old, new in _moved.MOVED_NAMES.items():
        package, _, name = old.rpartition(".")
        assert package == "albert_tf.export", "OLD_NAME_READER reads from albert_tf.export"
        script = tmp_path / f"{name}.py"
        script.write_text(OLD_NAME_READER.format(name=name, new=new), encoding="utf-8")
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              cwd=REPO_ROOT, env=fresh_python_env(), check=True)
        found = json.loads(done.stdout.splitlines()[-1])
        assert found["same"], old
        assert found["warned"] == [[f"{old} moved to {new}; import {name} from there (the old "
                                    "path will be removed)", str(script), 4]]


def old_name_uses(text: str, moved_names) -> list:
    """(line, old name) of each use of a moved name at its old place in `text`: the dotted
    name, `from <package> import ... <name>`, or `<package's last part>.<name>` in a file
    that imports the package under that name."""
    found = []
    for old in moved_names:
        package, _, name = old.rpartition(".")
        short = package.rpartition(".")
        patterns = [r"(?<![\w.])" + re.escape(old) + r"\b",
                    r"\bfrom\s+" + re.escape(package) + r"\s+import\s+(\([^)]*|[^\n]*)\b"
                    + re.escape(name) + r"\b"]
        if re.search(r"\bfrom\s+" + re.escape(short[0]) + r"\s+import\s+[^\n]*\b"
                     + re.escape(short[2]) + r"\b(?!\s+as\b)", text):
            patterns.append(r"(?<![\w.])" + re.escape(f"{short[2]}.{name}") + r"\b")
        for match in re.finditer("|".join(patterns), text):
            found.append((text.count("\n", 0, match.start()) + 1, old))
    return sorted(set(found))


def test_old_name_uses_are_found():
    moved = {"albert_tf.export.Serving": ""}
    text = ("from albert_tf.export import (pack_pair,\n  Serving)\nalbert_tf.export.Serving\n"
            "from albert_tf.tasks.classification.export import Serving\n"
            "albert_tf.tasks.classification.export.Serving\n")
    assert old_name_uses(text, moved) == [(1, "albert_tf.export.Serving"),
                                          (3, "albert_tf.export.Serving")]
    assert old_name_uses("from albert_tf import export\nexport.Serving\n", moved) == [
        (2, "albert_tf.export.Serving")]
    assert old_name_uses("from albert_tf import export\nfrom albert_tf.tasks.classification "
                         "import export as glue_export\nglue_export.Serving\n", moved) == []


def test_nothing_in_the_repository_uses_an_old_name():
    from albert_tf import _moved

    used = [f"{relative}:{line}: {old} -> {_moved.MOVED_NAMES[old]}"
            for relative, text in repository_texts()
            for line, old in old_name_uses(text, _moved.MOVED_NAMES)]
    assert not used, "old names used:\n" + "\n".join(used)


def test_light_modules_do_not_load_tensorflow():
    """Tokenizers, task readers and the cache policy import without TensorFlow (data_prep
    workers and ONNX clients use them)."""
    code = ("import sys; import albert_tf.tokenization, albert_tf.tasks.classification.glue, "
            "albert_tf.instances.masking, albert_tf.instances.pairing, albert_tf.instances.seeds, "
            "albert_tf.finetuning.feature_cache, albert_tf.fileio, albert_tf.config; "
            "print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "False", done.stderr


def test_old_class_names_are_the_renamed_classes():
    """Families name their jobs and options, objectives are Objective; the old names stay."""
    from albert_tf import finetuning, pretraining, training
    from albert_tf.tasks.classification import clue, job as classification
    from albert_tf.tasks.multiple_choice import job as multiple_choice
    from albert_tf.tasks.span_qa import job as span_qa
    from albert_tf.tasks.tagging import job as tagging

    pairs = [(training.Task, training.Objective),
             (finetuning.ExampleMeanTask, finetuning.ExampleMeanObjective),
             (pretraining.PretrainingTask, pretraining.PretrainingObjective),
             (classification.GlueJob, classification.ClassificationJob),
             (classification.GlueOptions, classification.ClassificationOptions),
             (classification.GlueTask, classification.ClassificationObjective),
             (multiple_choice.RaceJob, multiple_choice.MultipleChoiceJob),
             (multiple_choice.RaceOptions, multiple_choice.MultipleChoiceOptions),
             (multiple_choice.RaceTask, multiple_choice.MultipleChoiceObjective),
             (span_qa.SquadJob, span_qa.SpanQaJob), (span_qa.SquadOptions, span_qa.SpanQaOptions),
             (span_qa.SquadTask, span_qa.SpanQaObjective),
             (tagging.TaggingTask, tagging.TaggingObjective), (clue.ClueTask, clue.ClueDataSet)]
    for old, new in pairs:
        assert old is new
