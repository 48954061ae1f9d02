"""Package attributes loaded on first use (PEP 562).

A package lists its public names and the module of the package that defines each; a
name is imported when first read, so importing the package itself stays cheap (no
TensorFlow or Keras until a name that needs them is used). A name that moved out of the
package (`albert_tf._moved.MOVED_NAMES`) still reads, with a DeprecationWarning.
"""
from __future__ import annotations

import importlib
from typing import Callable, Dict, List, Mapping, Tuple

from albert_tf import _moved


def lazy_attributes(package: str, exports: Mapping[str, str], namespace: Dict
                    ) -> Tuple[Callable[[str], object], Callable[[], List[str]]]:
    """(`__getattr__`, `__dir__`) for `package`.

    exports: public name -> defining module, relative to `package` ("job", "in_graph").
    namespace: the package's `globals()`, where a loaded name is cached.
    """
    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
            namespace[name] = value
            return value
        value = _moved.moved_name(package, name)
        namespace[name] = value
        return value

    def __dir__() -> List[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
