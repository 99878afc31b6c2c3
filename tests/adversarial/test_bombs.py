"""Small inputs that expand, and large ones: every limit holds in bounded time and memory.

The limits (docs/security.md names them): files over 2 MiB are
refused before parsing; aliases may expand a document to at most 100,000
values and repeat at most 2 MiB of text; a file holds at most 1,000 YAML
documents.  Each case is timed, and its memory is measured with tracemalloc.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Iterator

import pytest

from input_support import SPEC, assert_clean, cli, problems
from torchspec.exit_codes import ExitCode
from torchspec.loader import load_file
from torchspec.loader.parsers import MAX_ALIAS_CHARS, MAX_DOCUMENTS, MAX_VALUES
from torchspec.loader.source import MAX_FILE_BYTES


@pytest.fixture
def bounded() -> Iterator[None]:
    """The case must finish within 5 s of this process's CPU time and allocate at most 200 MB (Python
    objects) at its peak. CPU time, not the wall clock: a bomb costs work, and the other processes of a
    busy machine (a test cluster, a parallel run) must not fail a case that did none."""
    tracemalloc.start()
    start = time.process_time()
    yield
    elapsed = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 5, f"took {elapsed:.1f}s"
    assert peak < 200 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"


def laughs(levels: int, width: int = 10) -> str:
    lines = ["lol0: &lol0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * width) + "]" for i in range(1, levels)]
    return SPEC + "metadata:\n" + "".join(f"  {line}\n" for line in lines)


@pytest.mark.parametrize("levels", [6, 9, 30])
def test_billion_laughs_are_refused_fast(levels: int, bounded: None) -> None:
    errors = [d for d in problems(laughs(levels)) if d.is_error]
    assert errors[0].code == "TS104" and f"more than {MAX_VALUES} values" in errors[0].message


def test_a_big_string_repeated_by_aliases_is_refused(bounded: None) -> None:
    """Few values, much text: 1,000 aliases of a 1 MiB string were 1 GiB the moment anything printed it."""
    text = 'big: &big "' + "x" * (1 << 20) + '"\n' + SPEC.replace('["hi"]', "[" + ", ".join(["*big"] * 1000) + "]")
    errors = [d for d in problems(text) if d.is_error]
    assert errors[0].code == "TS104" and f"more than {MAX_ALIAS_CHARS} characters" in errors[0].message


def test_aliases_within_the_limits_still_work() -> None:
    text = SPEC.replace('["hi"]', '&args ["a", "b"]') + "  - name: b\n    image: .\n    entrypoint: echo\n    args: *args\n"
    assert problems(text) == []


def test_merge_keys_count_like_aliases(bounded: None) -> None:
    """``<<: *m`` under ten keys a level: a merge bomb is the same bomb."""
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: v" for j in range(10)) + "}"]
    lines += [f"m{i}: &m{i} {{" + ", ".join(f"x{j}: {{<<: *m{i - 1}}}" for j in range(10)) + "}" for i in range(1, 9)]
    errors = [d for d in problems(SPEC + "metadata:\n" + "".join(f"  {line}\n" for line in lines)) if d.is_error]
    assert errors[0].code == "TS104" and f"more than {MAX_VALUES} values" in errors[0].message


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(SPEC + "#" + "x" * MAX_FILE_BYTES + "\n")
    output = assert_clean(cli("render", str(path)), ExitCode.SPEC_ERROR, "TS002", f"{MAX_FILE_BYTES} bytes")
    assert "2 MiB" in output and "Security" in output  # the hint names the limit and where it is documented
    assert_clean(cli("lint", "--max-file-size", str(2 * MAX_FILE_BYTES), str(path)), ExitCode.OK)


def test_a_huge_scalar_under_the_limit_loads_in_bounded_time(tmp_path, bounded: None) -> None:
    path = tmp_path / "scalar.yaml"
    path.write_text(SPEC.replace('["hi"]', '["' + "x" * (MAX_FILE_BYTES - 200) + '"]'))
    loaded = load_file(str(path))
    assert loaded.ok and len(loaded.documents[0].app.roles[0].args[0]) == MAX_FILE_BYTES - 200


def test_many_documents_are_bounded(bounded: None) -> None:
    """500,000 empty documents took quadratic time and memory (each document split the whole text into lines)."""
    errors = [d for d in problems("---\n" * 500_000) if d.is_error]
    assert [d.code for d in errors] == ["TS104"] and f"more than {MAX_DOCUMENTS} documents" in errors[0].message
    assert errors[0].line == MAX_DOCUMENTS + 2


def test_many_documents_under_the_limit_load_in_linear_time(bounded: None) -> None:
    text = "".join(SPEC.replace("name: app", f"name: app{i}") + "---\n" for i in range(MAX_DOCUMENTS - 1)) + SPEC
    assert problems(text) == []


def test_thousands_of_duplicate_keys_take_linear_time(bounded: None) -> None:
    """Found by the fuzz test: each duplicate's source line was looked up from the start (20,000 took 36 s)."""
    errors = [d for d in problems("  k:\n" * 20_000 + "name: app\n") if d.is_error]
    assert len(errors) == 19_999 and {d.code for d in errors} == {"TS105"}
    assert errors[-1].line == 20_000 and errors[-1].source_line == "  k:"


def test_the_security_page_names_the_limits_the_code_enforces() -> None:
    """docs/security.md's table is written from these constants; a changed limit must change the docs."""
    from input_support import ROOT
    from torchspec.loader.parsers import MAX_DEPTH
    from torchspec.loader.sandbox import MAX_OUTPUT, MAX_REPEAT, MAX_TEMPLATE_BYTES
    from torchspec.loader.template import MAX_DOCUMENT_OUTPUT, MAX_RENDER_MEMORY, RENDER_SECONDS, RENDER_WALL_FACTOR

    section = (ROOT / "docs" / "security.md").read_text()
    for text in (f"{MAX_FILE_BYTES // 2**20} MiB (lint", f"{MAX_DEPTH} levels", f"{MAX_VALUES:,} values",
                 f"{MAX_ALIAS_CHARS // 2**20} MiB of text repeated", f"| {MAX_DOCUMENTS:,} |",
                 f"{MAX_OUTPUT:,} characters;", f"{MAX_DOCUMENT_OUTPUT:,} characters, {RENDER_SECONDS:g} seconds of CPU "
                 f"({RENDER_SECONDS * RENDER_WALL_FACTOR:g} of wall time), "
                 f"{MAX_RENDER_MEMORY // 2**20} MiB", f"{MAX_REPEAT:,} items", f"over {MAX_TEMPLATE_BYTES // 2**20} MiB"):
        assert text in section, text
