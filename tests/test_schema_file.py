"""Tests for the JSON Schema file ``schemas/appdef.schema.json``.

The schema validates spec documents *as written* (where a non-string value may
still be a Jinja template such as ``"{{ nnodes }}"``).  By convention every
template alternative is written as the last element of an ``anyOf`` and is
exactly ``{"$ref": "#/$defs/template"}``, so a strict schema for rendered
documents is derived by deleting those alternatives; :func:`strip_templates`
below is a reference implementation of that derivation.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import yaml
from jsonschema.exceptions import ValidationError, best_match

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "appdef.schema.json"
TEMPLATE_REF = {"$ref": "#/$defs/template"}

# Object schemas that have `properties` but are deliberately not closed with
# `additionalProperties: false`, by JSON pointer.  The mount dispatcher only
# declares `type`; the bind/volume/device branch it selects is closed.
OPEN_OBJECTS = {"/$defs/MountObject"}


# --------------------------------------------------------------------------- helpers


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def strip_templates(node: Any) -> Any:
    """Return a copy of ``node`` with every template alternative removed.

    ``{"$ref": "#/$defs/template"}`` is deleted from each ``anyOf``; an ``anyOf``
    left with one element is inlined into its parent (the parent's own keys,
    such as title, description and default, win over the inlined ones).
    """
    if isinstance(node, list):
        return [strip_templates(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strip_templates(value) for key, value in node.items()}
    if isinstance(out.get("anyOf"), list):
        alternatives = [alt for alt in out["anyOf"] if alt != TEMPLATE_REF]
        if len(alternatives) == 1:
            del out["anyOf"]
            for key, value in alternatives[0].items():
                out.setdefault(key, value)
        else:
            out["anyOf"] = alternatives
    return out


def walk(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    """Yield (JSON pointer, value) for every dict and list inside ``node``."""
    yield pointer, node
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for key, value in items:
        if isinstance(value, (dict, list)):
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            yield from walk(value, f"{pointer}/{escaped}")


def subschemas(node: Any, pointer: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield every schema object (not instance data such as examples/defaults/enums)."""
    if not isinstance(node, dict):
        return
    yield pointer, node
    for key, value in node.items():
        if key in ("examples", "default", "enum", "const", "required"):
            continue
        if key in ("properties", "$defs", "patternProperties"):
            for name, sub in value.items():
                yield from subschemas(sub, f"{pointer}/{key}/{name}")
        elif isinstance(value, dict):
            yield from subschemas(value, f"{pointer}/{key}")
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                yield from subschemas(sub, f"{pointer}/{key}/{i}")


def leaf_errors(errors: Iterator[ValidationError]) -> Iterator[ValidationError]:
    for error in errors:
        if error.context:
            yield from leaf_errors(iter(error.context))
        else:
            yield error


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return load_schema()


@pytest.fixture(scope="module")
def validator(schema) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def strict_validator(schema) -> jsonschema.Draft202012Validator:
    strict = strip_templates(schema)
    jsonschema.Draft202012Validator.check_schema(strict)
    return jsonschema.Draft202012Validator(strict)


# --------------------------------------------------------------------------- instances

FORMAT_EXAMPLE = r"""
# yaml-language-server: $schema=../schemas/appdef.schema.json
name: ddp-{{ nnodes }}x{{ nproc }}
params:
  nnodes: {type: integer, default: 2, min: 1, help: number of nodes}
  nproc: {type: integer, default: 1, min: 1}
  script: {type: string, help: training script}
roles:
  - name: trainer
    image: ghcr.io/pytorch/pytorch:2.3
    entrypoint: bash
    num_replicas: "{{ nnodes }}"
    # ${rank0_env} becomes the NAME of an env var holding rank 0's host; $${...} escapes a literal $ for the shell
    args: ["-c", "python -m torch.distributed.run --nnodes={{ nnodes }} --nproc_per_node={{ nproc }} --rdzv_backend=c10d --rdzv_endpoint=$${${rank0_env}}:29500 {{ script }}"]
    env: {LOGLEVEL: INFO, RANK0_HOST_VAR: "${rank0_env}"}
    resource: {cpu: 4, gpu: 1, memMB: 16000}
    port_map: {c10d: 29500}
    max_retries: 3
    retry_policy: APPLICATION
"""


