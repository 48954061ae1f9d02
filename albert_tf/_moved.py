"""Module paths that moved when the library became packages: deprecated, still importable.

`import albert_tf.fused_ops` (or `from albert_tf import models`, or
`python -m albert_tf.parameter_counts`) still works: the path is an alias of the
module at its new place (the same module object, so monkeypatching either name
patches both). The first import of an old path in a process warns (DeprecationWarning,
naming the new path, filed at the importing line); `python -m` on an old path warns as
`__main__` does, so it shows by default. New code imports the new path;
`tests/test_architecture.py` checks that every old path resolves and warns, and that
nothing in the repository uses one.

A public name that moved up a layer (out of a package its new module may not be imported
by) is in MOVED_NAMES: the old package's lazy attributes (`albert_tf._lazy`) load it from
its new module by name, with the same kind of DeprecationWarning, filed at the line that
reads it first. The package itself never imports the new module (layering).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
import warnings

# Old dotted path -> the module that holds it now.
MOVED = {
    "albert_tf.layers": "albert_tf.modeling.layers",
    "albert_tf.encoder": "albert_tf.modeling.encoder",
    "albert_tf.heads": "albert_tf.modeling.heads",
    "albert_tf.models": "albert_tf.modeling.models",
    "albert_tf.parameter_counts": "albert_tf.modeling.parameter_counts",
    "albert_tf.fused_ops": "albert_tf.kernels.fused_ops",
    "albert_tf.precision": "albert_tf.kernels.precision",
    "albert_tf.tf1_names": "albert_tf.checkpoints.names",
    "albert_tf.hf_weights": "albert_tf.checkpoints.hf",
    "albert_tf.optimization": "albert_tf.training.optimization",
    "albert_tf.distribute": "albert_tf.training.distribute",
    "albert_tf.run_dir": "albert_tf.training.run_dir",
    "albert_tf.inputs": "albert_tf.pretraining.inputs",
    "albert_tf.hub_export": "albert_tf.export.hub",
    "albert_tf.onnx_export": "albert_tf.export.onnx",
    "albert_tf.tasks.glue": "albert_tf.tasks.classification.glue",
    "albert_tf.tasks.clue": "albert_tf.tasks.classification.clue",
    "albert_tf.tasks.glue_metrics": "albert_tf.tasks.classification.metrics",
    "albert_tf.tasks.glue_job": "albert_tf.tasks.classification.job",
    "albert_tf.tasks.squad_data": "albert_tf.tasks.span_qa.data",
    "albert_tf.tasks.squad_features": "albert_tf.tasks.span_qa.features",
    "albert_tf.tasks.squad_wordpiece": "albert_tf.tasks.span_qa.wordpiece",
    "albert_tf.tasks.squad_postprocess": "albert_tf.tasks.span_qa.postprocess",
    "albert_tf.tasks.squad_metrics": "albert_tf.tasks.span_qa.metrics",
    "albert_tf.tasks.cmrc_metrics": "albert_tf.tasks.span_qa.cmrc_metrics",
    "albert_tf.tasks.cmrc_tokenize": "albert_tf.tasks.span_qa.cmrc_tokenize",
    "albert_tf.tasks.squad_export": "albert_tf.tasks.span_qa.export",
    "albert_tf.tasks.squad_job": "albert_tf.tasks.span_qa.job",
    "albert_tf.tasks.race": "albert_tf.tasks.multiple_choice.race",
    "albert_tf.tasks.c3": "albert_tf.tasks.multiple_choice.c3",
    "albert_tf.tasks.race_export": "albert_tf.tasks.multiple_choice.export",
    "albert_tf.tasks.race_job": "albert_tf.tasks.multiple_choice.job",
    "albert_tf.tasks.tagging.predictions": "albert_tf.tasks.tagging.postprocess",
}

# Old dotted name (package.attribute) -> the module that defines it now.
MOVED_NAMES = {
    "albert_tf.export.ClassifierServingModule": "albert_tf.tasks.classification.export",
}


# Frames of the import system between an import statement and the loader: the frozen
# bootstrap modules, importlib's own files (import_module) and this module.
_IMPORT_SYSTEM = ("<frozen importlib.", os.path.dirname(importlib.__file__) + os.sep, __file__,
                  os.path.join(os.path.dirname(__file__), "_lazy.py"))


def _importer():
    """The frame of the code that imports (the first outside the import system), or None."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_IMPORT_SYSTEM):
        frame = frame.f_back
    return frame


def _warn_moved(old: str, advice: str, filename: str, lineno: int, module: str,
                registry=None, table=MOVED) -> None:
    """The DeprecationWarning of `old` (a key of `table`), filed at filename:lineno of
    `module` (as `warnings.warn` files it: the source line read by file name)."""
    warnings.warn_explicit(f"{old} moved to {table[old]}; {advice} (the old path will be "
                           "removed)", DeprecationWarning, filename, lineno, module, registry)


def _warn_at_importer(old: str, advice: str, table=MOVED) -> None:
    """`_warn_moved`, filed at the line of the code that imports (or reads) `old`."""
    frame = _importer()
    if frame is None:  # imported from C, no Python code above
        _warn_moved(old, advice, "<unknown>", 0, __name__, table=table)
    else:
        _warn_moved(old, advice, frame.f_code.co_filename, frame.f_lineno,
                    frame.f_globals.get("__name__"),
                    frame.f_globals.setdefault("__warningregistry__", {}), table)


def moved_name(package: str, name: str):
    """`package.name` of MOVED_NAMES, loaded from its new module, with a DeprecationWarning
    (the package caches it: the first read in a process warns, as the first import of an
    old module path). AttributeError when it did not move."""
    old = f"{package}.{name}"
    if old not in MOVED_NAMES:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn_at_importer(old, f"import {name} from there", MOVED_NAMES)
    return getattr(importlib.import_module(MOVED_NAMES[old]), name)


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path, with a DeprecationWarning."""

    def __init__(self, old: str):
        self.old = old
        self.target = MOVED[old]
        self.target_spec = None

    def create_module(self, spec):
        _warn_at_importer(self.old, "import that")
        module = importlib.import_module(self.target)
        self.target_spec = module.__spec__
        return module

    def exec_module(self, module):
        """Nothing to run (create_module returned the already-executed new module); the
        import system set the module's __spec__ to the old path's: give it back its own."""
        module.__spec__ = self.target_spec

    def get_code(self, fullname):
        """The new module's code, for `python -m <old path>` (runpy runs it as __main__,
        so the warning is filed under __main__: shown by default)."""
        _warn_moved(self.old, f"run `python -m {self.target}`", f"python -m {self.old}", 0,
                    "__main__")
        spec = importlib.util.find_spec(self.target)
        return spec.loader.get_code(self.target)


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(fullname))


def install() -> None:
    """Puts the finder on sys.meta_path once (albert_tf/__init__ calls it)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
