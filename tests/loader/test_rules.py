"""The semantic rules (TS5xx) on hand-built documents: each rule fires where it should, points at the
exact value (path, line and column), suggests the fix, and stays quiet on good specs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from torchspec.errors import Diagnostic, format_path
from torchspec.loader import rules
from torchspec.loader.rules import check, find_macros, fix_env_name, parse_mount_string
from torchspec.loader.document import Document, Path, Position

CLEAN_TEXT = """\
name: ddp
roles:
  - name: trainer
    image: ghcr.io/pytorch/pytorch:2.3
    entrypoint: bash
    args: ["-c", "torchrun --rdzv_endpoint=$${${rank0_env}}:29500 --id ${app_id} $HOME"]
    env: {LOGLEVEL: INFO, RANK0_HOST_VAR: "${rank0_env}", _OUT: "${img_root}/out/${replica_id}"}
    num_replicas: 2
    min_replicas: 1
    resource: {cpu: 4, gpu: 1, memMB: 16000}
    port_map: {c10d: 29500, tensorboard: 6006}
    mounts: ["type=bind,src=/data,dst=/data,readonly", {type: device, src_path: /dev/fuse}]
  - name: ps
    image: ghcr.io/pytorch/pytorch:2.3
    entrypoint: python
    args: ["$${app_id} is shell text", "$$HOME"]
