"""Deep nesting in every syntax: refused at the value that crosses the limit, never a crash.

A value's depth is the length of its path (``roles[0].env.X`` is 4 deep);
anything deeper than ``MAX_DEPTH`` is TS104, positioned where the first such
value starts.  Each case builds a document ``levels`` deep and says where
that first value sits, so the same builder checks both sides of the limit:
exactly ``MAX_DEPTH`` loads, one more is refused at the right place.  The
huge cases (hundreds of thousands of levels, which crashed the interpreter
in libyaml's composer or hit ``RecursionError``/quadratic time in tomllib)
run through the CLI in a subprocess, with a time limit.
"""

from __future__ import annotations

import resource
from typing import Callable

import pytest

from input_support import assert_clean, cli
from torchspec.exit_codes import ExitCode
from torchspec.loader.parsers import MAX_DEPTH, parse

Build = Callable[[int], str]

#: name -> (format, a document with values ``levels`` deep, (line, column) of the first value deeper than MAX_DEPTH)
CASES: dict[str, tuple[str, Build, tuple[int, int]]] = {
    # ``a: [[[x]]]``: the k-th bracket is k deep; the 65th starts at column 3 + 65
    "yaml flow": ("yaml", lambda n: "a: " + "[" * (n - 1) + "x" + "]" * (n - 1) + "\n", (1, MAX_DEPTH + 4)),
    # ``- - - x``: compact block sequences, two columns a level
    "yaml compact sequences": ("yaml", lambda n: "- " * n + "x\n", (1, 2 * MAX_DEPTH + 3)),
    # block sequences, each indented under the last
    "yaml block sequences": ("yaml", lambda n: "a:\n" + "".join(" " * (2 * i) + "-\n" for i in range(n - 1))
                             + " " * (2 * n - 2) + "x\n", (MAX_DEPTH + 2, 2 * MAX_DEPTH + 1)),
    # nested block mappings, one column a level
    "yaml block mappings": ("yaml", lambda n: "".join(" " * i + "k:\n" for i in range(n)) + " " * n + "x\n",
                            (MAX_DEPTH + 2, MAX_DEPTH + 2)),
    "toml arrays": ("toml", lambda n: "a = " + "[" * (n - 1) + "1" + "]" * (n - 1) + "\n", (1, MAX_DEPTH + 5)),
    # ``a = {b = {b = 1}}``: the key whose value crosses the limit
    "toml inline tables": ("toml", lambda n: "a = " + "{b = " * (n - 1) + "1" + "}" * (n - 1) + "\n",
                           (1, 5 * MAX_DEPTH + 1)),
    "toml dotted keys": ("toml", lambda n: ".".join(["a"] * n) + " = 1\n", (1, 2 * MAX_DEPTH + 1)),
    # ``[a.a.a]``: an empty table as deep as its name is long
    "toml table headers": ("toml", lambda n: "[" + ".".join(["a"] * n) + "]\n", (1, 2 * MAX_DEPTH + 2)),
    "json arrays": ("json", lambda n: "[" * n + "1" + "]" * n, (1, MAX_DEPTH + 2)),
    "json objects": ("json", lambda n: '{"a":' * n + "1" + "}" * n, (1, 5 * MAX_DEPTH + 6)),
}


def deepest_error(text: str, fmt: str) -> tuple[str, int | None, int | None] | None:
    _, diagnostics = parse(text, f"deep.{fmt}", fmt)
    return next(((d.code, d.line, d.column) for d in diagnostics), None)


@pytest.mark.parametrize("name", CASES)
def test_exactly_the_limit_loads(name: str) -> None:
    fmt, build, _ = CASES[name]
    assert deepest_error(build(MAX_DEPTH), fmt) is None


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, MAX_DEPTH + 40])
def test_one_level_more_is_refused_where_it_crosses(name: str, levels: int) -> None:
    fmt, build, where = CASES[name]
    assert deepest_error(build(levels), fmt) == ("TS104", *where)


def test_toml_arrays_of_tables_count_their_elements() -> None:
    """``[[t]]`` adds two levels (the list and its element): header 33 is 66 deep, refused at its last part."""
    text = "".join("[[" + ".".join(["t"] * j) + "]]\n" for j in range(1, 41)) + "b = 1\n"
    assert deepest_error(text, "toml") == ("TS104", 33, 67)
    fine = "".join("[[" + ".".join(["t"] * j) + "]]\n" for j in range(1, 32)) + "b = 1\n"
    assert deepest_error(fine, "toml") is None


HUGE = {
    "yaml flow": ("yaml", "a: " + "[" * 1_000_000),
    "yaml compact sequences": ("yaml", "- " * 500_000 + "x\n"),
    "yaml complex keys": ("yaml", "? " * 500_000 + "x\n"),  # TS106 when shallow: keys must be strings
    "yaml mixed": ("yaml", "- " * 200_000 + "{a: " * 100_000),
    "toml arrays": ("toml", "a = " + "[" * 1_000_000),
    "toml inline tables": ("toml", "a = " + "{b = " * 200_000),
    "toml dotted keys": ("toml", ".".join(["a"] * 500_000) + " = 1\n"),
    "toml table headers": ("toml", "[" + ".".join(["a"] * 500_000) + "]\n"),
    "json": ("json", "[" * 1_000_000),
}


@pytest.mark.parametrize("name", HUGE)
def test_huge_nesting_is_a_diagnostic_not_a_crash(name: str, tmp_path) -> None:
    """Hundreds of thousands of levels (under the 2 MiB file limit): exit 1 with TS104, in a few CPU seconds.

    The bound is on the CPU time the lint process used, not the wall clock: a parser that went quadratic
    would use minutes of CPU, while a loaded machine (CI runs the suite on 8 workers over 2 cores) only makes
    the wall clock longer.
    """
    fmt, text = HUGE[name]
    path = tmp_path / f"deep.{fmt}"
    path.write_text(text)
    before = children_cpu()
    result = cli("lint", str(path), timeout=300)
    assert_clean(result, ExitCode.SPEC_ERROR, "TS104", f"more than {MAX_DEPTH} levels deep")
    assert children_cpu() - before < 20


def children_cpu() -> float:
    """CPU seconds (user and system) of the child processes this one has waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime
