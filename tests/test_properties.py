"""Property-based tests: no input, however broken, gives a traceback.

Generated documents (random trees made of the schema's own keys), mutated
copies of the examples and raw junk are fed through the whole loader in
every format.  Every problem must come back as a coded diagnostic, and
YAML/JSON problems must carry a position.  The schema validator is also
checked against jsonschema, the reference implementation, on the same trees.
"""

from __future__ import annotations

import json
import pathlib
import re

import jsonschema
import yaml
from example_files import example_specs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchspec.loader import LoadOptions, load_text
from torchspec.loader.schema import load_schema, strict_schema, validator

EXAMPLES = example_specs()
CODE = re.compile(r"^TS\d{3}$")
KEYS = ["name", "roles", "image", "entrypoint", "args", "env", "num_replicas", "min_replicas", "max_retries",
        "retry_policy", "resource", "cpu", "gpu", "memMB", "port_map", "metadata", "mounts", "type", "src_path",
        "dst_path", "read_only", "params", "default", "choices", "imports", "capabilities", "devices", "x"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 70000), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "x", "APPLICATION", "REPLICA", "bind", "{{ n }}", "${app_id}", "${app_idd}",
                     "aws_p3.8xlarge", "type=bind,src=/a,dst=/b", "{% if %}", "{{ env('HOME') }}", "a b"]),
    st.text(max_size=8),
)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=25,
)
roles = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "trainer", "a"]), "image": st.just("img"), "entrypoint": st.just("python")},
    optional={k: trees for k in ["args", "env", "num_replicas", "resource", "port_map", "mounts", "retry_policy",
                                 "min_replicas", "max_retries", "metadata"]},
)
apps = st.fixed_dictionaries({"name": st.just("app"), "roles": st.lists(roles, max_size=3)},
                             optional={"params": trees, "metadata": trees, "extra": trees})


def check_result(text: str, fmt: str, positioned: bool) -> None:
    loaded = load_text(text, f"gen.{fmt}", fmt, LoadOptions(lint=True))
    for d in loaded.all_diagnostics():
        assert CODE.match(d.code), d
        assert d.message
        if positioned and d.code.startswith(("TS1", "TS2")) and d.code != "TS104":
            assert d.line is not None, d


@SETTINGS
@given(apps)
def test_generated_yaml_documents(app: dict) -> None:
    check_result(yaml.safe_dump(app, sort_keys=False), "yaml", positioned=True)


@SETTINGS
@given(apps)
def test_generated_json_documents(app: dict) -> None:
    check_result(json.dumps(app, indent=1), "json", positioned=True)


@SETTINGS
@given(st.sampled_from(EXAMPLES), st.data())
def test_mutated_examples(path: pathlib.Path, data: st.DataObject) -> None:
    text = path.read_text()
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 12)))
        junk = data.draw(st.text(alphabet=":-[]{}'\"#&*!|>%@`\t\n =,.$0a", max_size=6))
        text = text[:i] + junk + text[j:]
    fmt = {".yml": "yaml", ".yaml": "yaml", ".json": "json", ".toml": "toml"}[path.suffix]
    check_result(text, fmt, positioned=fmt != "toml")


@SETTINGS
@given(st.text(max_size=200), st.sampled_from(["yaml", "json", "toml"]))
def test_raw_junk(text: str, fmt: str) -> None:
    check_result(text, fmt, positioned=False)


REFERENCE = {
    True: jsonschema.Draft202012Validator(strict_schema(load_schema())),
    False: jsonschema.Draft202012Validator(load_schema()),
}


@SETTINGS
@given(apps, st.booleans())
def test_validator_agrees_with_jsonschema(app: dict, strict: bool) -> None:
    ours = validator(strict).is_valid(app)
    theirs = REFERENCE[strict].is_valid(app)
    assert ours == theirs, (app, validator(strict).issues(app), list(REFERENCE[strict].iter_errors(app))[:3])