"""

CLEAN_DATA: dict[str, Any] = {
    "name": "ddp",
    "roles": [
        {
            "name": "trainer",
            "image": "ghcr.io/pytorch/pytorch:2.3",
            "entrypoint": "bash",
            "args": ["-c", "torchrun --rdzv_endpoint=$${${rank0_env}}:29500 --id ${app_id} $HOME"],
            "env": {"LOGLEVEL": "INFO", "RANK0_HOST_VAR": "${rank0_env}", "_OUT": "${img_root}/out/${replica_id}"},
            "num_replicas": 2,
            "min_replicas": 1,
            "resource": {"cpu": 4, "gpu": 1, "memMB": 16000},
            "port_map": {"c10d": 29500, "tensorboard": 6006},
            "mounts": ["type=bind,src=/data,dst=/data,readonly", {"type": "device", "src_path": "/dev/fuse"}],
        },
        {
            "name": "ps",
            "image": "ghcr.io/pytorch/pytorch:2.3",
            "entrypoint": "python",
            "args": ["$${app_id} is shell text", "$$HOME"],
        },
    ],
}


def make(data: Any, positions: dict[Path, Position] | None = None,
         key_positions: dict[Path, Position] | None = None, text: str = "") -> Document:
    """A document as the loader would hand it to the rules: rendered data plus positions."""
    return Document("spec.yaml", text, data, positions=positions or {}, key_positions=key_positions or {})


def one_role(**fields: Any) -> dict[str, Any]:
    """A minimal valid app with one role, ``fields`` overriding or adding role keys."""
    role = {"name": "trainer", "image": "img", "entrypoint": "python"}
    role.update(fields)
    return {"name": "app", "roles": [role]}


def only(diags: list[Diagnostic], code: str) -> Diagnostic:
    found = [d for d in diags if d.code == code]
    assert len(found) == 1, diags
    return found[0]


def codes_of(diags: list[Diagnostic]) -> list[str]:
    return [d.code for d in diags]


# ---------------------------------------------------------------- a clean spec


def test_clean_document_yields_nothing() -> None:
    assert check(make(copy.deepcopy(CLEAN_DATA), text=CLEAN_TEXT)) == []


def test_every_rule_is_registered_once() -> None:
    assert len(rules.RULES) == len(set(rules.RULES)) == 10
    assert all(r.__doc__ and r.__doc__.startswith("TS5") for r in rules.RULES)


# ---------------------------------------------------------------- scanning macros like string.Template


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("${app_id}", ["app_id"]),
        ("$${app_id}", []),  # an escaped dollar, then literal text
        ("$${${rank0_env}}", ["rank0_env"]),  # the shell expands the variable the macro names
        ("$$$${app_id}", []),
        ("$$$${app_id}${replica_id}", ["replica_id"]),
        ("$app_id and $HOME", []),  # bare names are shell syntax
        ("${a-b} ${1}", []),  # not identifiers: Template leaves them, the shell owns them
        ("${ app_id }", [" app_id "]),  # spaced braces around a macro name are reported
        ("${APP_ID}", ["APP_ID"]),
        ("no dollars", []),
        ("trailing $", []),
    ],
)
def test_find_macros_follows_template_semantics(text: str, names: list[str]) -> None:
    assert [name for _, name in find_macros(text)] == names


# ---------------------------------------------------------------- TS501 unknown-macro


def test_ts501_unknown_macro_in_args_with_did_you_mean() -> None:
    data = one_role(args=["--id", "run-${app_idd}"])
    doc = make(data, {("roles", 0, "args", 1): (6, 19)}, text="\n" * 5 + '    args: ["--id", "run-${app_idd}"]\n')
    d = only(check(doc), "TS501")
    assert d.path == "roles[0].args[1]"
    assert (d.line, d.column) == (6, 19)
    assert d.severity == "error"
    assert "'${app_idd}'" in d.message and "'run-${app_idd}'" in d.message
    assert "${app_id}" in (d.hint or "")
    assert d.source_line == '    args: ["--id", "run-${app_idd}"]'


def test_ts501_in_env_value_and_image() -> None:
    data = one_role(image="${img_rot}/x", env={"A": "${replica}"})
    doc = make(data, {("roles", 0, "image"): (4, 12), ("roles", 0, "env", "A"): (7, 14)})
    found = [d for d in check(doc) if d.code == "TS501"]
    by_path = {d.path: d for d in found}
    assert set(by_path) == {"roles[0].image", "roles[0].env.A"}
    assert (by_path["roles[0].image"].line, by_path["roles[0].image"].column) == (4, 12)
    assert "${img_root}" in (by_path["roles[0].image"].hint or "")
    assert "${replica_id}" in (by_path["roles[0].env.A"].hint or "")
    assert "TS502" not in codes_of(check(doc))  # unknown macros are TS501 only, wherever they are


def test_ts501_shell_variables_are_left_alone() -> None:
    assert check(make(one_role(args=["cd ${HOME}", "for i in 1 2; do echo ${i}; done"]))) == []


def test_ts501_case_and_spaces_are_not_substituted() -> None:
    found = [d for d in check(make(one_role(args=["${APP_ID}", "${ replica_id }"]))) if d.code == "TS501"]
    assert [d.path for d in found] == ["roles[0].args[0]", "roles[0].args[1]"]
    assert "${app_id}" in (found[0].hint or "")
    assert "${replica_id}" in (found[1].hint or "")


def test_ts501_escaped_dollars_are_not_macros() -> None:
    assert check(make(one_role(args=["$${app_idd}", "$${HOME}", "$$$${x}"]))) == []
    d = only(check(make(one_role(args=["$$${app_idd}"]))), "TS501")  # '$$' then a real '${app_idd}'
    assert "'${app_idd}'" in d.message


def test_ts501_macro_inside_escaped_braces_is_checked() -> None:
    d = only(check(make(one_role(args=["$${${rank0_evn}}"]))), "TS501")
    assert "${rank0_env}" in (d.hint or "")


def test_ts501_on_an_env_key_points_at_the_key() -> None:
    data = one_role(env={"X_${app_idd}": "1"})
    doc = make(data, {("roles", 0, "env", "X_${app_idd}"): (5, 20)}, {("roles", 0, "env", "X_${app_idd}"): (5, 10)})
    diags = check(doc)
    d = only(diags, "TS501")
    assert (d.line, d.column) == (5, 10)
    assert "TS505" not in codes_of(diags)  # the macro is the problem to report, not the name's characters


# ---------------------------------------------------------------- TS502 macro-not-substituted


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"name": "trainer-${replica_id}"}, ("roles", 0, "name")),
        ({"image": "${img_root}/image"}, ("roles", 0, "image")),
        ({"entrypoint": "${img_root}/train.sh"}, ("roles", 0, "entrypoint")),
        ({"base_image": "${base_img_root}"}, ("roles", 0, "base_image")),
        ({"metadata": {"k8s.labels": {"run": "${app_id}"}}}, ("roles", 0, "metadata", "k8s.labels", "run")),
        ({"mounts": ["type=bind,src=${img_root}/data,dst=/data"]}, ("roles", 0, "mounts", 0)),
        ({"mounts": [{"type": "volume", "src": "vol-${app_id}", "dst_path": "/d"}]}, ("roles", 0, "mounts", 0, "src")),
        ({"resource": {"capabilities": {"node": "${replica_id}"}}}, ("roles", 0, "resource", "capabilities", "node")),
    ],
)
def test_ts502_macro_outside_args_and_env_values(fields: dict[str, Any], path: Path) -> None:
    doc = make(one_role(**fields), {path: (9, 7)})
    d = only(check(doc), "TS502")
    assert d.path == format_path(path)
    assert (d.line, d.column) == (9, 7)
    assert "is never substituted" in d.message
    assert "args" in (d.hint or "") and "env" in (d.hint or "")


def test_ts502_env_key_points_at_key_and_suggests_the_value() -> None:
    path = ("roles", 0, "env", "HOST_${replica_id}")
    doc = make(one_role(env={"HOST_${replica_id}": "x"}), {path: (7, 30)}, {path: (7, 10)})
    diags = check(doc)
    d = only(diags, "TS502")
    assert (d.line, d.column) == (7, 10)
    assert d.path == "roles[0].env.HOST_${replica_id}"
    assert "env values, not names" in (d.hint or "")
    assert "TS505" not in codes_of(diags)


def test_ts502_port_map_and_metadata_keys() -> None:
    data = one_role(port_map={"p${replica_id}": 80}, metadata={"${app_id}": "x"})
    found = [d for d in check(make(data)) if d.code == "TS502"]
    assert sorted(d.path for d in found) == ["roles[0].metadata.${app_id}", "roles[0].port_map.p${replica_id}"]


def test_ts502_top_level_name_and_metadata() -> None:
    data = one_role()
    data["name"] = "app-${app_id}"
    data["metadata"] = {"owner": "${app_id}"}
    doc = make(data, {("name",): (1, 7), ("metadata", "owner"): (3, 12)})
    found = {d.path: d for d in check(doc) if d.code == "TS502"}
    assert set(found) == {"name", "metadata.owner"}
    assert (found["name"].line, found["name"].column) == (1, 7)


def test_ts502_params_and_imports_are_not_scanned() -> None:
    data = one_role(args=["{{ run }}"])
    data["params"] = {"run": {"type": "string", "default": "${app_id}", "help": "${app_idd}"}}
    data["imports"] = {"lib": "${replica_id}.j2"}
    assert check(make(data)) == []


def test_ts502_substituted_fields_are_fine() -> None:
    data = one_role(args=["${app_id}", "${replica_id}", "${img_root}", "${base_img_root}"],
                    env={"R": "${rank0_env}", "ID": "${app_id}-${replica_id}"})
    assert check(make(data)) == []


def test_ts502_escaped_macro_outside_args_is_fine() -> None:
    assert check(make(one_role(entrypoint="echo $${app_id}"))) == []


# ---------------------------------------------------------------- TS503 duplicate-role


def test_ts503_later_duplicates_point_at_their_name() -> None:
    data = {"name": "app", "roles": [
        {"name": "worker", "image": "i", "entrypoint": "e"},
        {"name": "ps", "image": "i", "entrypoint": "e"},
        {"name": "worker", "image": "i", "entrypoint": "e"},
        {"name": "worker", "image": "i", "entrypoint": "e"},
    ]}
    positions = {("roles", 2, "name"): (9, 11), ("roles", 3, "name"): (12, 11)}
    found = [d for d in check(make(data, positions)) if d.code == "TS503"]
    assert [d.path for d in found] == ["roles[2].name", "roles[3].name"]
    assert [(d.line, d.column) for d in found] == [(9, 11), (12, 11)]
    assert "'worker'" in found[0].message and "roles[0]" in found[0].message
    assert "'worker-2'" in (found[0].hint or "")
    assert "'worker-3'" in (found[1].hint or "")


def test_ts503_distinct_names_are_fine() -> None:
    data = {"name": "app", "roles": [{"name": n, "image": "i", "entrypoint": "e"} for n in ("a", "b", "a.2")]}
    assert check(make(data)) == []


def test_ts503_names_apart_only_by_case_share_a_hosts_variable() -> None:
    data = {"name": "app", "roles": [{"name": n, "image": "i", "entrypoint": "e"} for n in ("a", "b", "A")]}
    found = only(check(make(data)), "TS503")
    assert found.message == "roles 'a' and 'A' would both set TORCHSPEC_HOSTS_A" and found.path == "roles[2].name"


# ---------------------------------------------------------------- TS504 duplicate-port


def test_ts504_points_at_the_later_name() -> None:
    data = one_role(port_map={"c10d": 29500, "tb": 6006, "metrics": 29500})
    doc = make(data, {("roles", 0, "port_map", "metrics"): (8, 43)})
    d = only(check(doc), "TS504")
    assert d.path == "roles[0].port_map.metrics"
    assert (d.line, d.column) == (8, 43)
    assert "29500" in d.message and "'c10d'" in d.message and "'metrics'" in d.message
    assert "29501" in (d.hint or "")


def test_ts504_same_port_in_two_roles_is_fine() -> None:
    data = {"name": "app", "roles": [
        {"name": "a", "image": "i", "entrypoint": "e", "port_map": {"x": 80}},
        {"name": "b", "image": "i", "entrypoint": "e", "port_map": {"x": 80}},
    ]}
    assert check(make(data)) == []


def test_ts504_suggested_port_stays_in_range() -> None:
    d = only(check(make(one_role(port_map={"a": 65535, "b": 65535}))), "TS504")
    assert "1024" in (d.hint or "")


# ---------------------------------------------------------------- TS505 invalid-env-name


def test_ts505_points_at_the_key_and_suggests_a_name() -> None:
    path = ("roles", 0, "env", "MY-VAR")
    doc = make(one_role(env={"OK_1": "x", "MY-VAR": "1"}), {path: (7, 27)}, {path: (7, 19)})
    d = only(check(doc), "TS505")
    assert d.path == "roles[0].env.MY-VAR"
    assert (d.line, d.column) == (7, 19)
    assert "'MY-VAR'" in d.message
    assert "'MY_VAR'" in (d.hint or "")


@pytest.mark.parametrize(
    ("name", "fixed"),
    [("MY-VAR", "MY_VAR"), ("2ND", "_2ND"), ("a.b c", "a_b_c"), ("", "_"), ("ÄRGER", "_RGER")],
)
def test_fix_env_name(name: str, fixed: str) -> None:
    assert fix_env_name(name) == fixed


def test_ts505_empty_name() -> None:
    d = only(check(make(one_role(env={"": "x"}))), "TS505")
    assert "is empty" in d.message


@pytest.mark.parametrize("name", ["A", "_", "_x9", "PATH", "lower_case"])
def test_ts505_valid_names(name: str) -> None:
    assert check(make(one_role(env={name: "v"}))) == []


# ---------------------------------------------------------------- TS506 unknown-named-resource
# The registry of named resources: torchspec.specs.named_resources.named_resources, a mapping of the names.


def test_ts506_typo_gets_did_you_mean() -> None:
    from torchspec.specs.named_resources import named_resources

    assert "aws_p3.8xlarge" in named_resources
    doc = make(one_role(resource="aws_p3.8xlage"), {("roles", 0, "resource"): (6, 15)})
    d = only(check(doc), "TS506")
    assert d.path == "roles[0].resource"
    assert (d.line, d.column) == (6, 15)
    assert "'aws_p3.8xlage'" in d.message
    assert "'aws_p3.8xlarge'" in (d.hint or "")


def test_ts506_registered_names_are_fine() -> None:
    from torchspec.specs.named_resources import named_resources

    names = list(named_resources)
    assert names
    for name in names:
        assert check(make(one_role(resource=name))) == [], name


def test_ts506_far_off_name_lists_registered_names() -> None:
    d = only(check(make(one_role(resource="zzzzzzzz"))), "TS506")
    assert "mapping" in (d.hint or "")


def test_ts506_mapping_resource_needs_no_registry() -> None:
    assert check(make(one_role(resource={"cpu": 1}))) == []


# ---------------------------------------------------------------- TS507 min-above-num-replicas


def test_ts507_min_above_num() -> None:
    doc = make(one_role(num_replicas=2, min_replicas=4), {("roles", 0, "min_replicas"): (7, 19)})
    d = only(check(doc), "TS507")
    assert d.path == "roles[0].min_replicas"
    assert (d.line, d.column) == (7, 19)
    assert "4" in d.message and "2" in d.message
    assert "at most 2" in (d.hint or "") and "at least 4" in (d.hint or "")


def test_ts507_num_replicas_defaults_to_one() -> None:
    d = only(check(make(one_role(min_replicas=2))), "TS507")
    assert "num_replicas 1" in d.message


@pytest.mark.parametrize("fields", [{"min_replicas": 2, "num_replicas": 2}, {"min_replicas": 0},
                                    {"min_replicas": None}, {"min_replicas": 1}, {}])
def test_ts507_fine(fields: dict[str, Any]) -> None:
    assert check(make(one_role(**fields))) == []


# ---------------------------------------------------------------- TS508 bad-mount


@pytest.mark.parametrize(
    "mount",
    [
        "type=bind,src=/a,dst=/b",
        "type=bind,src=/a,dst=/b,readonly",
        "type=bind,source=/a,target=/b,read_only",
        "type=bind,src=/a,destination=/b,readonly=true",
        "type=volume,src=vol,dst=/b",
        "type=device,src=/dev/fuse",
        "type=device,src=/dev/fuse,dst=/dev/f,perm=rw",
        "type=device,src=/dev/fuse,permissions=m",
        "type=bind,src=/a,dst=/b,type=volume,src=v,dst=/c",
        "type=bind,src=/a=b,dst=/b",
    ],
)
def test_ts508_good_mount_strings(mount: str) -> None:
    assert parse_mount_string(mount) == []
    assert check(make(one_role(mounts=[mount]))) == []


@pytest.mark.parametrize(
    ("mount", "in_message", "in_hint"),
    [
        ("type=bind,src=/a", "has no dst=", "dst=/container/path"),
        ("type=volume,dst=/b", "has no src=", "src=<volume name>"),
        ("type=device", "has no src=", "src=/dev/"),
        ("type=volum,src=v,dst=/b", "'volum'", "type=volume"),
        ("type=tmpfs,dst=/b", "'tmpfs'", "type=bind"),
        ("type=device,src=/dev/x,perm=rwx", "'x'", "perm=rw"),
        ("src=/a,type=bind,dst=/b", "comes before 'type='", "start each mount with its type"),
        ("type=bind,src=/a,dst=/b,readonly=false", "takes no value", "even readonly=false"),
        ("type=bind,src=/a,dst=/b,ro", "unknown mount option 'ro'", "options:"),
        ("typ=bind,src=/a,dst=/b", "unknown mount option 'typ'", "did you mean 'type'?"),
        ("type=bind, src=/a,dst=/b", "unknown mount option ' src'", "remove the spaces"),
        ("type=bind,src=/a,dst=/b,", "empty option", "stray ','"),
        ("type=bind,src=,dst=/b", "'src' has no value", "src=<value>"),
        ("type=,src=/a", "'type' has no value", "type=bind or type=volume or type=device"),
        ("type=bind,src=/a,source=/c,dst=/b", "'src' and 'source' both set src", "keep one"),
        ("type=bind,src=/a,dst=/b,perm=rw", "'perm' does not apply to a bind mount", "remove it"),
        ("type=device,src=/dev/x,readonly", "'readonly' does not apply to a device mount", "perm=rwm"),
        ("", "empty", "type=bind"),
    ],
)
def test_ts508_bad_mount_strings(mount: str, in_message: str, in_hint: str) -> None:
    path = ("roles", 0, "mounts", 1)
    doc = make(one_role(mounts=[{"type": "bind", "src_path": "/x", "dst_path": "/x"}, mount]), {path: (8, 30)})
    found = [d for d in check(doc) if d.code == "TS508"]
    assert found, mount
    d = next((d for d in found if in_message in d.message), None)
    assert d is not None, [x.message for x in found]
    assert d.path == "roles[0].mounts[1]"
    assert (d.line, d.column) == (8, 30)
    assert in_hint in (d.hint or "")
    if mount:
        assert repr(mount) in d.message or repr(mount.split(",")[-1]) in d.message


def test_ts508_every_problem_in_one_string_is_reported() -> None:
    problems = parse_mount_string("type=device,perm=rwz,readonly")
    messages = " | ".join(m for m, _ in problems)
    assert "has no src=" in messages and "'readonly' does not apply" in messages and "'z'" in messages


def test_ts508_mapping_mounts_are_left_to_the_schema() -> None:
    assert check(make(one_role(mounts=[{"type": "volume", "src": "v", "dst_path": "/d", "read_only": True}]))) == []


# ---------------------------------------------------------------- several rules at once


def test_all_rules_report_together_in_rule_order() -> None:
    data = {"name": "app", "roles": [
        {"name": "a", "image": "${img_root}", "entrypoint": "e", "args": ["${app_idd}"], "env": {"1X": "v"},
         "port_map": {"x": 1, "y": 1}, "min_replicas": 3, "mounts": ["type=bind"]},
        {"name": "a", "image": "i", "entrypoint": "e"},
    ]}
    assert codes_of(check(make(data))) == ["TS501", "TS502", "TS503", "TS504", "TS505", "TS507", "TS508", "TS508"]


def test_severity_comes_from_the_catalogue() -> None:
    from torchspec import codes

    for d in check(make(one_role(args=["${app_idd}"], min_replicas=5))):
        assert d.severity == codes.severity(d.code)
        assert d.file == "spec.yaml"
        assert d.document == 0


# ---------------------------------------------------------------- TS509 bad-secret

SECRET_TEXT = """\
name: app
roles:
  - name: trainer
    image: img
    entrypoint: python
    env: {LOGLEVEL: INFO}
    secrets:
      - {env: HF_TOKEN, name: hf-token}
      - {env: LOGLEVEL, name: settings, key: level, kind: config_map}
      - {name: db-creds}
      - {mount: etc/creds, name: Db_Creds}
