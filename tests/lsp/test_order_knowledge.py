"""The language server knows ``depends_on`` from the JSON Schema, and ``${hosts_env:ROLE}`` among the macros."""

from __future__ import annotations

from torchspec.lsp import knowledge
from torchspec.lsp.completion import _macros


def test_depends_on_keys_and_whens_complete() -> None:
    assert "depends_on" in knowledge.properties(("roles", 0))
    assert set(knowledge.properties(("roles", 0, "depends_on", 0))) == {"role", "when"}
    assert knowledge.enum_values(("roles", 0, "depends_on", 0, "when")) == ["finished", "ready"]


def test_hosts_env_completes_up_to_the_role_it_takes() -> None:
    item = next(i for i in _macros(close=True) if i.label == "hosts_env")
    assert item.insert_text == "hosts_env:" and item.detail == "${hosts_env:ROLE} runtime macro"
    assert "TORCHSPEC_HOSTS_<ROLE>" in str(item.documentation)
    assert next(i for i in _macros(close=True) if i.label == "app_id").insert_text == "app_id}"
