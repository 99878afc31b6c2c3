"""Values a spec reads with env() are secrets: they never show in what torchspec prints.

A spec from a pull request can read CI's secrets with ``{{ env('TOKEN') }}``.
A sentinel secret is planted in args, env and metadata (and, for the error
cases, in fields whose problems are reported), once as a plain token and
once full of characters that quoting and escaping change (quotes, a
backslash, ``$``, ``;``, ``&``, a backquote, a non-ASCII letter): a value
hidden only as written would leak through ``shlex.quote``, YAML, JSON or a
Python repr.  It must not appear in ``render``, ``dryrun`` on any scheduler,
``describe`` (local, docker, slurm and kubernetes, whose copies of the spec
are read back by another process), ``status``, ``list``, the lines
``logs`` adds, error messages and diagnostics in every lint format, or any
``--json`` / ``-o json`` / ``-f json`` output.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Dict, Iterator, List

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: every sentinel starts with it: any leak, whole or the first piece of a quoted one, shows it
MARK = "TSSENTINEL"
SECRETS = {
    "plain": f"{MARK}-7f3a9c2e41",
    "quoted": f"{MARK} \"dq\" 'sq' \\ $x ;& `id` é-end",
}
VAR = "TS_ADV_SECRET"
SHOWN = f"<value from env({VAR})>"
#: what diagnostics and errors show, naming the variable or not
HIDDEN = "<value from env("

SPEC = f"""\
name: sec
params: {{image: {{type: string, default: .}}}}
roles:
  - name: r
    image: "{{{{ image }}}}"
    entrypoint: sh
    args: ["-c", "echo started; test -n \\"$TOKEN\\"", "--token={{{{ env('{VAR}') }}}}"]
    env: {{TOKEN: "{{{{ env('{VAR}') }}}}"}}
    metadata: {{note: "{{{{ env('{VAR}') }}}}"}}
"""
#: every problem a value can have, each quoting the value in its message or hint
BAD_VALUES = f"""\
name: bad
roles:
  - name: "{{{{ env('{VAR}') }}}}"
    image: .
    entrypoint: echo
    num_replicas: "{{{{ env('{VAR}') }}}}"
    retry_policy: "{{{{ env('{VAR}') }}}}"
    port_map: {{c10d: "{{{{ env('{VAR}') }}}}"}}
"""
#: values the semantic rules (which run once the schema holds) quote: a mount string, a named resource
BAD_RULES = f"""\
name: bad-rules
roles:
  - name: r
    image: .
    entrypoint: echo
    mounts: ["type=bind,src=/{{{{ env('{VAR}') }}}},readonly=false"]
    resource: "{{{{ env('{VAR}') }}}}"
"""
#: a value a scheduler refuses, quoting it: an image that is no folder
REFUSED = f"""\
name: refused
roles:
  - name: r
    image: "{{{{ env('{VAR}') }}}}/img"
    entrypoint: echo