"""


def test_ts509_missing_key_name_and_target_are_positioned_with_hints() -> None:
    from torchspec.lint import lint_text

    found = [d for d in lint_text(SECRET_TEXT, "spec.yaml").diagnostics if d.code == "TS509"]
    by_line = {(d.line, d.message): d for d in found}
    messages = " | ".join(d.message for d in found)
    assert "secret 'hf-token' for the variable 'HF_TOKEN' has no key" in messages
    assert "the variable 'LOGLEVEL' is set twice" in messages
    assert "secret 'db-creds' says neither env, env_prefix nor mount" in messages
    assert "'Db_Creds' is not a Kubernetes object name" in messages and "'etc/creds' is not absolute" in messages
    lines = sorted(line for line, _ in by_line)
    assert lines == [8, 9, 10, 11, 11], found
    missing_key = next(d for d in found if "has no key" in d.message)
    assert missing_key.path == "roles[0].secrets[0]" and "key: token" in (missing_key.hint or "")


def test_ts509_quiet_on_good_references() -> None:
    good = one_role(env={"A": "1"}, secrets=[
        {"env": "HF_TOKEN", "name": "hf-token", "key": "token"},
        {"env_prefix": "DB_", "name": "db-creds"},
        {"env_prefix": "", "name": "more"},
        {"mount": "/etc/creds", "name": "db-creds"},
        {"mount": "/etc/tls", "name": "tls", "key": "tls.crt"},
        {"env": "LEVEL", "name": "settings", "key": "level", "kind": "config_map"},
    ])
    assert check(make(good)) == []


@pytest.mark.parametrize(("item", "where", "words"), [
    ({"env": "T"}, "roles[0].secrets[0]", "has no name"),
    ({"env": "T", "name": "a", "key": "k", "mount": "/m"}, "roles[0].secrets[0].mount", "both env and mount"),
    ({"env": "MY-T", "name": "a", "key": "k"}, "roles[0].secrets[0].env", "'MY_T'"),
    ({"env_prefix": "P", "name": "a", "key": "k"}, "roles[0].secrets[0].key", "every key"),
    ({"env": "T", "name": "a", "key": "a/b"}, "roles[0].secrets[0].key", "not a Secret or ConfigMap key"),
])
def test_ts509_each_problem(item: dict[str, str], where: str, words: str) -> None:
    found = [d for d in check(make(one_role(secrets=[item]))) if d.code == "TS509"]
    assert found and any(d.path == where and words in f"{d.message} {d.hint}" for d in found), found


def test_ts509_one_mount_folder_twice() -> None:
    found = check(make(one_role(secrets=[{"mount": "/m", "name": "a"}, {"mount": "/m", "name": "b"}])))
    assert codes_of(found) == ["TS509"] and found[0].path == "roles[0].secrets[1].mount"


# ---------------------------------------------------------------- TS510 bad-depends-on, ${hosts_env:ROLE}

DEPENDS_TEXT = """\
name: app
roles:
  - name: download
    image: img
    entrypoint: python
    args: ["${hosts_env:trainer}", "${hosts_env:trainr}", "$${hosts_env:nobody}"]
  - name: trainer
    image: img
    entrypoint: python
    depends_on: [{role: donwload, when: finished}, trainer, {role: ps, when: ready}]
  - name: ps
    image: img
    entrypoint: python
    depends_on: [{role: a-b, when: ready}]
  - name: a-b
    image: img
    entrypoint: python
    depends_on: [ps]
  - name: a_b
    image: img
    entrypoint: python
