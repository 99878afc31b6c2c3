"""Param values that try to inject: into templates, the shell, the sbatch script, a dry run's display.

A param value is data all the way down: it is never rendered again as a
template, never read by a shell, never adds an ``#SBATCH`` line.  Proved by
running: a real app on the local scheduler (``torchspec submit --wait``),
and the slurm script itself under bash with ``srun``/``scontrol`` faked,
each printing the argv and environment the program received.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from input_support import assert_clean, cli, first_error
from torchspec.exit_codes import ExitCode

#: Each must reach the program exactly as written; MARKER files must never appear.
HOSTILE = [
    "a;touch MARKER1",
    "$(touch MARKER2)",
    "`touch MARKER3`",
    "x\n#SBATCH --evil\ntouch MARKER4",
    "'; touch MARKER5; '",
    "\"$HOME\" && touch MARKER6 || true",
    "* ? [a] ~ > MARKER7",
    "{{ 7 * 7 }}{% for i in range(3) %}x{% endfor %}",
    "line1\r\nFOO=bar",
    "back\\slash \\n tab\there",
]

SHOW = """\
#!/usr/bin/env python3
import json, os, re, sys
print("SHOW " + json.dumps({"argv": sys.argv[1:], "env": {k: os.environ[k] for k in os.environ if re.fullmatch("V[0-9]+", k)}}))
"""


@pytest.fixture
def app(tmp_path: pathlib.Path) -> pathlib.Path:
    """spec.yaml (params v0..vN into args and env, plain and inside text) and its image folder holding show.py."""
    image = tmp_path / "img"
    image.mkdir()
    (image / "show.py").write_text(SHOW)
    (image / "show.py").chmod(0o755)
    params = f"  img: {{type: string, default: '{image}'}}\n"  # a container image for docker and kubernetes
    params += "".join(f"  v{i}: {{type: string}}\n" for i in range(len(HOSTILE)))
    args = ", ".join(f'"{{{{ v{i} }}}}", "<{{{{ v{i} }}}}>"' for i in range(len(HOSTILE)))
    env = "".join(f'      V{i}: "{{{{ v{i} }}}}"\n' for i in range(len(HOSTILE)))
    (tmp_path / "spec.yaml").write_text(f"name: inj\nparams:\n{params}roles:\n  - name: a\n    image: '{{{{ img }}}}'\n"
                                        f"    entrypoint: show.py\n    args: [{args}]\n    env:\n{env}")
    return tmp_path


def given(tmp_path: pathlib.Path) -> list[str]:
    """``-p vI=VALUE`` for every hostile value, with MARKER pointing into ``tmp_path``."""
    out = []
    for i, value in enumerate(HOSTILE):
        out += ["-p", f"v{i}=" + value.replace("MARKER", str(tmp_path / "MARKER"))]
    return out


def expected(tmp_path: pathlib.Path) -> dict:
    values = [v.replace("MARKER", str(tmp_path / "MARKER")) for v in HOSTILE]
    return {"argv": [x for v in values for x in (v, f"<{v}>")], "env": {f"V{i}": v for i, v in enumerate(values)}}


def shown(text: str) -> dict:
    """The JSON show.py printed, from any log or output that holds its SHOW line."""
    line = next(line for line in text.splitlines() if "SHOW {" in line)
    return json.loads(line[line.index("SHOW ") + 5:])


def no_markers(tmp_path: pathlib.Path) -> None:
    assert sorted(p.name for p in tmp_path.rglob("MARKER*")) == []


def test_values_reach_a_local_app_literally(app: pathlib.Path) -> None:
    """``torchspec submit --wait --log``: a real process; argv and env hold every value, byte for byte."""
    env = {"TORCHSPEC_HOME": str(app / "home"), "XDG_CONFIG_HOME": str(app / "xdg")}
    result = cli("submit", "--wait", "--log", "-s", "local", str(app / "spec.yaml"), *given(app), cwd=app, env=env)
    output = assert_clean(result, ExitCode.OK, "SUCCEEDED")
    assert shown(output) == expected(app)
    no_markers(app)


def sbatch_header(script: str) -> list[str]:
    """The ``#SBATCH`` lines sbatch reads: those before the first line that is neither a comment nor blank."""
    directives = []
    for line in script.splitlines():
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH"):
            directives.append(line)
    return directives


def test_values_cannot_add_sbatch_directives_and_reach_the_replica_literally(app: pathlib.Path, monkeypatch) -> None:
    """The dry run's script: the same directives as with harmless values (but for the labels, one base64url
    word that differs as the values' provenance does); run by bash, the same argv and env."""
    monkeypatch.setenv("TORCHSPEC_HOME", str(app / "home"))
    script = str(dryrun_request(app, "slurm"))  # what submit hands sbatch (the CLI's text output would turn \r\n into \n)
    harmless = str(dryrun_request(app, "slurm", plain=True))

    def one_word_labels(lines: list[str]) -> list[str]:
        return [re.sub(r" labels:[A-Za-z0-9_-]+'", " labels:WORD'", line) for line in lines]

    assert one_word_labels(sbatch_header(script)) == one_word_labels(sbatch_header(harmless))
    assert not any("evil" in line for line in sbatch_header(script))
    fake = app / "fakebin"
    fake.mkdir()
    (fake / "srun").write_text('#!/bin/bash\nwhile [[ $1 == --* ]]; do\n  case $1 in --chdir=*) cd "${1#*=}";; esac\n'
                               '  shift\ndone\nexec "$@"\n')
    (fake / "scontrol").write_text('#!/bin/bash\nif [[ $2 == hostnames ]]; then echo n1; else exit 1; fi\n')
    for name in ("srun", "scontrol"):
        (fake / name).chmod(0o755)
    (app / "job.sbatch").write_text(script)
    run_env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1",
               "HOME": str(app), "TORCHSPEC_HOME": str(app / "home")}
    result = subprocess.run(["bash", str(app / "job.sbatch")], env=run_env, capture_output=True, text=True,
                            timeout=60, cwd=app)
    assert result.returncode == 0, result.stdout + result.stderr
    logs = list((app / "home").rglob("stdout.log"))
    assert len(logs) == 1, logs
    assert shown(logs[0].read_text()) == expected(app)
    no_markers(app)


