"""Bytes that are not clean UTF-8 text, and characters no process can take.

A UTF-8 BOM is accepted in every format; UTF-16 and UTF-32 (with or without
a BOM) are refused by name with the fix; invalid UTF-8, raw NUL bytes and
control characters are refused with their line and column.  Escapes can
still write a NUL (YAML ``"\\0"``, JSON and TOML ``"\\u0000"``) or a lone
surrogate (JSON ``"\\ud800"``): no argv, environment or file name can hold
them, so they are refused where they are written rather than failing the
job at launch or torchspec when it prints the value.
"""

from __future__ import annotations

import pytest

from input_support import SPEC, assert_clean, assert_error_at, cli, first_error
from torchspec.exit_codes import ExitCode
from torchspec.loader import load_file

JSON_SPEC = '{"name": "app", "roles": [{"name": "a", "image": ".", "entrypoint": "echo", "args": ["hi"]}]}'
TOML_SPEC = 'name = "app"\n[[roles]]\nname = "a"\nimage = "."\nentrypoint = "echo"\nargs = ["hi"]\n'
SPECS = {"yaml": SPEC, "json": JSON_SPEC, "toml": TOML_SPEC}


@pytest.mark.parametrize("fmt", SPECS)
def test_a_utf8_bom_is_accepted(fmt: str, tmp_path) -> None:
    path = tmp_path / f"bom.{fmt}"
    path.write_bytes(b"\xef\xbb\xbf" + SPECS[fmt].encode())
    loaded = load_file(str(path))
    assert loaded.ok, loaded.all_diagnostics()
    assert loaded.documents[0].app.roles[0].args == ["hi"]


@pytest.mark.parametrize("encoding,name", [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"),
                                           ("utf-32", "UTF-32"), ("utf-32-le", "UTF-32"), ("utf-32-be", "UTF-32")])
def test_utf16_and_utf32_are_refused_by_name(encoding: str, name: str, tmp_path) -> None:
    path = tmp_path / "wide.yaml"
    path.write_bytes(SPEC.encode(encoding))
    output = assert_clean(cli("render", str(path)), ExitCode.SPEC_ERROR, "TS001", f"{name} text", "UTF-8")
    assert "binary" not in output
    assert f"iconv -f {name} -t UTF-8" in output


def test_invalid_utf8_is_refused_at_its_byte(tmp_path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(SPEC.replace('"hi"', '"caf\xe9"').encode("latin-1"))
    d = load_file(str(path)).diagnostics[0]
    assert (d.code, d.line, d.column) == ("TS001", 6, 16)
    assert "0xe9" in d.message and "UTF-8" in (d.hint or "")


def test_a_raw_nul_byte_is_refused_at_its_place(tmp_path) -> None:
    path = tmp_path / "nul.yaml"
    path.write_bytes(SPEC.replace('"hi"', '"h\0i"').encode())
    assert_clean(cli("render", str(path)), ExitCode.SPEC_ERROR, f"{path}:6:14:", "TS001", "NUL byte")


def test_a_control_character_in_yaml_has_a_position() -> None:
    d = first_error(SPEC.replace('"hi"', '"h\x07i"'))
    assert (d.code, d.line, d.column) == ("TS101", 6, 14)
    assert "U+0007" in d.message and "escape" in (d.hint or "")


ESCAPED = {
    "yaml NUL": ("yaml", SPEC.replace('"hi"', '"h\\0i"'), (6, 12), "a NUL character"),
    "yaml NUL key": ("yaml", SPEC + '    env: {"A\\x00B": "1"}\n', (7, 11), "a NUL character"),
    "json NUL": ("json", JSON_SPEC.replace('"hi"', '"h\\u0000i"'), (1, 86), "a NUL character"),
    "json lone surrogate": ("json", JSON_SPEC.replace('"hi"', '"h\\ud800i"'), (1, 86), "lone surrogate \\ud800"),
    "json reversed pair": ("json", JSON_SPEC.replace('"hi"', '"\\udc00\\ud800"'), (1, 86), "lone surrogate"),
    "toml NUL": ("toml", TOML_SPEC.replace('"hi"', '"h\\u0000i"'), (6, 8), "a NUL character"),
}


@pytest.mark.parametrize("name", ESCAPED)
def test_escaped_nul_and_surrogates_are_refused_where_written(name: str) -> None:
    fmt, text, where, what = ESCAPED[name]
    d = assert_error_at(text, fmt, "TS106", where, what)
    assert "\0" not in str(d)  # the diagnostic never prints the character itself


@pytest.mark.parametrize("command", [["render"], ["dryrun", "-s", "local"], ["lint", "--format", "json"]])
def test_a_surrogate_is_a_spec_error_in_every_command_not_a_crash(command: list[str], tmp_path) -> None:
    """Before: render printed it, and dryrun crashed printing it (exit 3, UnicodeEncodeError)."""
    path = tmp_path / "s.json"
    path.write_text(ESCAPED["json lone surrogate"][1])
    assert_clean(cli(*command, str(path)), ExitCode.SPEC_ERROR, "TS106")
