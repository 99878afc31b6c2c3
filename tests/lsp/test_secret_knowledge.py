"""The language server knows a role's secrets from the JSON Schema: keys, the kind's values, each key's doc."""

from __future__ import annotations

from torchspec.lsp import knowledge


def test_role_and_reference_keys_complete() -> None:
    assert "secrets" in knowledge.properties(("roles", 0))
    assert set(knowledge.properties(("roles", 0, "secrets", 0))) == {"env", "env_prefix", "mount", "name", "key",
                                                                     "kind"}
    assert knowledge.enum_values(("roles", 0, "secrets", 0, "kind")) == ["secret", "config_map"]
    assert "required with `env`" in (knowledge.field_doc(("roles", 0, "secrets", 0, "key")) or "")
