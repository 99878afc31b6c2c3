"""torchspec: declarative job specs for distributed PyTorch applications.

The package root stays import-light on purpose: ``torchspec --version`` and
``torchspec lint`` must start about as fast as ``import yaml``.
"""

from torchspec.version import __version__

__all__ = ["__version__"]