def minimal() -> dict[str, Any]:
    return {"name": "app", "roles": [{"name": "trainer", "image": "img", "entrypoint": "python"}]}


def with_role(**fields: Any) -> dict[str, Any]:
    doc = minimal()
    doc["roles"][0].update(fields)
    return doc


def full_rendered() -> dict[str, Any]:
    return {
        "$schema": "../schemas/appdef.schema.json",
        "name": "ddp-2x8",
        "metadata": {"team": "research"},
        "roles": [
            {
                "name": "trainer",
                "image": "ghcr.io/pytorch/pytorch:2.3",
                "base_image": None,
                "entrypoint": "python",
                "args": ["-m", "torch.distributed.run", "--nnodes=2", "--rdzv_id=${app_id}", "train.py"],
                "env": {"LOGLEVEL": "INFO", "REPLICA": "${replica_id}"},
                "num_replicas": 2,
                "min_replicas": 1,
                "max_retries": 3,
                "retry_policy": "REPLICA",
                "resource": {
                    "cpu": 32,
                    "gpu": 8,
                    "memMB": 256000,
                    "capabilities": {"node.kubernetes.io/instance-type": "p4d.24xlarge", "nested": {"a": [1]}},
                    "devices": {"vpc.amazonaws.com/efa": 4},
                },
                "port_map": {"c10d": 29500, "tensorboard": 6006},
                "metadata": {"kubernetes.pod_patch": {"spec": {"priorityClassName": "high"}}},
                "mounts": [
                    "type=bind,src=/data,dst=/data,readonly",
                    "type=volume,src=ckpt,dst=/ckpt",
                    {"type": "bind", "src_path": "/scratch", "dst_path": "/scratch", "read_only": False},
                    {"type": "volume", "src": "datasets", "dst_path": "/datasets", "read_only": True},
                    {"type": "device", "src_path": "/dev/infiniband/uverbs0", "permissions": "rw"},
                    {"type": "device", "src_path": "/dev/fuse", "dst_path": "/dev/fuse"},
                ],
            },
            {
                "name": "ps.v1-0",
                "image": "img",
                "entrypoint": "ps",
                "resource": "aws_p3.8xlarge",
                "min_replicas": None,
                "retry_policy": "ROLE",
            },
        ],
        "params": {
            "nnodes": {"type": "integer", "default": 2, "min": 1, "max": 64, "help": "nodes"},
            "backend": {"type": "string", "choices": ["nccl", "gloo"], "default": "nccl"},
            "extra": {"type": "map", "default": {}},
            "flags": {"type": "list"},
            "lr": {"type": "number", "default": 0.1},
            "debug": {"type": "boolean", "default": False},
        },
        "imports": {"common": "macros/common.j2"},
    }


def full_templated() -> dict[str, Any]:
    """Every templatable non-string field written as a template."""
    doc = full_rendered()
    role = doc["roles"][0]
    role.update(
        name="{{ role_name }}",
        num_replicas="{{ nnodes }}",
        min_replicas="{{ nnodes // 2 }}",
        max_retries="{{ retries }}",
        retry_policy="{{ policy }}",
        port_map={"c10d": "{{ port }}", "tensorboard": 6006},
    )
    role["resource"].update(cpu="{{ cpus }}", gpu="{{ nproc }}", memMB="{{ mem }}", devices={"efa": "{{ n }}"})
    role["mounts"][2]["read_only"] = "{{ ro }}"
    role["mounts"][4]["permissions"] = "{% if w %}rw{% else %}r{% endif %}"
    role["mounts"].append("{{ extra_mount }}")
    doc["roles"][1].update(
        args="{{ common.torchrun_args(nnodes) }}",
        env="{{ extra_env }}",
        metadata="{{ meta }}",
        mounts="{{ mounts }}",
        resource={"capabilities": "{{ caps }}", "devices": "{{ devs }}"},
        port_map="{{ ports }}",
    )
    doc["metadata"] = "{{ app_meta }}"
    return doc


