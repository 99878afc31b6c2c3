"""Names a backend package answers for without importing its modules up front.

Each backend's ``__init__`` holds only ``create_scheduler``, so importing
the package costs nothing; the names its single-file module used to export
(``torchspec.schedulers.local.LocalScheduler``...) stay importable from the
package through :func:`lazy_exports`, each loaded from its module on first use.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, List, Mapping, Tuple


def lazy_exports(package: str, where: Mapping[str, str]) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``package``: ``name`` comes from ``where[name]``, a
    submodule of the package (``"scheduler"``) or a module named in full (``"torchspec.schedulers.replicas"``),
    and ``dir()`` (tab completion) lists those names too."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        full = module if module.startswith("torchspec.") else f"{package}.{module}"
        return getattr(importlib.import_module(full), name)

    def __dir__() -> List[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
