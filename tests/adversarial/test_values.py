"""Values a parser can be talked into: duplicate keys, YAML tags, TOML's dates and numbers, huge integers.

Each is refused with a coded diagnostic at the offending place (or, for
values that are only of the wrong kind, a schema error saying what was
found); none runs code, and none escapes as a Python exception.
"""

from __future__ import annotations

import pytest

from input_support import SPEC, assert_clean, assert_error_at, cli, first_error, problems
from torchspec.exit_codes import ExitCode

TOML_HEAD = 'name = "app"\n[[roles]]\nname = "a"\nimage = "."\nentrypoint = "echo"\n'

DUPLICATES = {
    "yaml": ("yaml", SPEC + "name: again\n", (7, 1), "duplicate key 'name' (first defined on line 1)"),
    "yaml nested": ("yaml", SPEC + "    env: {A: '1', A: '2'}\n", (7, 19), "duplicate key 'A'"),
    "json": ("json", '{"name": "a",\n "name": "b"}', (2, 2), "duplicate key 'name'"),
    "toml key": ("toml", 'name = "a"\nname = "b"\n', (2, 1), "duplicate key 'name' (first defined on line 1)"),
    "toml key in a table": ("toml", TOML_HEAD + 'entrypoint = "sh"\n', (6, 1), "duplicate key 'roles[0].entrypoint'"),
    "toml table": ("toml", '[t]\nx = 1\n[t]\ny = 2\n', (3, 1), "duplicate key 't' (first defined on line 1)"),
    "toml dotted into inline": ("toml", 'a = {x = 1}\na.y = 2\n', (2, 8), "defined twice"),
}


@pytest.mark.parametrize("name", DUPLICATES)
def test_duplicate_keys_are_ts105_at_the_second(name: str) -> None:
    """TOML's were TS102 "Cannot overwrite a value", placed after the value (or "at the end of the file")."""
    fmt, text, where, message = DUPLICATES[name]
    assert_error_at(text, fmt, "TS105", where, message)


TAGS = ["!!python/object/apply:os.system ['touch {marker}']", "!!python/object/new:os.system ['touch {marker}']",
        "!!python/name:os.system ''", "!!python/module:os ''", "!!binary aGk=", "!!set {{a: null}}",
        "!!omap [{{a: 1}}]", "!custom x", "!<tag:yaml.org,2002:python/object:os.system> x"]


@pytest.mark.parametrize("tag", TAGS)
def test_yaml_tags_are_refused_and_never_run(tag: str, tmp_path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "tag.yaml"
    path.write_text(SPEC.replace('["hi"]', "[" + tag.format(marker=marker) + "]"))
    for command in (["lint"], ["render"], ["dryrun", "-s", "local"]):
        assert_clean(cli(*command, str(path)), ExitCode.SPEC_ERROR, "TS106", "is not supported in a spec")
    assert not marker.exists()


TOML_EDGES = {
    "impossible date": ('args = [2024-02-30]', "TS102", "Invalid date"),
    "month 13": ('args = [2024-13-45]', "TS102", "quote it"),
    "date where text goes": ('args = [2024-01-01]', "TS201", "got date"),
    "datetime in env": ('env = {D = 2024-01-01T10:00:00Z}', "TS201", "got datetime"),
    "time": ('args = [07:32:00]', "TS201", "got time"),
    "nan": ('num_replicas = nan', "TS201", "nan"),
    "inf": ('max_retries = inf', "TS201", "inf"),
    "huge hex": ('num_replicas = 0x7fffffffffffffff', "TS205", "more than the maximum"),
    "unicode escape beyond range": ('args = ["\\U00110000"]', "TS102", ""),
    "mixed array": ('args = ["a", 1]', "TS201", "got the integer 1"),
}


@pytest.mark.parametrize("name", TOML_EDGES)
def test_toml_edge_cases_are_coded_diagnostics(name: str) -> None:
    line, code, text = TOML_EDGES[name]
    d = first_error(TOML_HEAD + line + "\n", "toml")
    assert d.code == code and d.line == 6, str(d)
    assert text in str(d)


@pytest.mark.parametrize("fmt,template", [
    ("yaml", SPEC + "    max_retries: {n}\n"),
    ("json", '{{"name": "a", "roles": [{{"name": "a", "image": ".", "entrypoint": "e", "max_retries": {n}}}]}}'),
    ("toml", TOML_HEAD + "max_retries = {n}\n"),
], ids=["yaml", "json", "toml"])
def test_integers_longer_than_python_converts_are_ts104(fmt: str, template: str) -> None:
    """Past 4,300 digits int() raises ValueError: that escaped all three parsers as a traceback."""
    d = first_error(template.format(n="9" * 5000), fmt)
    assert d.code == "TS104" and "digits" in d.message and d.line is not None, str(d)
    assert d.line == template.count("\n", 0, template.index("{n}")) + 1
    small = problems(template.format(n="9" * 40), fmt)
    assert [d.code for d in small] == ["TS205"]  # merely out of range


def test_huge_integers_through_the_cli(tmp_path) -> None:
    path = tmp_path / "n.json"
    path.write_text('{"name": "a", "roles": [{"name": "a", "image": ".", "entrypoint": "e", "max_retries": '
                    + "1" * 100_000 + "}]}")
    assert_clean(cli("dryrun", "-s", "local", str(path)), ExitCode.SPEC_ERROR, "TS104", "digits")


def test_a_stand_in_param_of_the_wrong_type_does_not_crash_lint(tmp_path) -> None:
    """Found by the fuzz test: lint stood in [] for a required list param used as a role name, and the
    rules (which trust the schema) crashed on it: exit 3.  Lint now skips the rules there; given a value,
    the type error is reported."""
    path = tmp_path / "list-name.yaml"
    path.write_text("name: app\nroles:\n- name: '{{ n }}'\n  image: .\n  entrypoint: python\n"
                    "params:\n  n:\n    type: list\n")
    assert_clean(cli("lint", str(path)), ExitCode.OK)
    assert_clean(cli("lint", str(path), "-p", "n=a,b"), ExitCode.SPEC_ERROR, "TS201")
