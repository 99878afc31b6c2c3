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


#: where the documentation is published (mkdocs.yml's ``site_url``): messages point there, not at docs/ files,
#: which a wheel user does not have
DOCS_URL = "https://torchspec.dev/"


def docs_url(page: str, section: str = "") -> str:
    """The published address of ``docs/PAGE.md`` (``security``, ``guides/secrets``), at ``section``'s anchor."""
    return f"{DOCS_URL}{page.strip('/')}/" + (f"#{section}" if section else "")


def is_own_dist(name: str) -> bool:
    """Whether the distribution ``name`` (as its metadata spells it) is torchspec itself."""
    return name.lower().replace("_", "-") in OWN_DISTS
