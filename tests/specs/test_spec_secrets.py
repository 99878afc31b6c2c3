"""Role.secrets: references (a name and a key, never a value), TorchX-compatible, to and from spec data."""

from __future__ import annotations

import dataclasses

import jsonschema
import pytest

from torchspec import specs
from torchspec.loader.schema import load_schema
from torchspec.specs.convert import build_role, dump_role
from torchspec.specs.secrets import SecretRef


def test_role_calls_written_for_torchx_still_work() -> None:
    """``secrets`` (and ``depends_on``) come after every TorchX field, so positional and keyword calls are
    unchanged."""
    names = [f.name for f in dataclasses.fields(specs.Role)]
    assert names[names.index("overrides"):] == ["overrides", "secrets", "depends_on"]
    role = specs.Role("trainer", "img", None, None, "python", ["a"], {"K": "v"}, 2)
    assert role.secrets == [] and role.num_replicas == 2 and role.env == {"K": "v"}


def test_placeholder_and_ref() -> None:
    assert SecretRef(name="hf-token", key="token", env="T").placeholder == "<secret hf-token/token>"
    assert SecretRef(name="db", mount="/etc/db", kind="config_map").placeholder == "<config_map db>"


def test_convert_round_trip_writes_no_default_kind() -> None:
    items = [{"env": "HF_TOKEN", "name": "hf-token", "key": "token"},
             {"env_prefix": "DB_", "name": "db-creds"},
             {"mount": "/etc/creds", "name": "settings", "kind": "config_map"}]
    role = build_role({"name": "t", "image": "i", "entrypoint": "e", "secrets": items})
    assert role.secrets[0] == SecretRef(name="hf-token", key="token", env="HF_TOKEN")
    assert role.secrets[2].kind == "config_map"
    assert dump_role(role)["secrets"] == items
    assert "secrets" not in dump_role(build_role({"name": "t", "image": "i", "entrypoint": "e"}))


@pytest.mark.parametrize("item", [
    {"env": "T", "name": "n", "key": "k"}, {"mount": "/m", "name": "n"}, {"env_prefix": "", "name": "n"},
    {"env": "T", "name": "n", "key": "k", "kind": "config_map"}, {"env": "T"},  # no name: TS509, not the schema
])
def test_schema_takes_reference_forms(item: dict) -> None:
    doc = {"name": "a", "roles": [{"name": "t", "image": "i", "entrypoint": "e", "secrets": [item]}]}
    jsonschema.Draft202012Validator(load_schema()).validate(doc)


@pytest.mark.parametrize("item", [{"env": "T", "name": "n", "key": "k", "value": "hunter2"},
                                  {"env": "T", "name": "n", "key": "k", "kind": "vault"}, "hf-token"])
def test_schema_refuses_values_and_unknown_kinds(item: object) -> None:
    doc = {"name": "a", "roles": [{"name": "t", "image": "i", "entrypoint": "e", "secrets": [item]}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(load_schema()).validate(doc)
