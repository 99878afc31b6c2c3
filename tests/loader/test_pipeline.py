"""The whole loader: params, templates, schema and positions working together."""

from __future__ import annotations

import textwrap

import pytest

from torchspec import specs
from torchspec.errors import ParamError, SchemaError, SpecError, TemplateError
from torchspec.loader import LoadOptions, load_app, load_apps, load_file, load_text

SPEC = textwrap.dedent(
    """\
    name: ddp-{{ nnodes }}
    params:
      nnodes: {type: integer, default: 2, min: 1, max: 64, help: number of nodes}
      script: {type: string, help: training script}
      debug: {type: boolean, default: false}
    roles:
      - name: trainer
        image: img
        entrypoint: python
        num_replicas: "{{ nnodes }}"
        args: ["{{ script }}", "--debug={{ debug }}", "--id=${app_id}"]
        env: {RANK0: "${rank0_env}"}
        resource: {cpu: 2, gpu: 0, memMB: 1024}
    """
)


def write(tmp_path, text: str, name: str = "job.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_native_types_and_macros_pass_through(tmp_path) -> None:
    app = load_app(write(tmp_path, SPEC), {"nnodes": "4", "script": "train.py"})
    role = app.roles[0]
    assert app.name == "ddp-4"
    assert role.num_replicas == 4
    assert role.args == ["train.py", "--debug=False", "--id=${app_id}"]
    assert role.env == {"RANK0": "${rank0_env}"}
    assert role.resource == specs.Resource(cpu=2, gpu=0, memMB=1024)


def test_precedence_cli_over_file_over_default(tmp_path) -> None:
    values = write(tmp_path, "nnodes: 8\nscript: a.py\n", "values.yaml")
    path = write(tmp_path, SPEC)
    assert load_app(path, {}, values).roles[0].num_replicas == 8
    assert load_app(path, {"nnodes": "3"}, values).roles[0].num_replicas == 3


def test_missing_params_are_listed_together(tmp_path) -> None:
    text = SPEC.replace("default: 2, ", "")
    with pytest.raises(ParamError) as e:
        load_app(write(tmp_path, text))
    missing = [d for d in e.value.diagnostics if d.code == "TS302"]
    assert {d.path for d in missing} == {"params.nnodes", "params.script"}
    assert all(d.line for d in missing)
    assert any("number of nodes" in d.message for d in missing)


@pytest.mark.parametrize(
    "given, code, text",
    [
        ({"nnode": "2", "script": "a"}, "TS301", "nnodes"),
        ({"nnodes": "two", "script": "a"}, "TS303", "not an integer"),
        ({"nnodes": "100", "script": "a"}, "TS304", "maximum"),
        ({"nnodes": "2", "script": "a", "debug": "maybe"}, "TS303", "boolean"),
    ],
)
def test_param_errors(tmp_path, given, code, text) -> None:
    with pytest.raises(ParamError) as e:
        load_app(write(tmp_path, SPEC), given)
    found = [d for d in e.value.diagnostics if d.code == code]
    assert found and text in (found[0].message + (found[0].hint or ""))


def test_template_error_position(tmp_path) -> None:
    with pytest.raises(TemplateError) as e:
        load_app(write(tmp_path, SPEC.replace("{{ script }}", "{{ scrip }}")), {"script": "a"})
    d = e.value.first
    assert (d.code, d.line, d.path) == ("TS402", 11, "roles[0].args[0]")
    assert "script" in (d.hint or "")


def test_schema_error_after_render_points_at_template(tmp_path) -> None:
    text = SPEC.replace('num_replicas: "{{ nnodes }}"', 'num_replicas: "{{ nnodes - 10 }}"')
    with pytest.raises(SchemaError) as e:
        load_app(write(tmp_path, text), {"script": "a"})
    assert (e.value.code, e.value.line, e.value.path) == ("TS205", 10, "roles[0].num_replicas")


def test_unknown_key_did_you_mean(tmp_path) -> None:
    with pytest.raises(SchemaError) as e:
        load_app(write(tmp_path, SPEC.replace("num_replicas:", "num_replica:")), {"script": "a"})
    d = e.value.first
    assert (d.code, d.line, d.column) == ("TS202", 10, 5)
    assert "num_replicas" in (d.hint or "")


@pytest.mark.parametrize("fmt, text", [
    ("yaml", "name: x\nroles:\n  - {name: r, image: i, entrypoint: e, retry_policy: APP}\n"),
    ("toml", 'name = "x"\n[[roles]]\nname = "r"\nimage = "i"\nentrypoint = "e"\nretry_policy = "APP"\n'),
])
def test_a_shortened_enum_value_gets_did_you_mean(fmt: str, text: str) -> None:
    d, = load_text(text, "job." + fmt, fmt).all_diagnostics()
    assert d.code == "TS204" and d.hint == "did you mean 'APPLICATION'?", d


def test_lint_mode_fills_required_params_and_warns_unused(tmp_path) -> None:
    text = SPEC.replace("debug: {type: boolean, default: false}",
                        "debug: {type: boolean, default: false}\n  unused: {type: string, default: x}")
    loaded = load_file(write(tmp_path, text), LoadOptions(lint=True))
    codes = [(d.code, d.severity) for d in loaded.all_diagnostics()]
    assert codes == [("TS305", "warning")]


def test_multiple_documents_and_toml(tmp_path) -> None:
    apps = load_apps(write(tmp_path, "name: a\nroles: [{name: r, image: i, entrypoint: e}]\n---\n"
                                     "name: b\nroles: [{name: r, image: i, entrypoint: e}]\n"))
    assert [a.name for a in apps] == ["a", "b"]
    toml = 'name = "t"\n[[roles]]\nname = "r"\nimage = "i"\nentrypoint = "e"\nnum_replicas = 0\n'
    loaded = load_text(toml, "job.toml", "toml")
    d = loaded.all_diagnostics()[0]
    assert (d.code, d.line) == ("TS205", 6)


def test_named_resource_and_mount_forms(tmp_path) -> None:
    app = load_app(write(tmp_path, textwrap.dedent("""\
        name: x
        roles:
          - name: r
            image: i
            entrypoint: e
            resource: aws_p3.8xlarge
            mounts:
              - {type: bind, src_path: /a, dst_path: /b, read_only: true}
              - type=volume,src=vol,dst=/v
              - {type: device, src_path: /dev/fuse}
        """)))
    role = app.roles[0]
    assert role.resource.gpu == 4
    assert role.mounts == [specs.BindMount("/a", "/b", True), specs.VolumeMount("vol", "/v", False),
                           specs.DeviceMount("/dev/fuse", "/dev/fuse", "rwm")]


def test_every_problem_is_a_spec_error(tmp_path) -> None:
    with pytest.raises(SpecError):
        load_app(write(tmp_path, "[1, 2]\n"))
    with pytest.raises(SpecError):
        load_app(write(tmp_path, ""))


def test_numbers_become_text_where_only_text_is_allowed(tmp_path) -> None:
    app = load_app(write(tmp_path, textwrap.dedent("""\
        name: x
        params:
          epochs: {type: integer, default: 90}
          lr: {type: number, default: 0.5}
        roles:
          - name: r
            image: i
            entrypoint: e
            args: ["{{ epochs }}", "{{ lr }}"]
            env: {EPOCHS: "{{ epochs }}", ON: "{{ epochs > 1 }}"}
            max_retries: "{{ epochs // 30 }}"
        """)))
    role = app.roles[0]
    assert role.args == ["90", "0.5"]
    assert role.env == {"EPOCHS": "90", "ON": "True"}
    assert role.max_retries == 3


def test_env_values_never_reach_diagnostics(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TS_SECRET", "hunter2-secret")
    path = write(tmp_path, textwrap.dedent("""\
        name: x
        roles:
          - name: r
            image: i
            entrypoint: e
            num_replicas: "{{ env('TS_SECRET') }}"
            retry_policy: "{{ env('TS_SECRET') }}"
        """))
    found = load_file(path).all_diagnostics()
    assert found and all("hunter2" not in d.message + (d.hint or "") for d in found)
    assert any("<value from env(TS_SECRET)>" in d.message for d in found)  # named, as render and dryrun do


def test_infinite_param_bounds_are_declaration_errors(tmp_path) -> None:
    path = write(tmp_path, "name: x\nparams: {n: {type: integer, min: .inf}}\n"
                           "roles: [{name: r, image: i, entrypoint: e, num_replicas: '{{ n }}'}]\n")
    assert [d.code for d in load_file(path, LoadOptions(lint=True)).all_diagnostics()] == ["TS306"]
