"""Fuzzing the loader: whatever goes in, a torchspec error or a valid AppDef comes out, quickly and in bounded memory.

Three generators: any bytes (as a file in each format); spec-shaped
documents from a small grammar, written as YAML (block or flow), JSON or
TOML, then mutated (tokens that hit the parsers' edges, slices repeated
until they reach the limits); and templates built from a grammar of Jinja
expressions, filters and statements.  Each input goes through
``load_app`` (an ``AppDef``, which must dump back to a schema-valid
document, or a ``TorchSpecError``) and through lint's loading (coded
diagnostics only).  Anything else, an example slower than the deadline, or
one that needs more than the memory cap, is a finding.

CI runs a short budget.  A long run on request::

    TORCHSPEC_FUZZ_EXAMPLES=20000 nice -n 10 python -m pytest -q tests/adversarial/test_fuzz.py
"""

from __future__ import annotations

import json
import os
import re
import resource
import tempfile
from datetime import timedelta
from typing import Any, Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchspec.errors import TorchSpecError
from torchspec.loader import LoadOptions, load_app, load_file, template
from torchspec.loader.schema import validator
from torchspec.specs.convert import dump_app

#: Examples per test: a short budget for CI unless TORCHSPEC_FUZZ_EXAMPLES asks for more.
EXAMPLES = int(os.environ.get("TORCHSPEC_FUZZ_EXAMPLES") or 0) or 100
#: Two loads an example, each with at most the 1 s render clock (quick_clock) and parsing: a slower one is a finding.
FUZZ = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=6), print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much, HealthCheck.large_base_example])
#: Address space an example may add to the process (on top of what the test run holds already).
MEMORY_CAP = 1536 * 1024 * 1024
CODE = re.compile(r"^TS\d{3}$")
FORMATS = ("yaml", "json", "toml")


