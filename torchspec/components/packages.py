"""Components that installed packages offer, through the entry-point group ``torchspec.components``.

As TorchX's ``torchx.components`` group: a package declares

.. code-block:: toml

    [project.entry-points."torchspec.components"]
    acme = "acme_ml.components"            # acme.FUNCTION, acme.SPEC (spec files beside the module)
    train = "acme_ml.components:trainer"   # one function, named train

and ``torchspec submit acme.trainer ...`` runs ``acme_ml.components.trainer`` (a Python component: its
signature is its command line) or ``acme.ddp`` the spec file ``acme_ml/components/ddp.yaml`` (when the
module is a package; ``sub/x.yaml`` is ``acme.sub.x``).  They are resolved before the built-ins, as TorchX
orders them; a name that a package and a built-in both answer to, or two packages, is an error naming
both.  Packages written for TorchX, whose entry points are in ``torchx.components``, are read too (after
ours, with the same rules).  A package's code is imported only to run one of its components (``submit``, ``dryrun``, ``run``).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from torchspec.entry_points import EntryPoint, entry_points
from torchspec.errors import ComponentError, UsageError

GROUP = "torchspec.components"
_SPEC_SUFFIXES = (".yaml", ".yml", ".toml", ".json")


@dataclass(frozen=True)
class PackageComponent:
    """A component a package offers: a function (``fn``) or a spec file (``path``)."""

    name: str
    dist: str
    entry_point: str
    fn: Optional[Callable[..., Any]] = None
    path: Optional[str] = None

    @property
    def origin(self) -> str:
        return f"{self.entry_point} (package {self.dist or '?'})"


def find_package_component(name: str) -> Optional[PackageComponent]:
    """The component ``name`` of an installed package, None where none offers it.

    Raises:
        UsageError: two packages offer ``name``.
        ComponentError: the package's module does not import.
    """
    found = [c for ep in entry_points(GROUP) for c in _offered(ep, name)]
    if len(found) > 1:
        raise UsageError(f"component {name!r} is offered twice: by {found[0].origin} and by {found[1].origin}",
                         "uninstall one of the packages, or rename one entry point")
    return found[0] if found else None


def _offered(ep: EntryPoint, name: str) -> List[PackageComponent]:
    """What ``ep`` offers under ``name``: its function (``pkg.mod:fn`` entry points, by the entry's name),
    else a function or spec file of its module (``pkg.mod`` entry points, ``NAME.REST``)."""
    where = f"{ep.name} = {ep.value}"
    if ":" in ep.value:
        if name != ep.name:
            return []
        return [PackageComponent(name, ep.dist, where, fn=_load(ep.load, where))]
    if not name.startswith(ep.name + "."):
        return []
    module = _load(lambda: importlib.import_module(ep.module), where)
    rest = name[len(ep.name) + 1:]
    fn = getattr(module, rest, None) if "." not in rest else None
    if callable(fn) and not rest.startswith("_"):
        return [PackageComponent(name, ep.dist, where, fn=fn)]
    folders = list(getattr(module, "__path__", []))
    for folder in folders:
        for suffix in _SPEC_SUFFIXES:
            path = os.path.join(folder, *rest.split(".")) + suffix
            if os.path.isfile(path):
                return [PackageComponent(name, ep.dist, where, path=path)]
    return []


def _load(load: Callable[[], Any], where: str) -> Any:
    try:
        return load()
    except Exception as e:  # noqa: BLE001 - the package's code
        raise ComponentError(f"the component entry point {where} does not load: {type(e).__name__}: {e}",
                             "reinstall or fix that package; TORCHSPEC_DEBUG=1 shows the traceback") from e