def test_a_value_is_never_rendered_again(tmp_path: pathlib.Path) -> None:
    """From -p, from a params file and from env(): template syntax in a value stays text."""
    (tmp_path / "values.yaml").write_text('f: "{{ 6 * 7 }}"\n')
    (tmp_path / "spec.yaml").write_text(
        "name: t\nparams:\n  p: {type: string}\n  f: {type: string}\nroles:\n  - name: a\n    image: .\n"
        '    entrypoint: echo\n    args: ["{{ p }}", "{{ f }}", "{{ env(\'SNEAKY\') }}", "{{ p | upper }}-{{ f }}"]\n')
    output = assert_clean(cli("render", str(tmp_path / "spec.yaml"), "-p", "p={{ 7 * 7 }}", "--params-file",
                              str(tmp_path / "values.yaml"), "--reveal-env", env={"SNEAKY": "{% raw %}{{ 8 * 8 }}"}),
                          ExitCode.OK)
    args = yaml.safe_load(output)["roles"][0]["args"]
    assert args == ["{{ 7 * 7 }}", "{{ 6 * 7 }}", "{% raw %}{{ 8 * 8 }}", "{{ 7 * 7 }}-{{ 6 * 7 }}"]


def dryrun_request(app: pathlib.Path, scheduler: str, plain: bool = False) -> object:
    """The request of a dry run of the spec with the hostile values (``plain``: harmless ones), in this process."""
    from torchspec.runner import get_runner

    values = {f"v{i}": "plain" if plain else v.replace("MARKER", str(app / "MARKER")) for i, v in enumerate(HOSTILE)}
    if scheduler in ("docker", "kubernetes"):
        values["img"] = "busybox"
    with get_runner() as runner:
        return runner.dryrun_component(str(app / "spec.yaml"), values, scheduler).request


@pytest.mark.parametrize("scheduler", ["local", "docker"])
def test_dry_runs_show_each_env_value_on_one_line(app: pathlib.Path, scheduler: str, monkeypatch) -> None:
    """A value with a newline is shown as $'...': printed raw, 'x\\nFOO=bar' would read as a variable FOO."""
    monkeypatch.setenv("TORCHSPEC_HOME", str(app / "home"))
    monkeypatch.chdir(app)
    text = str(dryrun_request(app, scheduler))
    env_block = text[text.index("env:"):]
    env_block = env_block[:env_block.index("labels:")] if "labels:" in env_block else env_block
    for i, value in enumerate(expected(app)["env"].values()):
        line = next(line for line in env_block.splitlines() if line.strip().startswith(f"V{i}="))
        if "\n" in value:
            assert line.strip().startswith(f"V{i}=$'") and "\\n" in line
    assert not re.search(r"^\s*(FOO=bar|#SBATCH|touch )", env_block, re.M)


def test_kubernetes_manifests_hold_the_values_exactly(app: pathlib.Path, monkeypatch) -> None:
    """YAML quoting keeps each value whole; ``$(`` is doubled so Kubernetes does not expand it."""
    monkeypatch.setenv("TORCHSPEC_HOME", str(app / "home"))
    text = str(dryrun_request(app, "kubernetes"))
    docs = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "Job"]
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    want = expected(app)
    assert container["args"] == [a.replace("$(", "$$(") for a in want["argv"]]
    env = {e["name"]: e["value"] for e in container["env"] if e["name"].startswith("V")}
    assert env == {k: v.replace("$(", "$$(") for k, v in want["env"].items()}


@pytest.mark.parametrize("name", ["A\nB", "A B", "A=B", "", "1A", "A;rm -rf ~", "A\x00B"])
def test_bad_env_names_are_refused_by_lint(name: str, tmp_path: pathlib.Path) -> None:
    text = f"name: t\nroles:\n  - name: a\n    image: .\n    entrypoint: echo\n    env: {{{json.dumps(name)}: '1'}}\n"
    d = first_error(text)
    assert d.code in ("TS505", "TS106"), str(d)
    if d.code == "TS505":
        assert (d.line, d.column) == (6, 11) and "env name" in d.message and d.hint
    path = tmp_path / "env.yaml"
    path.write_text(text)
    output = assert_clean(cli("lint", str(path)), ExitCode.SPEC_ERROR, d.code)
    assert "\nB" not in output  # the name is quoted in the message, never printed raw


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shells")
def test_the_shell_component_is_the_only_shell(tmp_path: pathlib.Path) -> None:
    """utils.echo passes its message as one argument; only utils.sh (a shell by name) runs shell syntax."""
    env = {"TORCHSPEC_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    msg = f"hi; touch {tmp_path}/MARKER $(touch {tmp_path}/MARKER2)"
    output = assert_clean(cli("submit", "--wait", "--log", "-s", "local", "utils.echo", "-p", f"msg={msg}",
                              cwd=tmp_path, env=env), ExitCode.OK, "SUCCEEDED")
    assert msg in output
    no_markers(tmp_path)