@pytest.fixture(scope="module", autouse=True)
def memory_cap() -> Iterator[None]:
    """Cap the address space while fuzzing: a runaway example fails with MemoryError instead of taking the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = current + MEMORY_CAP
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="module", autouse=True)
def quick_clock() -> Iterator[None]:
    """A 1 s render clock instead of 5: runaway templates are many here, and each is loaded twice."""
    saved = template.RENDER_SECONDS
    template.RENDER_SECONDS = 1.0
    try:
        yield
    finally:
        template.RENDER_SECONDS = saved


FOLDER = tempfile.mkdtemp(prefix="torchspec-fuzz-")


def check(data: bytes, fmt: str) -> None:
    """``data`` as a spec file: load_app gives a valid AppDef or a TorchSpecError; lint gives coded diagnostics."""
    path = os.path.join(FOLDER, f"spec.{fmt}")
    with open(path, "wb") as f:
        f.write(data)
    try:
        app = load_app(path)
    except TorchSpecError as e:
        assert "MemoryError" not in str(e) and "RecursionError" not in str(e), e
    else:
        assert not list(validator(strict=True).issues(dump_app(app))), app
    for d in load_file(path, LoadOptions(lint=True)).all_diagnostics():
        assert CODE.match(d.code) and d.message, d
        assert "MemoryError" not in d.message and "RecursionError" not in d.message, d


# ---------------------------------------------------------------- any bytes


@FUZZ
@given(data=st.binary(max_size=3000), fmt=st.sampled_from(FORMATS))
def test_any_bytes(data: bytes, fmt: str) -> None:
    check(data, fmt)


@FUZZ
@given(text=st.text(max_size=600), fmt=st.sampled_from(FORMATS), bom=st.booleans())
def test_any_text(text: str, fmt: str, bom: bool) -> None:
    check(("\ufeff" if bom else "").encode() + text.encode("utf-8", "surrogatepass"), fmt)


# ---------------------------------------------------------------- spec-shaped documents, mutated

WORDS = ["a", "trainer", "x y", "{{ n }}", "{{ n * 2 }}", "${app_id}", "${img_root}", "--lr=0.1", "", "é", "$HOME",
         "type=bind,src=/a,dst=/b", "1e400", "0x10", "yes", "null", "~", "2024-01-01", "{% if n %}a{% endif %}"]
scalars = st.one_of(st.sampled_from(WORDS), st.integers(-3, 70000), st.booleans(), st.none(),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
resources = st.fixed_dictionaries({}, optional={"cpu": st.integers(-1, 64), "gpu": st.integers(0, 8),
                                                "memMB": st.integers(0, 10**6), "capabilities": st.dictionaries(
                                                    st.sampled_from(["a", "slurm.gres"]), scalars, max_size=2)})
roles = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "a-b", "{{ n }}"]), "image": st.sampled_from([".", "img", "{{ img }}"]),
     "entrypoint": st.sampled_from(["python", "echo", "{{ e }}", ""])},
    optional={"args": st.lists(scalars, max_size=4), "env": st.dictionaries(st.sampled_from(["A", "B-1", "C\nD"]),
                                                                              scalars, max_size=3),
              "num_replicas": scalars, "min_replicas": scalars, "max_retries": scalars, "resource": resources,
              "retry_policy": st.sampled_from(["APPLICATION", "REPLICA", "bad"]),
              "mounts": st.lists(st.one_of(st.sampled_from(WORDS), st.fixed_dictionaries(
                  {"type": st.sampled_from(["bind", "volume"]), "src_path": st.sampled_from(["/a", "../b"]),
                   "dst_path": st.just("/c")})), max_size=2),
              "port_map": st.dictionaries(st.sampled_from(["http", "x"]), st.integers(0, 70000), max_size=2),
              "metadata": st.dictionaries(st.sampled_from(["k", "kubernetes.pod_patch"]), scalars, max_size=2)})
params = st.dictionaries(st.sampled_from(["n", "img", "e"]), st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "list", "map", "boolean"])},
    optional={"default": scalars, "choices": st.lists(scalars, max_size=3)}), max_size=3)
apps = st.fixed_dictionaries({"name": st.sampled_from(["app", "{{ n }}", "x y"]), "roles": st.lists(roles, max_size=3)},
                             optional={"params": params, "metadata": st.dictionaries(st.just("k"), scalars)})


def to_toml(app: dict) -> str:
    """A TOML spelling of a spec-shaped document: scalars first, then everything inline (TOML has no null)."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return json.dumps(v).replace("Infinity", "inf").replace("NaN", "nan")
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v if x is not None) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items() if x is not None) + "}"
        return json.dumps(str(v))

    def key(k: str) -> str:
        return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)

    return "".join(f"{key(k)} = {value(v)}\n" for k, v in app.items() if v is not None)


def serialize(app: dict, fmt: str, flow: bool) -> str:
    if fmt == "json":
        return json.dumps(app, allow_nan=True)
    if fmt == "toml":
        return to_toml(app)
    return yaml.safe_dump(app, default_flow_style=flow, allow_unicode=True, sort_keys=False)


#: What mutations insert: the characters and tokens where parsers have limits, special cases or bugs.
TOKENS = ["[", "]", "{", "}", "- ", "? ", ": ", ",", "&a ", "*a", "<<: *a", "!!python/object/apply:os.system [x]",
          "!!binary", "!x ", "{{", "}}", "{%", "%}", "{#", "\\0", "\\u0000", "\\ud800", "\\U0010ffff", "\x00",
          "\x07", "\ufeff", "\u2028", "\r\n", "\n", "\t", "---\n", "...\n", '"', "'", '"""', "'''", "#", "=",
          ".", "[[", "]]", "9" * 5000, "1e999", "-0", "0o777", "2024-13-45", "07:61:00", "é", "\U0001F600",
          "{{ range(10**6) | list }}", "{{ 'x' * 99999 }}", "{% include '../x' %}", "{{ env('HOME') }}"]