# --------------------------------------------------------------------------- schema shape


def test_schema_is_valid_draft_2020_12(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://torchspec.dev/schemas/appdef.schema.json"
    assert schema["title"] and schema["description"]
    jsonschema.Draft202012Validator.check_schema(schema)


def test_template_def(schema):
    template = schema["$defs"]["template"]
    assert template["type"] == "string"
    assert template["pattern"] == "\\{\\{|\\{%"
    assert template["title"] and template["description"]
    v = jsonschema.Draft202012Validator(template)
    for ok in ["{{ x }}", "a-{{ x }}", "{% if x %}1{% endif %}"]:
        assert v.is_valid(ok)
    for bad in ["x", "${app_id}", "{ x }", 3, None]:
        assert not v.is_valid(bad)


def test_every_property_has_title_and_description(schema):
    seen = 0
    for pointer, node in walk(schema):
        if not (pointer.endswith("/properties") and isinstance(node, dict)):
            continue
        # skip instance data that happens to contain a "properties" key, and
        # `if` conditions (they test a discriminator, they describe nothing)
        if "/examples" in pointer or "/default" in pointer or "/if/" in pointer:
            continue
        for name, prop in node.items():
            seen += 1
            where = f"{pointer}/{name}"
            assert isinstance(prop.get("title"), str) and prop["title"].strip(), f"{where}: no title"
            assert isinstance(prop.get("description"), str) and prop["description"].strip(), f"{where}: no description"
    assert seen > 40


def test_every_def_has_title_and_description(schema):
    for name, sub in schema["$defs"].items():
        assert sub.get("title") and sub.get("description"), name


def test_closed_objects(schema):
    for pointer, sub in subschemas(schema):
        if "properties" in sub and pointer not in OPEN_OBJECTS and not pointer.endswith("/if"):
            assert sub.get("additionalProperties") is False, f"{pointer} is not closed"
    for name in ("Role", "Resource", "ParamDecl", "BindMount", "VolumeMount", "DeviceMount"):
        assert schema["$defs"][name]["additionalProperties"] is False
    assert schema["additionalProperties"] is False


def test_template_convention(schema):
    anyofs_with_template = 0
    for pointer, node in walk(schema):
        if isinstance(node, dict) and "anyOf" in node:
            alts = node["anyOf"]
            refs = [i for i, alt in enumerate(alts) if isinstance(alt, dict) and alt.get("$ref") == TEMPLATE_REF["$ref"]]
            if not refs:
                continue
            anyofs_with_template += 1
            assert refs == [len(alts) - 1], f"{pointer}: template must be the last alternative"
            assert alts[-1] == TEMPLATE_REF, f"{pointer}: template alternative must be exactly the $ref"
            assert len(alts) >= 2, f"{pointer}: real schema must come first"
    # the template ref appears nowhere else
    total_refs = sum(1 for _, node in walk(schema) if node == TEMPLATE_REF)
    assert total_refs == anyofs_with_template
    # nothing points at the template once stripped
    assert "#/$defs/template" not in json.dumps(strip_templates(schema))


def test_no_templates_in_params_or_imports(schema):
    for key in ("params", "imports"):
        assert "#/$defs/template" not in json.dumps(schema["properties"][key])
    assert "#/$defs/template" not in json.dumps(schema["$defs"]["ParamDecl"])


@pytest.mark.parametrize(
    "pointer",
    [
        "/$defs/Role/properties/num_replicas",
        "/$defs/Role/properties/min_replicas",
        "/$defs/Role/properties/max_retries",
        "/$defs/Role/properties/retry_policy",
        "/$defs/Role/properties/args",
        "/$defs/Role/properties/env",
        "/$defs/Role/properties/port_map",
        "/$defs/Role/properties/port_map/anyOf/0/additionalProperties",
        "/$defs/Role/properties/metadata",
        "/$defs/Role/properties/mounts",
        "/$defs/Resource/properties/cpu",
        "/$defs/Resource/properties/gpu",
        "/$defs/Resource/properties/memMB",
        "/$defs/Resource/properties/capabilities",
        "/$defs/Resource/properties/devices",
        "/$defs/Resource/properties/devices/anyOf/0/additionalProperties",
        "/$defs/BindMount/properties/read_only",
        "/$defs/VolumeMount/properties/read_only",
        "/properties/metadata",
    ],
)
def test_non_string_fields_are_templatable(schema, pointer):
    node = schema
    for part in pointer.strip("/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    assert node["title"] and node["description"]
    assert len(node["anyOf"]) == 2 and node["anyOf"][1] == TEMPLATE_REF
    assert node["anyOf"][0] != TEMPLATE_REF


def test_defaults_match_torchx(schema):
    role = schema["$defs"]["Role"]["properties"]
    assert role["num_replicas"]["default"] == 1
    assert role["max_retries"]["default"] == 0
    assert role["retry_policy"]["default"] == "APPLICATION"
    assert role["min_replicas"]["default"] is None
    assert schema["$defs"]["BindMount"]["properties"]["read_only"]["default"] is False
    assert schema["$defs"]["DeviceMount"]["properties"]["permissions"]["default"] == "rwm"
    assert set(schema["$defs"]["Role"]["required"]) == {"name", "image", "entrypoint"}
    assert set(schema["required"]) == {"name", "roles"}


def test_examples_and_defaults_are_valid(schema, validator):
    """Every `examples` entry and `default` validates against the schema that declares it."""
    checked = 0
    for pointer, sub in subschemas(schema):
        values = list(sub.get("examples", []))
        if "default" in sub:
            values.append(sub["default"])
        if not values:
            continue
        local = validator.evolve(schema=sub)
        for value in values:
            errors = list(local.iter_errors(value))
            assert not errors, f"{pointer}: example/default {value!r} invalid: {errors[0].message}"
            checked += 1
    assert checked > 30


# --------------------------------------------------------------------------- positive instances


def test_format_example_validates(validator, strict_validator):
    doc = yaml.safe_load(FORMAT_EXAMPLE)
    validator.validate(doc)
    # the rendered form passes the strict schema; the as-written form does not
    assert not strict_validator.is_valid(doc)
    rendered = copy.deepcopy(doc)
    rendered["roles"][0]["num_replicas"] = 2
    strict_validator.validate(rendered)
    validator.validate(rendered)


@pytest.mark.parametrize("builder", [full_rendered, minimal], ids=["full", "minimal"])
def test_rendered_documents_validate(builder, validator, strict_validator):
    doc = builder()
    validator.validate(doc)
    strict_validator.validate(doc)


def test_templated_document_validates(validator, strict_validator):
    doc = full_templated()
    validator.validate(doc)
    assert not strict_validator.is_valid(doc)


@pytest.mark.parametrize(
    "resource",
    ["gpu.small", "aws_p3.8xlarge", "{{ res }}", {}, {"cpu": 0, "gpu": 0, "memMB": 0}, {"gpu": 1}],
)
def test_resource_forms(resource, validator):
    validator.validate(with_role(resource=resource))


@pytest.mark.parametrize(
    "mount",
    [
        "type=bind,src=/data,dst=/data,readonly",
        "type=volume,src=vol,dst=/data",
        "type=device,src=/dev/fuse",
        "type=bind,src={{ data }},dst=/data",
        "{{ mount }}",
        {"type": "bind", "src_path": "/a", "dst_path": "/b"},
        {"type": "volume", "src": "v", "dst_path": "/b", "read_only": True},
        {"type": "device", "src_path": "/dev/fuse"},
        {"type": "device", "src_path": "/dev/fuse", "dst_path": "/dev/fuse", "permissions": "rwm"},
    ],
)
def test_mount_forms(mount, validator):
    validator.validate(with_role(mounts=[mount]))


# --------------------------------------------------------------------------- negative instances

NEGATIVE = [
    ("unknown-role-key", with_role(foo=1), "additionalProperties", ["roles", 0]),
    ("unknown-top-key", {**minimal(), "role": []}, "additionalProperties", []),
    ("num_replicas-0", with_role(num_replicas=0), "minimum", ["roles", 0, "num_replicas"]),
    ("max_retries-neg", with_role(max_retries=-1), "minimum", ["roles", 0, "max_retries"]),
    ("retry_policy-ALWAYS", with_role(retry_policy="ALWAYS"), "enum", ["roles", 0, "retry_policy"]),
    ("port-70000", with_role(port_map={"tb": 70000}), "maximum", ["roles", 0, "port_map", "tb"]),
    ("port-0", with_role(port_map={"tb": 0}), "minimum", ["roles", 0, "port_map", "tb"]),
    (
        "missing-entrypoint",
        {"name": "app", "roles": [{"name": "trainer", "image": "img"}]},
        "required",
        ["roles", 0],
    ),
    ("missing-roles", {"name": "app"}, "required", []),
    ("empty-roles", {"name": "app", "roles": []}, "minItems", ["roles"]),
    (
        "bind-missing-dst_path",
        with_role(mounts=[{"type": "bind", "src_path": "/data"}]),
        "required",
        ["roles", 0, "mounts", 0],
    ),
    (
        "bind-with-permissions",
        with_role(mounts=[{"type": "bind", "src_path": "/a", "dst_path": "/b", "permissions": "r"}]),
        "additionalProperties",
        ["roles", 0, "mounts", 0],
    ),
    (
        "mount-bad-type",
        with_role(mounts=[{"type": "tmpfs", "src_path": "/a"}]),
        "enum",
        ["roles", 0, "mounts", 0, "type"],
    ),
    (
        "mount-string-no-type",
        with_role(mounts=["src=/a,dst=/b"]),
        "pattern",
        ["roles", 0, "mounts", 0],
    ),
    (
        "device-permissions-x",
        with_role(mounts=[{"type": "device", "src_path": "/dev/fuse", "permissions": "x"}]),
        "pattern",
        ["roles", 0, "mounts", 0, "permissions"],
    ),
    (
        "bind-read_only-string",
        with_role(mounts=[{"type": "bind", "src_path": "/a", "dst_path": "/b", "read_only": "yes"}]),
        "type",
        ["roles", 0, "mounts", 0, "read_only"],
    ),
    ("cpu-negative", with_role(resource={"cpu": -1}), "minimum", ["roles", 0, "resource", "cpu"]),
    ("resource-unknown-key", with_role(resource={"cpus": 1}), "additionalProperties", ["roles", 0, "resource"]),
    ("device-count-0", with_role(resource={"devices": {"efa": 0}}), "minimum", ["roles", 0, "resource", "devices", "efa"]),
    ("role-name-bad", with_role(name="-trainer"), "pattern", ["roles", 0, "name"]),
    ("env-value-int", with_role(env={"A": 1}), "type", ["roles", 0, "env", "A"]),
    ("args-int", with_role(args=["-x", 3]), "type", ["roles", 0, "args", 1]),
    ("params-type-float", {**minimal(), "params": {"lr": {"type": "float"}}}, "enum", ["params", "lr", "type"]),
    ("param-name-1bad", {**minimal(), "params": {"1bad": {"type": "string"}}}, "pattern", ["params"]),
    ("param-missing-type", {**minimal(), "params": {"x": {"default": 1}}}, "required", ["params", "x"]),
    ("param-unknown-key", {**minimal(), "params": {"x": {"type": "string", "desc": "d"}}}, "additionalProperties", ["params", "x"]),
    ("param-empty-choices", {**minimal(), "params": {"x": {"type": "string", "choices": []}}}, "minItems", ["params", "x", "choices"]),
    ("param-template-not-allowed", {**minimal(), "params": {"x": {"type": "integer", "min": "{{ y }}"}}}, "type", ["params", "x", "min"]),
    ("import-alias-bad", {**minimal(), "imports": {"my-macros": "m.j2"}}, "pattern", ["imports"]),
    ("empty-name", {**minimal(), "name": ""}, "minLength", ["name"]),
]


@pytest.mark.parametrize(
    "doc,keyword,path", [case[1:] for case in NEGATIVE], ids=[case[0] for case in NEGATIVE]
)
def test_negative_instances(doc, keyword, path, validator, strict_validator):
    # Strict (rendered) schema: the best match is exactly the expected error.
    best = best_match(strict_validator.iter_errors(doc))
    assert best is not None, "strict schema accepted an invalid document"
    assert (best.validator, list(best.absolute_path)) == (keyword, path), best.message

    # As-written schema: invalid too, and the expected error is among the
    # leaf errors.  Where the value is a string the template alternative fails
    # too, so jsonschema's best_match may pick the enclosing anyOf or the
    # template's own pattern error; only the location is checked for it.
    assert not validator.is_valid(doc)
    leaves = [(e.validator, list(e.absolute_path)) for e in leaf_errors(validator.iter_errors(doc))]
    assert (keyword, path) in leaves, leaves
    best = best_match(validator.iter_errors(doc))
    assert list(best.absolute_path) == path


def test_param_name_error_names_the_key(validator):
    doc = {**minimal(), "params": {"1bad": {"type": "string"}}}
    best = best_match(validator.iter_errors(doc))
    assert best.instance == "1bad"
    assert "propertyNames" in best.schema_path


# --------------------------------------------------------------------------- stripped (strict) schema


def test_strip_templates_helper():
    node = {
        "title": "t",
        "description": "d",
        "default": 1,
        "anyOf": [{"type": "integer", "minimum": 1}, {"$ref": "#/$defs/template"}],
    }
    assert strip_templates(node) == {"title": "t", "description": "d", "default": 1, "type": "integer", "minimum": 1}
    three = {"anyOf": [{"type": "string"}, {"type": "object"}, {"$ref": "#/$defs/template"}]}
    assert strip_templates(three) == {"anyOf": [{"type": "string"}, {"type": "object"}]}
    untouched = {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/Resource"}]}
    assert strip_templates(untouched) == untouched


def test_strict_schema_rejects_templates_for_non_strings(validator, strict_validator):
    templated = with_role(num_replicas="{{ n }}")
    validator.validate(templated)
    assert not strict_validator.is_valid(templated)
    best = best_match(strict_validator.iter_errors(templated))
    assert (best.validator, list(best.absolute_path)) == ("type", ["roles", 0, "num_replicas"])

    strict_validator.validate(with_role(num_replicas=2))
    validator.validate(with_role(num_replicas=2))


def test_strict_schema_keeps_titles(schema):
    strict = strip_templates(schema)
    num_replicas = strict["$defs"]["Role"]["properties"]["num_replicas"]
    assert "anyOf" not in num_replicas
    assert num_replicas["type"] == "integer" and num_replicas["minimum"] == 1
    assert num_replicas["title"] and num_replicas["description"] and num_replicas["default"] == 1
    mount = strict["$defs"]["Mount"]
    assert mount["anyOf"] == [{"$ref": "#/$defs/MountString"}, {"$ref": "#/$defs/MountObject"}]


@pytest.mark.parametrize(
    "fields",
    [
        {"num_replicas": "{{ n }}"},
        {"max_retries": "{{ n }}"},
        {"min_replicas": "{{ n }}"},
        {"args": "{{ a }}"},
        {"env": "{{ e }}"},
        {"port_map": {"p": "{{ p }}"}},
        {"resource": {"gpu": "{{ g }}"}},
        {"mounts": ["{{ m }}"]},
        {"mounts": [{"type": "bind", "src_path": "/a", "dst_path": "/b", "read_only": "{{ ro }}"}]},
        {"retry_policy": "{{ p }}"},
    ],
)
def test_templates_valid_as_written_only(fields, validator, strict_validator):
    doc = with_role(**fields)
    validator.validate(doc)
    assert not strict_validator.is_valid(doc)
