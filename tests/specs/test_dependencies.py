"""Role.depends_on and the hosts variables at the spec level: the references' checks, the start order,
spec data <-> AppDef, the ``${hosts_env:ROLE}`` macro, and the runner's refusal of an AppDef lint never saw."""

from __future__ import annotations

from typing import List, Sequence, Tuple

import pytest

from torchspec.errors import AppRefusedError
from torchspec.runner.validation import validate_app
from torchspec.specs import AppDef, Role, RoleDependency, macros
from torchspec.specs.api import role_hosts_env
from torchspec.specs.convert import build_app, dump_app
from torchspec.specs.dependencies import dependency_problems, start_waves

Roles = Sequence[Tuple[str, Sequence[RoleDependency]]]


def problems(roles: Roles) -> List[Tuple[int, tuple, str]]:
    return [(index, at, message) for index, (at, message, _) in dependency_problems(roles)]


def test_a_chain_has_no_problem_and_starts_in_waves() -> None:
    roles: Roles = [("train", [RoleDependency("ps", "ready"), RoleDependency("download")]),
                    ("download", []), ("ps", [RoleDependency("download")]), ("eval", [])]
    assert problems(roles) == []
    assert start_waves(roles) == [["download", "eval"], ["ps"], ["train"]]


def test_each_problem_once_at_its_reference() -> None:
    roles: Roles = [("a", [RoleDependency("b")]), ("b", [RoleDependency("c"), RoleDependency("b")]),
                    ("c", [RoleDependency("a", "done")]), ("d", [RoleDependency("nope")])]
    found = problems(roles)
    assert found == [
        (1, ("depends_on", 1, "role"), "role 'b' depends on itself: it would never start"),
        (2, ("depends_on", 0, "when"), "role 'c' waits for 'a' to be 'done', which no scheduler knows"),
        (3, ("depends_on", 0, "role"), "role 'd' depends on 'nope', which is no role of the app"),
        (2, ("depends_on", 0, "role"), "roles wait for each other in a cycle: a -> b -> c -> a; none would start"),
    ]


def test_start_waves_refuses_a_cycle() -> None:
    with pytest.raises(ValueError, match="wait for each other"):
        start_waves([("a", [RoleDependency("b")]), ("b", [RoleDependency("a")])])


def test_spec_data_round_trip_and_the_short_form() -> None:
    data = {"name": "app", "roles": [
        {"name": "download", "image": "i", "entrypoint": "x"},
        {"name": "train", "image": "i", "entrypoint": "x", "depends_on": ["download", {"role": "download", "when": "ready"}]}]}
    app = build_app(data)
    assert app.roles[1].depends_on == [RoleDependency("download", "finished"), RoleDependency("download", "ready")]
    dumped = dump_app(app)
    assert dumped["roles"][1]["depends_on"] == [{"role": "download", "when": "finished"},
                                               {"role": "download", "when": "ready"}]
    assert "depends_on" not in dumped["roles"][0]
    assert build_app(dumped) == app


@pytest.mark.parametrize(("name", "variable"), [("ps", "TORCHSPEC_HOSTS_PS"),
                                                ("parameter-server", "TORCHSPEC_HOSTS_PARAMETER_SERVER"),
                                                ("Data.Loader_2", "TORCHSPEC_HOSTS_DATA_LOADER_2")])
def test_hosts_env_macro_names_the_variable(name: str, variable: str) -> None:
    assert role_hosts_env(name) == variable
    values = macros.Values(img_root="", app_id="a", replica_id="0")
    assert values.substitute(macros.hosts_env(name)) == variable
    assert values.substitute("$${" + macros.hosts_env(name) + "}") == "${" + variable + "}"  # the shell expands it
    assert values.substitute("$" + macros.hosts_env(name)) == macros.hosts_env(name)  # escaped: literal


def role(name: str, *deps: RoleDependency) -> Role:
    return Role(name=name, image="i", entrypoint="x", depends_on=list(deps))


def test_the_runner_refuses_what_lint_would_with_positions() -> None:
    app = AppDef("app", [role("a", RoleDependency("bb")), role("b", RoleDependency("b"))])
    with pytest.raises(AppRefusedError) as e:
        validate_app(app)
    assert e.value.code == "TS510"
    assert e.value.problems == ((("roles", 0, "depends_on", 0, "role"), "role 'a' depends on 'bb', which is no role"
                                 " of the app"),
                                (("roles", 1, "depends_on", 0, "role"), "role 'b' depends on itself: it would never"
                                 " start"))
    assert e.value.hint == "did you mean 'b'?"


def test_the_runner_refuses_two_roles_with_one_hosts_variable() -> None:
    with pytest.raises(AppRefusedError, match="TORCHSPEC_HOSTS_A_B") as e:
        validate_app(AppDef("app", [role("a-b"), role("a_b")]))
    assert e.value.code == "TS503" and e.value.path == ("roles", 1, "name")