@st.composite
def mutated(draw: Any) -> tuple[bytes, str]:
    """A spec-shaped document, serialized, then changed a few times."""
    fmt = draw(st.sampled_from(FORMATS))
    text = serialize(draw(apps), fmt, draw(st.booleans()))
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "repeat", "nest"]))
        if op == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 20)):]
        elif op == "replace":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at + draw(st.integers(1, 10)):]
        elif op == "repeat":
            end = min(len(text), at + draw(st.integers(1, 40)))
            text = text[:at] + text[at:end] * draw(st.integers(2, 3000)) + text[end:]
        else:
            opener = draw(st.sampled_from(["[", "{a: ", "- ", "? ", "a = [", '{"a":', "  k:\n"]))
            text = text[:at] + opener * draw(st.integers(50, 20000)) + text[at:]
    return text.encode("utf-8", "surrogatepass"), fmt


@FUZZ
@given(case=mutated())
def test_mutated_spec_shaped_documents(case: tuple[bytes, str]) -> None:
    check(*case)


# ---------------------------------------------------------------- templates

ATOMS = ["n", "s", "l", "d", "'x'", "'ab' * 50000", "99999", "10", "2 ** 4000", "range(99999)", "[1, 2]",
         "{'a': 1}", "lipsum", "cycler", "joiner", "namespace(a=1)", "env", "env('HOME')", "loop", "self", "none",
         "'%0500d'", "'{:>9}'", "'\\x00'", "'\\t' * 99"]
FILTERS = ["list", "string", "join", "join('x' * 9999)", "sum", "sum(start=[])", "length", "tojson", "pprint",
           "replace('a', 'b' * 9999)", "center(99999)", "indent(9999)", "format(1, 2)", "batch(999, 'x' * 999)",
           "map('string')", "map('center', 999)", "unique", "sort", "first", "reverse", "wordwrap(5)", "upper",
           "attr('__class__')", "int", "float", "trim", "urlize", "slice(3)", "select", "default('d')"]
METHODS = [".format(x=1)", ".join(l)", ".replace('a', 'b' * 999)", ".center(99999)", ".expandtabs(9999)",
           ".__class__", ".__mro__", ".mro", ".__globals__", ".items()", ".format_map(d)", ".split()", ".upper()",
           "[0]", "['a']", ".a", ".__init__"]
OPS = [" * ", " + ", " ~ ", " % ", " ** ", " // ", " and ", " if n else ", " in "]

expressions = st.recursive(
    st.sampled_from(ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(OPS), inner).map("".join),
        st.tuples(inner, st.sampled_from(FILTERS)).map(lambda t: f"({t[0]}) | {t[1]}"),
        st.tuples(inner, st.sampled_from(METHODS)).map(lambda t: f"({t[0]}){t[1]}"),
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
    ),
    max_leaves=8,
)


@st.composite
def templates(draw: Any) -> str:
    """A template value: expressions, loops, sets, macros (recursive ones too), nested a little."""
    e = draw(expressions)
    body = draw(st.sampled_from([
        "{{ E }}", "x{{ E }}y", "{% for i in E %}{{ i }}{% endfor %}", "{% set v = E %}{{ v }}{{ v }}",
        "{% set v %}{{ E }}{{ E }}{% endset %}{{ v }}", "{% macro m(k) %}{{ E }}{{ m(k) }}{% endmacro %}{{ m(1) }}",
        "{% for i in range(40) %}{% for j in range(40) %}{{ E }}{% endfor %}{% endfor %}",
        "{% if E %}a{% else %}b{% endif %}", "{{ E", "{% for %}", "{% include E %}", "{% import E as z %}",
    ]))
    return body.replace("E", e)


@FUZZ
@given(value=templates(), fmt=st.sampled_from(FORMATS))
def test_generated_templates(value: str, fmt: str) -> None:
    app = {"name": "t", "params": {"n": {"type": "integer", "default": 3}, "s": {"type": "string", "default": "ab"},
                                   "l": {"type": "list", "default": ["a", "b"]},
                                   "d": {"type": "map", "default": {"a": "1"}}},
           "roles": [{"name": "a", "image": ".", "entrypoint": "echo", "args": [value, "{{ n }}{{ s }}{{ l }}{{ d }}"]}]}
    check(serialize(app, fmt, False).encode("utf-8", "surrogatepass"), fmt)
