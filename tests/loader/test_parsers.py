"""Parsers keep exact positions and turn every malformed input into a coded diagnostic."""

from __future__ import annotations

import pytest

from torchspec.loader.parsers import MAX_DEPTH, parse


def one(text: str, fmt: str = "yaml"):
    docs, diags = parse(text, "f." + fmt, fmt)
    assert not diags, diags
    assert len(docs) == 1
    return docs[0]


def problem(text: str, fmt: str = "yaml"):
    docs, diags = parse(text, "f." + fmt, fmt)
    assert diags, f"expected a diagnostic for {text!r}"
    return diags[0]


def test_yaml_positions_of_values_and_keys() -> None:
    doc = one("name: x\nroles:\n  - name: a\n    args: [a, 'b']\n")
    assert doc.positions[("roles", 0, "args", 1)] == (4, 15)
    assert doc.key_positions[("roles", 0, "args")] == (4, 5)
    assert doc.locate(("roles", 0, "args", 7, "deeper")) == (4, 11)


def test_yaml_keeps_keys_as_written_and_merges() -> None:
    doc = one("base: &b {cpu: 1, gpu: 2}\nres:\n  <<: *b\n  gpu: 4\non: 1\n8080: x\n")
    assert doc.data["res"] == {"gpu": 4, "cpu": 1}
    assert "on" in doc.data and "8080" in doc.data


def test_yaml_timestamps_stay_text() -> None:
    assert one("name: 2024-01-01\n").data["name"] == "2024-01-01"


def test_yaml_several_documents() -> None:
    docs, diags = parse("name: a\n---\nname: b\n", "f.yaml", "yaml")
    assert [d.data["name"] for d in docs] == ["a", "b"]
    assert [d.index for d in docs] == [0, 1]


@pytest.mark.parametrize(
    "text, code, line",
    [
        ("a: 1\na: 2\n", "TS105", 2),
        ("a: !!python/object:os.system x\n", "TS106", 1),
        ("a: !custom 1\n", "TS106", 1),
        ("a:\n\t- b\n", "TS101", 2),
        ("a: [1, 2\n", "TS101", 1),  # where the list opened, not where the file ended
        ("name: {{ x }}\n", "TS106", 1),
        ("a: *nope\n", "TS101", 1),
        ("a: !!binary aGVsbG8=\n", "TS106", 1),
    ],
)
def test_yaml_problems(text: str, code: str, line: int) -> None:
    d = problem(text)
    assert (d.code, d.line) == (code, line)
    assert d.column is not None and d.message


def test_unquoted_template_gets_quoting_hint() -> None:
    assert "quote" in (problem("name: {{ x }}\n").hint or "")


@pytest.mark.parametrize("text, column, hint", [
    ("name: {{ msg }}\n", 7, 'quote it: name: "{{ msg }}"'),
    ("args:\n  - {{ x }}  # a comment\n", 5, 'quote it: - "{{ x }}"  # a comment'),
    ("env: {A: {{ a }}}\n", 10, 'quote it: env: {A: "{{ a }}"}'),
    ('cmd: {{ "x" }}\n', 6, """quote it: cmd: '{{ "x" }}'"""),
])
def test_an_unquoted_template_value_is_called_that(text: str, column: int, hint: str) -> None:
    """YAML reads `{{ msg }}` as a mapping with a mapping for a key; the user wrote a value to quote."""
    d = problem(text)
    assert d.code == "TS106" and d.column == column
    assert d.message.startswith('a value that starts with "{{" must be quoted in YAML'), d.message
    assert "mapping key" not in d.message and d.hint == hint


def test_a_real_mapping_key_that_is_a_mapping_is_still_called_that() -> None:
    d = problem("? {a: 1}\n: x\n")
    assert (d.code, d.message) == ("TS106", "a mapping key must be a string, not a list or mapping")


@pytest.mark.parametrize("text, line, column, message", [
    ("name: x\nroles:\n  - name: r\n    args: [a, b\n    num_replicas: 1\n", 4, 11,
     "the [ ] list opened here is not closed: expected ',' or ']' by line 5, column 17"),
    ("name: x\nargs: [a, b\n", 2, 7, "the [ ] list opened here is not closed: expected ',' or ']' before the end"
                                      " of the file"),
    ("env: {A: 1\nname: x\n", 1, 6, "the { } mapping opened here is not closed: expected ',' or '}' by line 2,"
                                     " column 5"),
    ('name: "x\n', 1, 7, "the quoted string opened here is not closed before the end of the file"),
])
def test_an_unclosed_bracket_is_reported_where_it_opened(text: str, line: int, column: int, message: str) -> None:
    d = problem(text)
    assert (d.code, d.line, d.column, d.message) == ("TS101", line, column, message)


def test_a_bad_item_of_a_list_over_several_lines_is_reported_at_the_item() -> None:
    d = problem('args: [\n  a,\n  "b" c,\n]\n')
    assert (d.code, d.line) == ("TS101", 3) and "opened here" not in d.message


def test_alias_bomb_fails_fast() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    d = problem("\n".join(lines) + "\n")
    assert d.code == "TS104"


def test_deep_flow_nesting_does_not_crash() -> None:
    d = problem("[" * 60000 + "]" * 60000)
    assert d.code == "TS104"


def test_deep_block_nesting_is_refused() -> None:
    text = "".join(" " * i + "a:\n" for i in range(MAX_DEPTH + 5)) + " " * (MAX_DEPTH + 5) + "b\n"
    assert problem(text).code == "TS104"


def test_json_positions_and_problems() -> None:
    doc = one('{\n  "name": "x",\n  "roles": [ {"name": "a"} ]\n}', "json")
    assert doc.positions[("roles", 0, "name")] == (3, 23)
    assert doc.key_positions[("name",)] == (2, 3)
    d = problem('{"a": 1,}', "json")
    assert (d.code, d.line, d.column) == ("TS103", 1, 9)
    assert "trailing comma" in (d.hint or "")
    assert problem('{"a": 1, "a": 2}', "json").code == "TS105"
    assert problem("{'a': 1}", "json").code == "TS103"
    assert problem("", "json").code == "TS003"
    assert problem("[" * 200 + "]" * 200, "json").code == "TS104"  # nesting is TS104 in every format


def test_toml_lines_and_errors() -> None:
    doc = one('name = "x"\n[[roles]]\nname = "a"\n[[roles]]\nname = "b"\n[roles.resource]\ncpu = 2\n', "toml")
    assert doc.locate(("roles", 1, "resource", "cpu"))[0] == 7
    assert doc.locate(("roles", 1, "name"))[0] == 5
    d = problem('name = "x"\nroles = [\n', "toml")
    assert d.code == "TS102" and d.line is not None
    assert "quote" in (problem("name = {{ x }}\n", "toml").hint or "")
