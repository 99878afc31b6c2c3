"""The package version, kept in a module of its own so ``torchspec --version`` imports nothing else.

The one place the version is written: pyproject.toml reads it (``[tool.setuptools.dynamic]``), and
CHANGELOG.md's newest release must name it (tests/test_packaging.py).
"""

__version__ = "0.1.0"

#: the distribution's name on PyPI (``pip install torchspec-cli``); the import package and the command are
#: ``torchspec``
DIST_NAME = "torchspec-cli"
#: the names torchspec's own entry points come under: its name, and the one it had before 0.1.0 (``torchspec``),
#: which an editable install made before the rename still lists
OWN_DISTS = (DIST_NAME, "torchspec")


def is_own_dist(name: str) -> bool:
    """Whether the distribution ``name`` (as its metadata spells it) is torchspec itself."""
    return name.lower().replace("_", "-") in OWN_DISTS
