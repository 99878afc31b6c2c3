"""The canonical form of an AppDef and its content hash: order-independent, secrets never in the clear."""

from __future__ import annotations

import json

import pytest

from torchspec.loader import load_text
from torchspec.specs.canonical import HASH_VERSION, canonical_app, content_hash

SPEC = """name: train
metadata: {team: ml, tier: "1"}
roles:
  - name: trainer
    image: img:1
    entrypoint: python
    args: ["-m", "train", "--lr", "0.1"]
    env: {A: "1", B: "2"}
    num_replicas: 2
    resource: {cpu: 4, memMB: 1024}
    port_map: {http: 8080}
    mounts:
      - {type: bind, src_path: /data, dst_path: /data}
      - {type: volume, src: cache, dst_path: /cache}
  - name: reader
    image: img:1
    entrypoint: read
"""

REORDERED = """roles:
  - entrypoint: python
    name: trainer
    num_replicas: 2
    env: {B: "2", A: "1"}
    args: [-m, train, --lr, "0.1"]
    image: "img:1"
    mounts:
      - {type: volume, dst_path: /cache, src: cache}
      - {dst_path: /data, src_path: /data, type: bind}
    port_map: {http: 8080}
    resource: {memMB: 1024, cpu: 4}
  - {name: reader, image: "img:1", entrypoint: read}
metadata: {tier: "1", team: ml}
name: train
"""


def app_of(text: str, fmt: str = "yaml"):
    loaded = load_text(text, f"spec.{fmt}", fmt)
    assert loaded.ok, loaded.all_diagnostics()
    doc, = loaded.documents
    return doc.app, doc.env_read


def test_reordering_keys_and_reformatting_give_the_same_form_and_hash() -> None:
    a, _ = app_of(SPEC)
    b, _ = app_of(REORDERED)
    assert canonical_app(a) == canonical_app(b)
    assert content_hash(a) == content_hash(b)
    toml = ('name = "train"\nmetadata = {tier = "1", team = "ml"}\n[[roles]]\nname = "trainer"\nimage = "img:1"\n'
            'entrypoint = "python"\nargs = ["-m", "train", "--lr", "0.1"]\nenv = {A = "1", B = "2"}\nnum_replicas = 2\n'
            'resource = {cpu = 4, memMB = 1024}\nport_map = {http = 8080}\n'
            'mounts = [{type = "bind", src_path = "/data", dst_path = "/data"},'
            ' {type = "volume", src = "cache", dst_path = "/cache"}]\n'
            '[[roles]]\nname = "reader"\nimage = "img:1"\nentrypoint = "read"\n')
    assert content_hash(app_of(toml, "toml")[0]) == content_hash(a)


def test_the_form_is_plain_sorted_data_per_role_and_field() -> None:
    form = canonical_app(app_of(SPEC)[0])
    assert json.loads(json.dumps(form.data)) == form.data
    assert form.data["role_order"] == ["trainer", "reader"]
    trainer = form.data["roles"]["trainer"]
    assert list(trainer) == sorted(trainer)
    assert trainer["args"] == ["-m", "train", "--lr", "0.1"] and trainer["env"] == {"A": "1", "B": "2"}
    assert trainer["resource"] == {"cpu": 4, "memMB": 1024} and trainer["retry_policy"] == "APPLICATION"
    assert [m["dst_path"] for m in trainer["mounts"]] == ["/cache", "/data"]
    fields = form.fields()
    assert fields[("roles", "trainer", "env", "B")] == "2" and fields[("roles", "trainer", "num_replicas")] == 2


@pytest.mark.parametrize("edit", [
    ("--lr\", \"0.1", "--lr\", \"0.2"), ("num_replicas: 2", "num_replicas: 3"), ("image: img:1", "image: img:2"),
    ("cpu: 4", "cpu: 8"), ("team: ml", "team: infra"), ("http: 8080", "http: 8081"),
])
def test_any_change_to_what_runs_changes_the_hash(edit: tuple[str, str]) -> None:
    assert edit[0] in SPEC
    assert content_hash(app_of(SPEC.replace(*edit))[0]) != content_hash(app_of(SPEC)[0])


def test_the_hash_covers_the_scheduler_and_its_run_options() -> None:
    app = app_of(SPEC)[0]
    plain = content_hash(app)
    assert plain.startswith(HASH_VERSION + "-") and len(plain) <= 63  # fits a Kubernetes label value
    assert content_hash(app, scheduler="local") != content_hash(app, scheduler="docker")
    assert content_hash(app, scheduler="kubernetes", run_options={"queue": "a"}) != \
        content_hash(app, scheduler="kubernetes", run_options={"queue": "b"})
    assert content_hash(app, scheduler="local", run_options={"x": None}) == content_hash(app, scheduler="local")


SECRET_SPEC = """name: s
roles:
  - name: r
    image: img
    entrypoint: run
    args: ["--token={{ env('TS_CANON_TOKEN') }}"]
    env: {TOKEN: "{{ env('TS_CANON_TOKEN') }}", PLAIN: "x"}
"""


def test_secrets_are_redacted_and_hashed_never_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_CANON_TOKEN", "hunter2-first")
    first = canonical_app(*app_of(SECRET_SPEC))
    monkeypatch.setenv("TS_CANON_TOKEN", "hunter2-second")
    second = canonical_app(*app_of(SECRET_SPEC))
    for form in (first, second):
        text = json.dumps(form.data)
        assert "hunter2" not in text and "<value from env(TS_CANON_TOKEN)>" in text
        assert set(form.secrets) == {("roles", "r", "args"), ("roles", "r", "env", "TOKEN")}
        assert not any("hunter2" in digest for digest in form.secrets.values())
    assert first.data == second.data and first.secrets != second.secrets
    assert content_hash(first) != content_hash(second)
