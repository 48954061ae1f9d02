"""Keras finds albert_tf's classes by name once `import albert_tf` has run.

`keras.saving.load_model("x.keras")` looks a saved class up by its registered name
("albert_tf>AlbertTextClassifier") in Keras' registry, where a class is only once the
module defining it has run its `@keras.saving.register_keras_serializable`. `import
albert_tf` stays cheap (no TensorFlow or Keras), and Keras may be imported in the middle of
albert_tf's own imports, so nothing is imported ahead: once Keras is loaded (at once if it
is, else right after the `keras` package executes: a finder on sys.meta_path wraps its
loader), its registry becomes one that imports the registering modules the first time it
is asked for an albert_tf name it does not hold.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

# Every module that registers classes a saved task model holds (the tasks, their networks,
# layers, metrics, optimizers and schedules).
REGISTERING_MODULES = (
    "albert_tf.modeling.layers", "albert_tf.modeling.heads", "albert_tf.modeling.encoder",
    "albert_tf.modeling.models", "albert_tf.modeling.crf",
    "albert_tf.modeling.token_classifier", "albert_tf.modeling.sentence_encoder",
    "albert_tf.training.optimization", "albert_tf.keras_tasks.preprocessor",
    "albert_tf.keras_tasks.metrics", "albert_tf.keras_tasks.text_classifier",
    "albert_tf.keras_tasks.tagger", "albert_tf.keras_tasks.multiple_choice",
    "albert_tf.keras_tasks.masked_lm", "albert_tf.keras_tasks.feature_extractor",
    "albert_tf.keras_tasks.question_answerer", "albert_tf.keras_tasks.sentence_embedder",
)


def register_with_keras() -> None:
    """Imports the registering modules (Keras must be importable)."""
    for name in REGISTERING_MODULES:
        importlib.import_module(name)


class _RegisteringDict(dict):
    """Keras' registry of custom objects; an absent "albert_tf>" name first imports the
    registering modules (which add their classes here), then is looked up again."""

    _registering = False

    def _register_for(self, key) -> None:
        if (isinstance(key, str) and key.startswith("albert_tf>") and
                not dict.__contains__(self, key) and not _RegisteringDict._registering):
            _RegisteringDict._registering = True
            try:
                register_with_keras()
            finally:
                _RegisteringDict._registering = False

    def __contains__(self, key):
        self._register_for(key)
        return dict.__contains__(self, key)

    def __getitem__(self, key):
        self._register_for(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        self._register_for(key)
        return dict.get(self, key, default)


def make_registry_lazy() -> None:
    """Swaps Keras' registry for a `_RegisteringDict` holding the same entries (Keras reads
    `object_registration.GLOBAL_CUSTOM_OBJECTS` at each lookup and registration)."""
    try:
        from keras.src.saving import object_registration
    except ImportError:  # another Keras layout: register everything now
        register_with_keras()
        return
    registry = getattr(object_registration, "GLOBAL_CUSTOM_OBJECTS", None)
    if not isinstance(registry, dict):
        register_with_keras()
    elif not isinstance(registry, _RegisteringDict):
        object_registration.GLOBAL_CUSTOM_OBJECTS = _RegisteringDict(registry)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: gives the `keras` package's spec a loader that registers
    albert_tf's classes once the package has executed, then leaves sys.meta_path.
    (TensorFlow asks for keras' spec without importing it: only an executed spec counts.)"""

    def __init__(self):
        self._finding = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras" or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec("keras")
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            make_registry_lazy()

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Makes Keras' registry lazy now when Keras is loaded, else when it first is
    (albert_tf/__init__ calls it)."""
    if "keras" in sys.modules:
        make_registry_lazy()
    elif not any(isinstance(f, _AfterKerasImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterKerasImport())