"""


class Env:
    """The CLI with the secret in its environment, in a folder of its own (TORCHSPEC_HOME too)."""

    def __init__(self, tmp: pathlib.Path, secret: str, **extra: str) -> None:
        self.tmp = tmp
        self.env = {**os.environ, VAR: secret, "TORCHSPEC_HOME": str(tmp / "home"), "NO_COLOR": "1",
                    "PYTHONPATH": str(ROOT), **extra}
        for name, text in (("sec.yaml", SPEC), ("bad.yaml", BAD_VALUES), ("bad_rules.yaml", BAD_RULES),
                           ("refused.yaml", REFUSED)):
            (tmp / name).write_text(text)

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True,
                           cwd=self.tmp, env=self.env, timeout=300)  # a guard: CI's loaded workers took over 120 s
        assert MARK not in r.stdout + r.stderr, f"torchspec {' '.join(args)} shows the secret:\n{r.stdout}{r.stderr}"
        if ok:
            assert r.returncode == 0, f"torchspec {' '.join(args)}: {r.stderr}"
        return r


@pytest.fixture(params=list(SECRETS), ids=list(SECRETS))
def env(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Env:
    return Env(tmp_path, SECRETS[request.param])


def handle_of(r: subprocess.CompletedProcess[str]) -> str:
    return r.stdout.strip().splitlines()[0]


# ---------------------------------------------------------------- render and dryrun


@pytest.mark.parametrize("args", [
    ("render", "sec.yaml"),
    ("render", "-o", "json", "sec.yaml"),
    ("dryrun", "-s", "local", "sec.yaml"),
    ("dryrun", "-s", "slurm", "sec.yaml"),
    ("dryrun", "-s", "docker", "-p", "image=busybox", "sec.yaml"),
    ("dryrun", "-s", "docker", "-p", "image=busybox", "-c", f"copy_env={VAR}", "sec.yaml"),
    ("dryrun", "-s", "kubernetes", "-p", "image=busybox", "sec.yaml"),
    ("dryrun", "-s", "kubernetes", "-c", "flavor=jobset", "-p", "image=busybox", "sec.yaml"),
    ("dryrun", "-s", "kubernetes", "-c", "flavor=volcano", "-p", "image=busybox", "sec.yaml"),
], ids=lambda args: "-".join(a for a in args if not a.endswith(".yaml") and "=" not in a))
def test_render_and_dryrun(env: Env, args: tuple) -> None:
    out = env.run(*args).stdout
    assert SHOWN in out
    if "json" in args:
        assert json.loads(out)["roles"][0]["env"]["TOKEN"] == SHOWN


def test_reveal_env_is_the_one_way_to_see_it(env: Env) -> None:
    r = subprocess.run([sys.executable, "-m", "torchspec", "render", "-o", "json", "--reveal-env", "sec.yaml"],
                       capture_output=True, text=True, cwd=env.tmp, env=env.env, timeout=60)
    assert json.loads(r.stdout)["roles"][0]["env"]["TOKEN"] == env.env[VAR]


# ---------------------------------------------------------------- what is read back later, by another process


def read_back(env: Env, handle: str, role: str = "r") -> None:
    """describe (YAML and JSON), status, list and logs: none shows the secret; describe shows where it was."""
    described = json.loads(env.run("describe", "--json", handle).stdout)
    assert described["roles"][0]["env"]["TOKEN"] == SHOWN and described["roles"][0]["args"][2] == f"--token={SHOWN}"
    assert described["roles"][0]["metadata"]["note"] == SHOWN
    assert SHOWN in env.run("describe", handle).stdout
    env.run("status", handle)
    env.run("status", "--json", handle)
    env.run("list", "-s", handle.split("://", 1)[0], "--json")
    env.run("logs", handle, f"{role}/0")


def test_local(env: Env) -> None:
    r = env.run("submit", "-s", "local", "sec.yaml", "--wait")
    handle = handle_of(r)
    read_back(env, handle)
    assert "r/0 started" in env.run("logs", handle).stdout  # the app ran, with the secret in its env


def test_docker(env: Env, busybox_image: str, docker_cleanup: object) -> None:
    handle = handle_of(env.run("submit", "-s", "docker", "-p", f"image={busybox_image}", "sec.yaml", "--wait"))
    read_back(env, handle)


def test_slurm(env: Env, slurm_jobs: List[str]) -> None:
    r = env.run("submit", "-s", "slurm", "-c", f"log_dir={env.tmp / 'slurm'}", "sec.yaml")
    handle = handle_of(r)
    slurm_jobs.append(handle.rsplit("/", 1)[1])
    env.run("wait", handle, "--timeout", "120")
    read_back(env, handle)


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[str]:
    """The kubeconfig of a fake API server (tests/kube), for the CLI to submit to and describe from."""
    sys.path.insert(0, str(ROOT / "tests" / "kube"))
    from apiserver import FakeApiServer

    with FakeApiServer() as server:
        yield server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.mark.parametrize("flavor", ["job", "jobset"])
def test_kubernetes(tmp_path: pathlib.Path, cluster: str, flavor: str) -> None:
    for name, secret in SECRETS.items():
        (tmp_path / name).mkdir()
        env = Env(tmp_path / name, secret, KUBECONFIG=cluster)
        handle = handle_of(env.run("submit", "-s", "kubernetes", "-c", f"flavor={flavor}", "-p", "image=busybox",
                                   "sec.yaml"))
        described = json.loads(env.run("describe", "--json", handle).stdout)
        assert described["roles"][0]["env"]["TOKEN"] == SHOWN
        assert SHOWN in env.run("describe", handle).stdout
        env.run("status", "--json", handle)
        env.run("list", "-s", "kubernetes", "--json")


# ---------------------------------------------------------------- error messages and diagnostics


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_diagnostics_in_every_format(env: Env, fmt: str) -> None:
    """A wrong type, a choice with a did-you-mean, a name pattern, a mount, a named resource, a port: every
    message quoting the value shows the placeholder instead."""
    r = env.run("lint", "-f", fmt, "bad.yaml", "bad_rules.yaml", ok=False)
    assert r.returncode == 1
    codes: Dict[str, int] = {}
    if fmt == "json":
        for d in json.loads(r.stdout)["diagnostics"]:
            codes[d["code"]] = codes.get(d["code"], 0) + 1
        assert {"TS201", "TS204", "TS508", "TS506"} <= set(codes), codes  # TS206 too where the name is no name
    assert HIDDEN in r.stdout + r.stderr


@pytest.mark.parametrize("args", [("render", "bad.yaml"), ("dryrun", "bad.yaml"), ("dryrun", "bad_rules.yaml")])
def test_spec_errors_of_commands(env: Env, args: tuple) -> None:
    r = env.run(*args, ok=False)
    assert r.returncode == 1 and HIDDEN in r.stderr


@pytest.mark.parametrize("args", [
    ("dryrun", "-s", "local", "refused.yaml"),
    ("submit", "-s", "local", "refused.yaml"),
    ("lint", "--scheduler", "local", "refused.yaml"),
    ("lint", "--scheduler", "local", "-f", "json", "refused.yaml"),
    ("dryrun", "-s", "slurm", "refused.yaml"),
])
def test_a_refusal_quoting_it(env: Env, args: tuple) -> None:
    r = env.run(*args, ok=False)
    assert r.returncode in (1, 2) and HIDDEN in r.stdout + r.stderr, r.stdout + r.stderr


# ---------------------------------------------------------------- the redaction itself


def test_redact_data_keeps_names_types_and_what_is_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchspec import redaction, specs

    monkeypatch.setenv(VAR, SECRETS["quoted"])
    monkeypatch.setattr(redaction, "ENV_READ", {VAR, "TS_ADV_UNSET"})
    role = specs.Role(name=SECRETS["quoted"], image="img", entrypoint="sh", args=[f"a {SECRETS['quoted']} b"],
                      retry_policy=specs.RetryPolicy.REPLICA)
    shown = redaction.redact_data(role)
    assert shown is not role and role.args == [f"a {SECRETS['quoted']} b"]  # a copy: the app runs with the value
    assert shown.args == [f"a {SHOWN} b"] and shown.name == SHOWN and shown.retry_policy is specs.RetryPolicy.REPLICA
    kept = redaction.for_describe({"name": SECRETS["quoted"],
                                   "roles": [{"name": "r", "env": {"T": SECRETS["quoted"]}}]})
    assert kept == {"name": SECRETS["quoted"], "roles": [{"name": "r", "env": {"T": SHOWN}}]}
    for written in (repr(SECRETS["quoted"]), json.dumps(SECRETS["quoted"]), ascii(SECRETS["quoted"])):
        assert redaction.redact_text(f"x {written} y") == f"x {written[0]}{SHOWN}{written[-1]} y"
    monkeypatch.setenv(VAR, "ab")  # too short to hide: it would blank out words everywhere
    assert redaction.redact_text("ab cd") == "ab cd" and redaction.redact_data(role) is role


# ---------------------------------------------------------------- Role.secrets (references): dry runs hold no value

REF_MARKER = "zz-ref-secret-7d2a91"
REF_SPEC = """\
name: refs
roles:
  - name: trainer
    image: {image}
    entrypoint: python3
    args: [-c, "print(1)"]
    resource: {{cpu: 1, memMB: 256}}
    secrets:
      - {{env: HF_TOKEN, name: hf-token, key: token}}
"""


@pytest.mark.parametrize(("scheduler", "shown"), [
    ("local", "HF_TOKEN=<secret hf-token/token>"), ("docker", "HF_TOKEN=<secret hf-token/token>"),
    ("kubernetes", "secretKeyRef"), ("slurm", "HF_TOKEN=<secret hf-token/token>"),
    ("ray", "value: <secret hf-token/token>"),
])
def test_secret_references_dry_run_on_every_backend_without_the_value(
        scheduler: str, shown: str, tmp_path: pathlib.Path) -> None:
    image = "/tmp" if scheduler in ("local", "slurm", "ray") else "ghcr.io/acme/train:1"
    spec = tmp_path / "job.yaml"
    spec.write_text(REF_SPEC.format(image=image))
    env = {**os.environ, "TORCHSPEC_SECRET_HF_TOKEN_TOKEN": REF_MARKER, "TORCHSPEC_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "torchspec", "dryrun", "-s", scheduler, str(spec)], env=env,
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert REF_MARKER not in out
    assert shown in out, out
    home = tmp_path / "home"
    for path in home.rglob("*") if home.exists() else []:
        assert not path.is_file() or REF_MARKER.encode() not in path.read_bytes(), path
