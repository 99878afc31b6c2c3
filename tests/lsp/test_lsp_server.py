"""The language server as an editor sees it: a ``python -m torchspec lsp`` subprocess over stdio.

Every test talks the protocol through pygls' client (tests/lsp/lsp_session.py):
open, change, hover, complete, definition, symbols, code actions, shutdown.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest
from lsprotocol import types as T

from lsp_session import REPO, Session, position_of

SPEC = textwrap.dedent(
    """\
    name: "train-{{ nnodes }}"
    imports:
      common: lib/common.j2
    params:
      nnodes: {type: integer, default: 2, min: 1, help: number of nodes}
      tag: {type: string, default: "1.4"}
    roles:
      - name: trainer
        image: "{{ common.image('ghcr.io/acme', 'trainer', tag) }}"
        entrypoint: bash
        args: ["-c", "torchrun --nnodes={{ nnodes }} --rdzv_id=${app_id} train.py"]
        num_replicas: "{{ nnodes }}"
        resource: aws_p3.8xlarge
        retry_policy: APPLICATION
    """
)
MACROS = textwrap.dedent(
    """\
    {#- Shared macros. -#}

    {#- An image reference from its parts, e.g. ghcr.io/acme/trainer:1.4 -#}
    {%- macro image(registry, name, tag="latest") -%}
    {{ registry }}/{{ name }}:{{ tag }}
    {%- endmacro -%}
    """
)


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "common.j2").write_text(MACROS)
    (tmp_path / "job.yaml").write_text(SPEC)
    return tmp_path


@pytest.fixture
def session(project: pathlib.Path):
    s = Session(project)
    yield s
    s.close()


def cli_lint(path: pathlib.Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "torchspec", "lint", "-f", "json", str(path)], capture_output=True,
                         text=True, cwd=path.parent, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                                          "XDG_CONFIG_HOME": str(path.parent / ".config")})
    return json.loads(out.stdout)["diagnostics"]


def test_lint_on_open_and_change_matches_torchspec_lint_and_survives_broken_text(project, session) -> None:
    broken = SPEC.replace("    entrypoint: bash\n", "    entrypoint: bash\n    nmae: x\n").replace(
        "APPLICATION", "APPLICATON")
    (project / "broken.yaml").write_text(broken)
    uri = session.open(project / "broken.yaml")
    found = session.wait_diagnostics(uri)
    expected = cli_lint(project / "broken.yaml")
    assert [d.code for d in found] == [e["code"] for e in expected] == ["TS202", "TS204"]
    for d, e in zip(found, expected):
        assert d.message == f"{e['message']}\nhint: {e['hint']}"
        assert (d.range.start.line + 1, d.range.start.character + 1) == (e["line"], e["column"])
        assert d.source == "torchspec" and d.severity == T.DiagnosticSeverity.Error
    assert found[0].range.end.character - found[0].range.start.character == len("nmae")

    line, col = position_of(broken, "nmae")
    session.edit(uri, line, col, col + 4, "name")  # an incremental change: still a duplicate key now
    assert [d.code for d in session.wait_diagnostics(uri)] == ["TS105"]
    session.change(uri, SPEC)
    assert session.wait_diagnostics(uri) == []

    half = SPEC.replace("    retry_policy: APPLICATION\n", "    retry_policy: APPL\n    env: {A: \n")
    session.change(uri, half)
    [syntax] = session.wait_diagnostics(uri)
    assert syntax.code == "TS101"
    line, col = position_of(half, ": APPL", 6)
    assert [i.label for i in session.complete(uri, line, col)] == ["APPLICATION", "REPLICA", "ROLE"]
    assert session.hover(uri, *position_of(half, "entrypoint", 2)) is not None
    session.change(uri, "\x00\x01 {{{{ [[[[ : : :\n\t- - -\n" * 50)
    assert session.wait_diagnostics(uri)[0].code.startswith("TS1")
    session.change(uri, SPEC)
    assert session.wait_diagnostics(uri) == []
    assert session.close() == 0


def test_hover(project, session) -> None:
    uri = session.open(project / "job.yaml")
    session.wait_diagnostics(uri)

    def hover(needle: str, offset: int = 0, occurrence: int = 0) -> str:
        found = session.hover(uri, *position_of(SPEC, needle, offset, occurrence))
        assert found is not None, needle
        return found.contents.value

    assert "**Entrypoint**" in hover("entrypoint") and "Command (inside the container)" in hover("entrypoint")
    retry = hover("retry_policy")
    assert "Retry policy" in retry and "`APPLICATION`, `REPLICA`, `ROLE`" in retry
    param = hover("nnodes }}", 2)
    assert "**param `nnodes`** · `integer` · default `2`" in param and "number of nodes" in param
    assert "Declared on line 5; used on lines 1, 11, 12" in param
    assert hover("nnodes:", 1) == param  # the declaration itself
    macro = hover("${app_id}", 3)
    assert "runtime macro `${app_id}`" in macro and "the app's id as the scheduler assigned it" in macro
    call = hover("common.image", 8)
    assert "common.image(registry, name, tag=\"latest\")" in call and "An image reference from its parts" in call
    assert "Defines: `image(registry, name, tag=\"latest\")`" in hover("common:", 1)
    assert "cpu 32, gpu 4" in hover("aws_p3.8xlarge", 3)


def test_completion(project, session) -> None:
    typed = SPEC.replace("    retry_policy: APPLICATION\n", "    retry_policy: \n    max_\n"
                         "    env: {LOG: \"${rep\", X: \"{{ nn\", Y: \"{{ common.im\"}\n")
    uri = session.open(project / "job.yaml", typed)

    def labels(needle: str, offset: int) -> list[str]:
        return [i.label for i in session.complete(uri, *position_of(typed, needle, offset))]

    assert labels("retry_policy: ", 14) == ["APPLICATION", "REPLICA", "ROLE"]
    keys = labels("max_", 4)
    assert "max_retries" in keys and "min_replicas" in keys and "entrypoint" not in keys  # written already
    assert "replica_id" in labels("${rep", 5)
    names = labels("{{ nn", 5)
    assert names[:2] == ["nnodes", "tag"] and "common" in names and "env" in names
    assert labels("{{ common.im", 12) == ["image"]
    [item] = [i for i in session.complete(uri, *position_of(typed, "{{ common.im", 12))]
    assert item.detail == 'image(registry, name, tag="latest")'
    assert "aws_p3.8xlarge" in labels("aws_p3.8xlarge", 0)

    toml = 'name = "x"\n[[roles]]\nname = "a"\nretry_policy = "\nresourc\n'
    toml_uri = session.open(project / "job.toml", toml, "toml")
    assert [i.label for i in session.complete(toml_uri, 3, 16)] == ["APPLICATION", "REPLICA", "ROLE"]
    [resource] = [i for i in session.complete(toml_uri, 4, 7) if i.label == "resource"]
    assert resource.text_edit.new_text == "resource = "
    json_text = '{"name": "x", "roles": [{"name": "a", "ima'
    json_uri = session.open(project / "job.json", json_text, "json")
    [image] = [i for i in session.complete(json_uri, 0, len(json_text)) if i.label == "image"]
    assert image.text_edit.new_text == 'image": '


def test_definition_symbols_and_quick_fixes(project, session) -> None:
    uri = session.open(project / "job.yaml")
    session.wait_diagnostics(uri)
    macros_uri = (project / "lib" / "common.j2").as_uri()
    [to_file] = session.definition(uri, *position_of(SPEC, "lib/common.j2", 2))
    assert to_file.uri == macros_uri and to_file.range.start.line == 0
    [to_macro] = session.definition(uri, *position_of(SPEC, "common.image", 8))
    assert to_macro.uri == macros_uri and to_macro.range.start.line == 3
    [to_param] = session.definition(uri, *position_of(SPEC, "{{ nnodes", 4, occurrence=1))
    assert to_param.uri == uri and (to_param.range.start.line, to_param.range.start.character) == (4, 2)

    compose = session.open(project / "compose.yaml", "services: {web: {image: x, nmae: y}}\n")
    assert session.wait_diagnostics(compose) == []  # not a spec: nothing to say (lint --only-specs)

    outline = {s.name: [c.name for c in s.children or []] for s in session.symbols(uri)}
    assert outline == {"train-{{ nnodes }}": [], "params": ["nnodes", "tag"], "imports": ["common"],
                       "roles": ["trainer"]}

    typo = SPEC.replace("nmae", "name").replace("    entrypoint:", "    entrypiont:").replace(
        "{{ nnodes }}\"\n", "{{ nnode }}\"\n")
    session.change(uri, typo)
    found = session.wait_diagnostics(uri, lambda d: bool(d))
    actions = session.code_actions(uri, found)
    assert [a.title for a in actions] == ["Replace 'entrypiont' with 'entrypoint'"]
    [edit] = actions[0].edit.changes[uri]
    assert (edit.range.start.line, edit.new_text) == (position_of(typo, "entrypiont")[0], "entrypoint")
    session.change(uri, SPEC.replace("num_replicas: \"{{ nnodes }}\"", "num_replicas: \"{{ nnode }}\""))
    [undefined] = session.wait_diagnostics(uri, lambda d: bool(d))
    assert undefined.code == "TS402"
    [fix] = session.code_actions(uri, [undefined])
    [edit] = fix.edit.changes[uri]
    assert edit.new_text == "nnodes" and edit.range.end.character - edit.range.start.character == len("nnode")


def test_an_imported_buffer_relints_only_the_specs_that_import_it(project, session) -> None:
    uri = session.open(project / "job.yaml")
    assert session.wait_diagnostics(uri) == []
    other = session.open(project / "other.yaml", "name: o\nroles: [{name: a, image: ., entrypoint: echo}]\n")
    assert session.wait_diagnostics(other) == []
    macros = session.open(project / "lib" / "common.j2", language="jinja")
    session.change(macros, MACROS.replace("{{ registry }}/{{ name }}", "{{ registry }}/{{ nmae }}"))
    [undefined] = session.wait_diagnostics(uri, lambda d: bool(d))
    assert undefined.code == "TS402" and "'nmae' is undefined" in undefined.message
    [related] = undefined.related_information
    assert related.location.uri == macros and related.location.range.start.line == 4
    session.change(macros, MACROS)
    assert session.wait_diagnostics(uri) == []
    published = []
    while not session.diagnostics.empty():
        published.append(session.diagnostics.get().uri)
    assert other not in published


def test_config_scheduler_check_and_config_completion(project) -> None:
    (project / ".torchspec.toml").write_text('default_scheduler = "local"\n\n[scheduler.local]\n')
    session = Session(project)
    try:
        uri = session.open(project / "missing.yaml", "name: m\nroles: [{name: a, image: /no/such/dir, "
                                                     "entrypoint: echo}]\n")
        [refused] = session.wait_diagnostics(uri)
        assert refused.code == "TS601" and "local" in refused.message
        config = session.open(project / ".torchspec.toml", 'default_scheduler = "local"\n\n[scheduler.local]\nkill_\n',
                              "toml")
        assert "kill_grace_s" in [i.label for i in session.complete(config, 3, 5)]
        session.change(config, '[scheduler.\n[component."dist.\n')
        assert "local" in [i.label for i in session.complete(config, 0, 11)]
        assert "dist.ddp" in [i.label for i in session.complete(config, 1, 17)]
        session.change(config, '[component."dist.ddp"]\nj = "2x4"\n')
        component = session.hover(config, 0, 15).contents.value
        assert "dist.ddp(script: string = \"\"" in component and "Distributed data parallel" in component
        assert "NNODESxNPROC_PER_NODE" in session.hover(config, 1, 0).contents.value
        session.change(config, '[apply]\nlo\n')
        assert [i.label for i in session.complete(config, 1, 2)] == ["lock", "lock_timeout", "lock_duration"]
        session.change(config, '[apply]\nlock = "kubernetes"\n')
        assert "Lease" in session.hover(config, 1, 1).contents.value
        assert "lock_duration" in session.hover(config, 0, 2).contents.value
        (project / ".torchspec.toml").write_text('[component."dist.ddp"]\nj = "2x4"\n')
        session.save(config)  # no default scheduler any more: the open specs are linted again without it
        assert session.wait_diagnostics(uri) == []
    finally:
        assert session.close() == 0


def test_a_scheduler_that_cannot_be_checked_is_said_once_and_lint_goes_on(project) -> None:
    (project / ".torchspec.toml").write_text('default_scheduler = "lcoal"\n')
    session = Session(project)
    try:
        uri = session.open(project / "job.yaml", SPEC.replace("APPLICATION", "APPLICATON"))
        assert [d.code for d in session.wait_diagnostics(uri)] == ["TS204"]
        shown = session.messages.get(timeout=30)
        assert shown.type == T.MessageType.Warning and "the lcoal scheduler check is off" in shown.message
        assert "did you mean 'local'?" in shown.message
        session.change(uri, SPEC)
        assert session.wait_diagnostics(uri) == [] and session.messages.empty()
    finally:
        assert session.close() == 0


def test_the_command_without_pygls_says_how_to_install_it(tmp_path) -> None:
    block = ("import importlib.abc, sys\nclass B(importlib.abc.MetaPathFinder):\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name.split('.')[0] == 'pygls': raise ImportError(name=name)\n"
             "sys.meta_path.insert(0, B())\n"
             "from torchspec.cli.main import main\nmain(sys.argv[1:])\n")
    r = subprocess.run([sys.executable, "-c", block, "lsp"], capture_output=True, text=True, cwd=tmp_path,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    from torchspec.install import install_command

    assert r.returncode == 2 and install_command("lsp") in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-c", "import sys; from torchspec.cli.main import main\n"
                        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
                        "assert 'pygls' not in sys.modules and 'lsprotocol' not in sys.modules"],
                       capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr


def test_a_macro_file_changed_on_disk_relints_its_importers(project) -> None:
    capabilities = T.ClientCapabilities(workspace=T.WorkspaceClientCapabilities(
        did_change_watched_files=T.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True)))
    session = Session(project, capabilities=capabilities)
    try:
        [registration] = session.registrations.get(timeout=30).registrations
        assert registration.method == T.WORKSPACE_DID_CHANGE_WATCHED_FILES
        assert "**/*.j2" in [w["globPattern"] for w in registration.register_options["watchers"]]
        uri = session.open(project / "job.yaml")
        assert session.wait_diagnostics(uri) == []
        macros = project / "lib" / "common.j2"
        macros.write_text(MACROS.replace("{%- endmacro -%}", ""))
        session.client.workspace_did_change_watched_files(T.DidChangeWatchedFilesParams(
            changes=[T.FileEvent(uri=macros.as_uri(), type=T.FileChangeType.Changed)]))
        [syntax] = session.wait_diagnostics(uri, lambda d: bool(d))
        assert syntax.code == "TS401" and syntax.related_information[0].location.uri == macros.as_uri()
    finally:
        assert session.close() == 0
