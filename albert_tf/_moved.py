"""Module paths that moved when the library became packages, kept importable.

`import albert_tf.fused_ops` (or `from albert_tf import models`, or
`python -m albert_tf.parameter_counts`) still works: the path is an alias of the
module at its new place (the same module object, so monkeypatching either name
patches both). New code imports the new path; `tests/test_architecture.py` checks
that every old path resolves.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

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
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        """Nothing to run: create_module returned the already-executed new module."""

    def get_code(self, fullname):
        """The new module's code, for `python -m <old path>` (runpy runs it as __main__)."""
        spec = importlib.util.find_spec(self.target)
        return spec.loader.get_code(self.target)


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(MOVED[fullname]))


def install() -> None:
    """Puts the finder on sys.meta_path once (albert_tf/__init__ calls it)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
