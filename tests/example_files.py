"""The spec files under examples/, for every test that walks them: each file of a spec format, except CI
configuration (examples/gitops holds a GitHub workflow and a .gitlab-ci.yml, YAML that is no spec)."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CI_FILES = {".gitlab-ci.yml"}


def example_specs(suffixes: tuple[str, ...] = (".yaml", ".yml", ".toml", ".json")) -> list[pathlib.Path]:
    return sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in suffixes
                  and ".github" not in p.parts and p.name not in CI_FILES)
