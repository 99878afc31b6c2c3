"""``torchx.workspace``: what a standalone workspace build returns (see :mod:`torchspec.workspace.api`)."""

from torchspec.workspace.api import PkgInfo, WorkspaceBuilder

__all__ = ["PkgInfo", "WorkspaceBuilder"]
