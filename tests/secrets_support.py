"""The engine-wide secret grep (issue 35): a marker secret, random per test, submitted through the CLI, and
grepped in everything torchspec writes.

Each engine's test (tests/schedulers/...: local, docker, slurm, ray, and the real Kubernetes cluster) writes a
spec whose replica prints the sha256 of the secret it got (``env <hash>``, and ``file <hash>`` for a mount),
runs every command a user would (``dryrun``, ``submit``, ``wait``, ``status``, ``describe``, ``logs``,
``list``, in text and JSON, and the dashboard's pages) through :class:`Cli`, which fails on any output holding
the marker, checks the hashes in ``logs``, and then :func:`assert_not_in_files` greps the state folder (``TORCHSPEC_HOME``) and
whatever else the engine has torchspec write (Slurm's log folder with the kept script and spec).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import secrets
import subprocess
import sys
from typing import Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the variable the replica's secret has, and the reference's name and key
VAR, NAME, KEY = "HF_TOKEN", "hf-token", "token"
SOURCE = "TORCHSPEC_SECRET_HF_TOKEN_TOKEN"


def new_marker() -> str:
    """A secret no file or output holds by chance: random per test, with characters quoting would change."""
    return f"zz-marker-{secrets.token_hex(12)}-$x'q"


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


#: The replica's script (sh): the hashes of the variable and, when a folder is given as $1, of its file.
PRINT_HASHES = ('printf "env %s\\n" "$(printf %s "$HF_TOKEN" | sha256sum | cut -d" " -f1)"; '
                'if [ -n "${1:-}" ]; then printf "file %s\\n" "$(sha256sum < "$1/token" | cut -d" " -f1)"; fi; '
                'printf "carriers %s\\n" "$(env | grep -c "^TORCHSPEC_CARRIED" || true)"')


def spec_text(image: str, mount: Optional[str] = None, resource: str = "{cpu: 1, memMB: 64}") -> str:
    """One role, one replica, printing the hashes; the secret as a variable, and as files under ``mount``."""
    secret_items = f"      - {{env: {VAR}, name: {NAME}, key: {KEY}}}\n"
    if mount:
        secret_items += f"      - {{mount: {mount}, name: {NAME}, key: {KEY}}}\n"
    args = f'["-c", {_yaml_str(PRINT_HASHES)}, "sh"' + (f", {_yaml_str(mount)}]" if mount else "]")
    return (f"name: sec\nroles:\n  - name: trainer\n    image: {image}\n    entrypoint: sh\n    args: {args}\n"
            f"    resource: {resource}\n    secrets:\n{secret_items}")


def _yaml_str(text: str) -> str:
    import json

    return json.dumps(text)


class Cli:
    """``python -m torchspec`` in ``cwd`` with the marker as the secret's source; every output is checked."""

    def __init__(self, cwd: pathlib.Path, marker: str, **extra: str) -> None:
        self.cwd = cwd
        self.marker = marker
        self.home = cwd / "home"
        self.env: Dict[str, str] = {**os.environ, SOURCE: marker, "TORCHSPEC_HOME": str(self.home),
                                    "NO_COLOR": "1", "PYTHONPATH": str(ROOT), **extra}
        self.commands: List[str] = []

    def run(self, *args: str, ok: bool = True, timeout: float = 180) -> "subprocess.CompletedProcess[str]":
        done = subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True,
                              cwd=self.cwd, env=self.env, timeout=timeout, stdin=subprocess.DEVNULL)
        self.commands.append(" ".join(args))
        assert self.marker not in done.stdout + done.stderr, \
            f"torchspec {' '.join(args)} shows the secret:\n{done.stdout}{done.stderr}"
        if ok:
            assert done.returncode == 0, f"torchspec {' '.join(args)} (exit {done.returncode}): {done.stderr}"
        return done

    def lifecycle(self, scheduler: str, spec: str, *cfg: str, mount: bool = False) -> str:
        """dryrun, submit, wait, status, describe, logs, list: every output free of the marker; the replica got
        the value (its hashes in ``logs``); returns the handle."""
        options = ["-c", ",".join(cfg)] if cfg else []
        shown = self.run("dryrun", "-s", scheduler, *options, spec).stdout
        assert f"<secret {NAME}" in shown or "secretKeyRef" in shown, shown
        handle = self.run("submit", "-s", scheduler, *options, spec).stdout.strip().splitlines()[0]
        state = self.run("wait", handle, "--timeout", "240", ok=False)
        assert "SUCCEEDED" in state.stdout, state.stdout + state.stderr + self.run("logs", handle).stdout
        for args in (("status", handle), ("status", "--json", handle), ("describe", handle),
                     ("describe", "--json", handle), ("list", "-s", scheduler), ("list", "-s", scheduler, "--json")):
            self.run(*args)
        logs = self.run("logs", handle, "trainer/0").stdout
        assert f"env {sha(self.marker)}" in logs, logs
        assert "carriers 0" in logs, logs
        if mount:
            assert f"file {sha(self.marker)}" in logs, logs
        self.dashboard(scheduler, handle)
        return handle

    def dashboard(self, scheduler: str, handle: str) -> None:
        """The dashboard's pages and JSON of the app (its list, its page, its log lines): none holds the secret.
        In a process of its own with this CLI's environment, as ``torchspec ui`` would serve them."""
        done = subprocess.run([sys.executable, "-c", DASHBOARD, scheduler, handle], capture_output=True,
                              text=True, cwd=self.cwd, env=self.env, timeout=180, stdin=subprocess.DEVNULL)
        self.commands.append(f"ui -s {scheduler}")
        assert done.returncode == 0, done.stderr
        assert self.marker not in done.stdout + done.stderr, f"the dashboard shows the secret:\n{done.stdout}"
        assert f"env {sha(self.marker)}" in done.stdout, done.stdout  # it did show the app and its log lines


#: Every page and JSON answer of the dashboard about one app, printed (argv: scheduler, handle).
DASHBOARD = """
import sys
from starlette.testclient import TestClient
from torchspec.runner import get_runner
from torchspec.ui import create_app
scheduler, handle = sys.argv[1:3]
token = "t" * 43
with TestClient(create_app(get_runner, [scheduler], token), base_url="http://127.0.0.1:8123") as client:
    assert client.get("/?token=" + token).status_code == 200
    for path in ("/", "/api/apps", f"/app/{handle}", f"/api/app/{handle}", f"/api/app/{handle}/logs/trainer/0?before=1000"):
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        print(f"--- {path}", answer.text, sep="\\n")
"""


def assert_not_in_files(marker: str, *roots: pathlib.Path) -> int:
    """No file under ``roots`` holds the marker (as it is, or as JSON or shell quoting would write it); the
    number of files looked at, so a test can tell that it looked at something."""
    import json
    import shlex

    forms = {marker.encode(), json.dumps(marker)[1:-1].encode(), shlex.quote(marker).encode(),
             marker.split("$")[0].encode()}
    seen = 0
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*") if root.exists() else []:
            if path.is_file() and not path.is_symlink():
                seen += 1
                data = path.read_bytes()
                for form in forms:
                    assert form not in data, f"{path} holds the secret"
    return seen