"""


def test_ts510_unknown_role_self_and_cycle_are_positioned_with_hints() -> None:
    from torchspec.lint import lint_text

    found = [d for d in lint_text(DEPENDS_TEXT, "spec.yaml").diagnostics if d.code == "TS510"]
    got = [(d.line, d.column, d.path, d.message, d.hint) for d in found]
    assert got == [
        (10, 25, "roles[1].depends_on[0].role", "role 'trainer' depends on 'donwload', which is no role of the app",
         "did you mean 'download'?"),
        (10, 52, "roles[1].depends_on[1]", "role 'trainer' depends on itself: it would never start",
         "name another role, or drop this item"),
        (18, 18, "roles[3].depends_on[0]", "roles wait for each other in a cycle: ps -> a-b -> ps; none would start",
         "drop one of these dependencies"),
    ]


def test_hosts_env_macro_names_a_role_and_host_variables_cannot_clash() -> None:
    from torchspec.lint import lint_text

    found = lint_text(DEPENDS_TEXT, "spec.yaml").diagnostics
    ts501 = only(found, "TS501")
    assert (ts501.line, ts501.path, ts501.hint) == (6, "roles[0].args[1]", "did you mean 'trainer'?")
    assert ts501.message == "'${hosts_env:trainr}' names no role of the app"
    ts503 = only(found, "TS503")
    assert ts503.path == "roles[4].name" and "TORCHSPEC_HOSTS_A_B" in ts503.message


def test_hosts_env_macro_outside_args_and_env_is_never_substituted() -> None:
    found = check(make({"name": "app", "roles": [
        {"name": "ps", "image": "${hosts_env:ps}", "entrypoint": "x"}]}))
    assert codes_of(found) == ["TS502"]


@pytest.mark.parametrize("depends_on", [[], ["ps"], [{"role": "ps"}], [{"role": "ps", "when": "ready"}]])
def test_ts510_quiet_on_good_dependencies(depends_on: list[Any]) -> None:
    data = {"name": "app", "roles": [{"name": "ps", "image": "i", "entrypoint": "x", "args": ["${hosts_env:ps}"]},
                                     {"name": "trainer", "image": "i", "entrypoint": "x", "depends_on": depends_on}]}
    assert check(make(data)) == []
