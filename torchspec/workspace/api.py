"""``torchx.workspace.api``'s ``WorkspaceBuilder`` and ``PkgInfo``, for ``Runner.build_standalone_workspace``.

A builder makes a package of a workspace (an image, a patch, an archive)
apart from any scheduler, possibly in the background; ``PkgInfo`` says what
it made: the image to run, the role fields to set lazily (``Role.overrides``
producers, such as an awaitable image name), and the builder's own
metadata.  torchspec's schedulers build workspaces themselves (``submit -w``),
so these exist for code written against TorchX's API.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Dict, Generic, TypeVar

PackageType = TypeVar("PackageType")
WorkspaceConfigType = TypeVar("WorkspaceConfigType")


@dataclass
class PkgInfo(Generic[PackageType]):
    """What a workspace build made."""

    img: str
    lazy_overrides: Dict[str, Any]
    metadata: PackageType


@dataclass
class WorkspaceBuilder(abc.ABC, Generic[PackageType, WorkspaceConfigType]):
    """Builds a workspace with its configuration ``cfg``; subclasses say how."""

    cfg: WorkspaceConfigType

    @abc.abstractmethod
    def build_workspace(self, sync: bool = True) -> PkgInfo[PackageType]:
        """Build the workspace (in the background where ``sync`` is False, the package's fields then
        resolving through ``lazy_overrides``) and say what was built."""
