"""The app lifecycle through the real ``torchspec`` entry point, on the ``local`` scheduler.

Every call is a fresh process with its own ``TORCHSPEC_HOME``, so these tests
also prove that apps outlive the CLI that submitted them: ``status``,
``logs`` and ``cancel`` run in processes that never saw the submission.
Specs are written as JSON (valid YAML) with ``sys.executable -c`` entrypoints
so they run anywhere Python does.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from process_support import alive, finish, interruptible, wait_gone

EXE = pathlib.Path(sys.executable).with_name("torchspec")
PY = sys.executable
HANDLE_RE = re.compile(r"^local://[^/\s]*/\S+$")

# exit codes documented in `torchspec --help` and docs/reference/exit-codes.md
OK, SPEC_ERROR, USAGE, APP_FAILED, APP_CANCELLED = 0, 1, 2, 4, 5

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the local scheduler needs POSIX process groups")


class Env:
    """A private TORCHSPEC_HOME and working folder; ``run`` calls the CLI there."""

    def __init__(self, tmp: pathlib.Path) -> None:
        self.tmp = tmp
        self.env = dict(os.environ, NO_COLOR="1", TORCHSPEC_HOME=str(tmp / "home"),
                        XDG_CONFIG_HOME=str(tmp / "xdg"))
        self.env.pop("FORCE_COLOR", None)
        self.env.pop("TORCHSPEC_DEBUG", None)

    def command(self, *args: str) -> list[str]:
        return ([str(EXE)] if EXE.exists() else [PY, "-m", "torchspec"]) + list(args)

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(self.command(*args), capture_output=True, text=True, cwd=self.tmp, env=self.env,
                           timeout=timeout)
        assert "Traceback" not in r.stderr, r.stderr
        return r

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """The CLI as a process of its own; SIGINT at its default even where this test run was started ignoring
        it (a shell's background job), as it is for a user at a terminal."""
        return subprocess.Popen(interruptible(self.command(*args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=self.tmp, env=self.env)

    def spec(self, name: str, roles: list[dict[str, Any]]) -> str:
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps({"name": name, "roles": roles}, indent=2))
        return str(path)

    def submit(self, spec: str, *extra: str) -> str:
        r = self.run("submit", spec, *extra)
        assert r.returncode == OK, r.stderr
        handle = r.stdout.strip()
        assert HANDLE_RE.match(handle) and "\n" not in handle, r.stdout  # only the handle on stdout
        return handle

    def status(self, handle: str) -> dict[str, Any]:
        r = self.run("status", handle, "--json")
        assert r.returncode == OK, r.stderr
        return json.loads(r.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Env:
    return Env(tmp_path)


def role(name: str, code: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": ".", "entrypoint": PY, "args": ["-c", code], "num_replicas": replicas, **extra}


def talker(name: str, replicas: int, sleep: float = 0.0) -> dict[str, Any]:
    """A role whose replicas say who they are on stdout and stderr, then exit 0."""
    code = (f"import sys, time\nprint('{name} says hi from ${{replica_id}}', flush=True)\n"
            f"print('{name} err ${{replica_id}}', file=sys.stderr, flush=True)\ntime.sleep({sleep})\n"
            f"print('{name} done ${{replica_id}}', flush=True)\n")
    return role(name, code, replicas)


def test_multi_role_app_outlives_the_cli(env: Env) -> None:
    spec = env.spec("tpr", [talker("trainer", 2, 1.0), talker("ps", 1, 1.0), talker("reader", 1, 1.0)])
    handle = env.submit(spec)  # no -s and no configured default: local

    # a fresh process follows the logs of an app it did not start, to the end
    r = env.run("logs", "-f", handle)
    assert r.returncode == OK, r.stderr
    for prefix, who in (("trainer/0", "trainer"), ("trainer/1", "trainer"), ("ps/0", "ps"), ("reader/0", "reader")):
        replica = prefix.split("/")[1]
        assert re.search(rf"^{prefix} +{who} says hi from {replica}$", r.stdout, re.M), r.stdout
        assert re.search(rf"^{prefix} +{who} done {replica}$", r.stdout, re.M), r.stdout
    assert "\x1b[" not in r.stdout  # NO_COLOR: plain text

    status = env.status(handle)
    assert status["state"] == "SUCCEEDED"
    by_role = {r["role"]: r["replicas"] for r in status["roles"]}
    assert sorted(by_role) == ["ps", "reader", "trainer"]
    assert len(by_role["trainer"]) == 2 and len(by_role["ps"]) == 1

    table = env.run("status", handle)
    assert table.returncode == OK and "trainer" in table.stdout and "SUCCEEDED" in table.stdout

    one = env.run("logs", handle, "trainer/1").stdout
    assert "trainer says hi from 1" in one and "from 0" not in one and "ps/0" not in one
    err = env.run("logs", handle, "ps", "--streams", "stderr").stdout
    assert "ps err 0" in err and "says hi" not in err
    assert env.run("logs", handle, "--regex", "done", "--since", "1h").stdout.count(" done ") == 4
    assert env.run("logs", handle, "--since", "2000-01-01T00:00:00", "--until", "5m").returncode == OK
    assert env.run("logs", handle, "--since", "yesterday").returncode == USAGE
    r = env.run("logs", handle, "--since", "5")  # no unit: refused, not read as 5 seconds (which showed nothing)
    assert r.returncode == USAGE and "'5' has no unit; give one: 5s, 5m, 5h or 5d" in r.stderr, r.stderr
    assert env.run("logs", handle, "nosuchrole").returncode == USAGE


def test_submit_wait_and_log_exit_codes(env: Env) -> None:
    good = env.spec("good", [role("main", "print('all good')")])
    bad = env.spec("bad", [role("main", "import sys; print('going down'); sys.exit(3)")])

    r = env.run("submit", good, "--wait")
    assert r.returncode == OK, r.stderr
    assert HANDLE_RE.match(r.stdout.strip())

    r = env.run("submit", "--wait", bad)
    assert r.returncode == APP_FAILED, r.stderr
    failed = r.stdout.strip()
    assert env.run("wait", failed).returncode == APP_FAILED
    assert env.status(failed)["state"] == "FAILED"

    r = env.run("run", bad, "--log")  # `run` is submit's alias
    assert r.returncode == APP_FAILED
    assert "main/0" in r.stderr and "going down" in r.stderr
    assert HANDLE_RE.match(r.stdout.strip())


def test_retry_policies(env: Env) -> None:
    """One replica fails its first attempt; each policy retries it once, then the app succeeds."""
    handles = {}
    for policy in ("APPLICATION", "REPLICA", "ROLE"):
        marker = env.tmp / f"tried-{policy}"
        code = (f"import os, sys\nm = {str(marker)!r}\n"
                "if not os.path.exists(m):\n    open(m, 'w').close()\n    sys.exit(1)\nprint('second time lucky')\n")
        spec = env.spec(f"retry-{policy.lower()}", [role("worker", code, max_retries=2, retry_policy=policy)])
        handles[policy] = env.submit(spec)
    for policy, handle in handles.items():
        assert env.run("wait", handle, "--timeout", "30").returncode == OK, policy
        status = env.status(handle)
        assert status["state"] == "SUCCEEDED", (policy, status)
        assert status["num_restarts"] >= 1, (policy, status)


def test_cancel_kills_the_replica_and_its_children(env: Env) -> None:
    pidfile = env.tmp / "child.pid"
    code = ("import subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(child.pid))\nchild.wait()\n")
    handle = env.submit(env.spec("sleeper", [role("sleeper", code)]))
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline, "the replica never started its child"
        time.sleep(0.1)
    child = int(pidfile.read_text())
    assert alive(child)

    r = env.run("cancel", handle)
    assert r.returncode == OK, r.stderr
    assert env.run("wait", handle, "--timeout", "20").returncode == APP_CANCELLED
    assert env.status(handle)["state"] == "CANCELLED"
    assert not wait_gone([child], 10), f"child {child} outlived the cancel"


def test_ddp_without_pytorch_is_refused_before_launch_with_the_fix(env: Env) -> None:
    """`submit dist.ddp ... --log` where torchrun is not installed: exit 2 and how to install it, not every
    replica failing with `torchrun: command not found` (exit 4)."""
    bare = env.tmp / "bin"  # a PATH with a shell and no PyTorch
    bare.mkdir()
    (bare / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "ddp_train"
    r = subprocess.run(env.command("submit", "dist.ddp", "-p", "j=2x1", "-p", "script=train.py", "-p",
                                   f"image={example}", "--log"),
                       capture_output=True, text=True, cwd=env.tmp, env={**env.env, "PATH": str(bare)}, timeout=60)
    assert r.returncode == USAGE, r.stderr
    assert "'torchrun', which its bash -c command starts, is not a command on the replicas' PATH" in r.stderr
    assert "hint: install PyTorch, which provides torchrun: pip install torch" in r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert env.run("list", "--json").stdout.strip() == "[]"  # nothing was submitted


def test_a_bare_app_id_names_the_app_this_machine_knows(env: Env) -> None:
    """`status hello-8yf2ph` for local://torchspec/hello-8yf2ph: the id is found in local's state folder."""
    handle = env.submit(env.spec("bare", [role("main", "print('bare says hi')")]))
    app_id = handle.rsplit("/", 1)[1]
    r = env.run("wait", app_id)
    assert (r.returncode, r.stdout.strip()) == (OK, "SUCCEEDED"), r.stderr
    r = env.run("status", app_id, "--json")
    assert r.returncode == OK and json.loads(r.stdout)["app_handle"] == handle, r.stderr
    assert "bare says hi" in env.run("logs", app_id).stdout
    described = env.run("describe", app_id).stdout  # its provenance as comments, then the app under its name
    assert described.startswith("# from ") and "\nname: bare\n" in described, described
    r = env.run("status", app_id[:-1] + ("x" if app_id[-1] != "x" else "y"))  # a near miss: the handle to use
    assert r.returncode == USAGE and f"hint: did you mean {handle}?" in r.stderr, r.stderr
    r = env.run("status", "nothing-like-it")
    assert r.returncode == USAGE and "no app on this machine has that id" in r.stderr, r.stderr
    r = env.run("delete", app_id)
    assert r.returncode == OK and f"deleted {handle}" in r.stderr, r.stderr


def test_ctrl_c_while_following_says_the_app_keeps_running(env: Env) -> None:
    """Ctrl-C on `wait` or `logs -f` stops the command, not the app: exit 130, and the error says so."""
    handle = env.submit(env.spec("long", [role("main", "import time\nprint('up', flush=True)\ntime.sleep(300)")]))
    try:
        for command, stream in ((("wait", handle), "stderr"), (("logs", "-f", handle), "stdout")):
            proc = env.popen(*command)
            # it follows: the first state change, or log line, is printed where Ctrl-C means "keeps running"
            ready, _, _ = select.select([getattr(proc, stream)], [], [], 120)
            if not ready:
                finish(proc, timeout=0)  # fails, saying what it printed
            assert getattr(proc, stream).readline(), command
            proc.send_signal(signal.SIGINT)
            _, err = finish(proc, timeout=120)
            assert proc.returncode == 130, (command, err)
            assert f"error: aborted: {handle} keeps running\n  hint: stop it with: torchspec cancel {handle}\n" in err
            assert "Traceback" not in err
        assert env.status(handle)["state"] == "RUNNING"
    finally:
        assert env.run("cancel", handle).returncode == OK


def test_concurrent_submits_list_and_describe(env: Env) -> None:
    spec = env.spec("twin", [role("main", "print('twin')")])
    procs = [env.popen("submit", spec, "-s", "local"), env.popen("submit", spec)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [OK, OK], [o[1] for o in outs]
    handles = [o[0].strip() for o in outs]
    assert len(set(handles)) == 2 and all(HANDLE_RE.match(h) for h in handles)
    for h in handles:
        assert env.run("wait", h, "--timeout", "30").returncode == OK

    r = env.run("list", "--json")
    assert r.returncode == OK, r.stderr
    listed = {app["app_handle"]: app for app in json.loads(r.stdout)}
    assert set(handles) <= set(listed)
    assert {listed[h]["state"] for h in handles} == {"SUCCEEDED"}
    plain = env.run("list", "-s", "local")
    assert plain.returncode == OK and all(h.rsplit("/", 1)[1] in plain.stdout for h in handles)

    r = env.run("describe", handles[0], "--json")
    assert r.returncode == OK, r.stderr
    app = json.loads(r.stdout)
    # another process than the submitter: the scheduler knows the roles and the app's name, and what torchspec
    # added on the way (TORCHSPEC_JOB_ID) shows only with --all
    assert app["name"] == "twin" and app["roles"][0]["name"] == "main"
    assert app["roles"][0]["args"] == ["-c", "print('twin')"]
    assert "TORCHSPEC_JOB_ID" not in (app["roles"][0].get("env") or {})
    everything = json.loads(env.run("describe", handles[0], "--all", "-o", "json").stdout)
    assert everything["roles"][0]["env"]["TORCHSPEC_JOB_ID"] == handles[0].rsplit("/", 1)[0] + "/${app_id}"
    assert env.run("describe", handles[0]).returncode == OK


def test_dryrun_submits_nothing(env: Env) -> None:
    spec = env.spec("dry", [role("main", "print('dry')", 2)])
    r = env.run("dryrun", spec, "-s", "local")
    assert r.returncode == OK, r.stderr
    assert "main" in r.stdout and "\x1b[" not in r.stdout
    listed = env.run("list", "--json")
    assert listed.returncode == OK and json.loads(listed.stdout) == []


def test_info_commands(env: Env) -> None:
    r = env.run("runopts", "local")
    assert r.returncode == OK and "usage" in r.stdout
    assert env.run("runopts").returncode == OK
    r = env.run("schedulers")
    assert r.returncode == OK and re.search(r"^local\b.*default", r.stdout, re.M), r.stdout
    r = env.run("builtins")
    assert r.returncode == OK and "utils.echo" in r.stdout
    r = env.run("config")
    assert r.returncode == OK and "default_scheduler" in r.stdout, r.stderr

    project = env.tmp / ".torchspec.toml"
    project.write_text('default_scheduler = "local"\n[scheduler.local]\nkill_grace_s = 2\n')
    settings = {s["key"]: s for s in json.loads(env.run("config", "--json").stdout)["settings"]}
    assert settings["scheduler.local.kill_grace_s"] == {"key": "scheduler.local.kill_grace_s", "value": 2,
                                                          "source": str(project)}
    assert "kill grace: 2s" in env.run("dryrun", "utils.echo").stdout  # the config's run option applies
    project.write_text('default_scheduler = "lokal"\n')
    r = env.run("submit", "utils.echo")
    assert r.returncode == USAGE and "did you mean 'local'" in r.stderr.lower(), r.stderr
    project.unlink()

    r = env.run("--help")
    assert all(c in r.stdout for c in ("submit", "status", "logs", "cancel", "wait", "runopts", "builtins"))


def test_errors_are_one_message_and_an_exit_code(env: Env) -> None:
    spec = env.spec("ok", [role("main", "print('ok')")])

    r = env.run("submit", spec, "-s", "locl")
    assert r.returncode == USAGE and "did you mean 'local'" in r.stderr.lower(), r.stderr
    r = env.run("status", "local://torchspec/no-such-app")
    assert r.returncode == USAGE and "no-such-app" in r.stderr
    assert env.run("status", "not-a-handle").returncode == USAGE
    assert env.run("logs", "locl://s/app").returncode == USAGE
    assert env.run("cancel", "local://torchspec/no-such-app").returncode == USAGE
    r = env.run("submit", spec, "-c", "no_such_option=1")
    assert r.returncode == USAGE and "no run option 'no_such_option'" in r.stderr, r.stderr
    r = env.run("runopts", "locl")
    assert r.returncode == USAGE and "local" in r.stderr

    broken = env.tmp / "broken.yaml"
    broken.write_text("name: broken\nroles:\n  - name: main\n    image: .\n    entrypoint: x\n    num_replica: 2\n")
    r = env.run("submit", str(broken))
    assert r.returncode == SPEC_ERROR and "num_replicas" in r.stderr
    assert env.run("submit", str(env.tmp / "missing.yaml")).returncode == USAGE
    assert env.run("list", "--json").stdout.strip() == "[]"  # nothing was submitted


def test_a_bad_run_option_is_one_line_saying_what_was_expected(env: Env) -> None:
    """No table of every option, no Python text (int('ten')): the listing is `torchspec runopts` on request."""
    spec = env.spec("ok", [role("main", "print('ok')")])
    r = env.run("dryrun", spec, "-c", "kill_grace_s=ten")
    assert r.returncode == USAGE
    assert r.stderr.splitlines() == ["error: run option kill_grace_s=ten: expected a whole number",
                                     "  hint: the run options of local, with types: torchspec runopts local"]
    r = env.run("dryrun", spec, "-c", "kill_grace=3,use_cwd=maybe")
    assert r.returncode == USAGE
    assert r.stderr.splitlines()[:3] == [
        "error: 2 problems with the run options of local:",
        "  - local has no run option 'kill_grace' (did you mean 'kill_grace_s'?)",
        "  - run option use_cwd=maybe: expected true or false (or yes/no, on/off, 1/0)"]
    assert len(r.stderr.splitlines()) == 4 and "usage" not in r.stderr
    r = env.run("dryrun", spec, "-c", "kill_grace=3")  # the did-you-mean is the fix: nothing more to say
    assert (r.returncode, r.stderr) == (USAGE, "error: local has no run option 'kill_grace'"
                                                " (did you mean 'kill_grace_s'?)\n")


# --- the pieces behind the commands, in-process (no scheduler needed) ---------------------------------------------


def test_console_helpers_plain_and_stable() -> None:
    import io

    from torchspec.cli import console

    assert console.replica_color("trainer", 0) == console.replica_color("trainer", 0)
    assert console.log_prefix("ps", 1, color=False, width=9) == "ps/1      "
    assert console.log_prefix("ps", 1, color=True).startswith("\x1b[")
    out = io.StringIO()
    console.table(["ROLE", "STATE", "MESSAGE"], [["trainer", "FAILED", "boom\x1b[31m\nnext"]], stream=out, color=False)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["ROLE", "STATE", "MESSAGE"]
    assert "\x1b" not in out.getvalue() and len(lines) == 2  # control characters shown, never obeyed


def test_app_exit_codes() -> None:
    from torchspec.exit_codes import for_app_state as app_exit_code
    from torchspec.specs import AppState

    assert [app_exit_code(s) for s in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED, AppState.UNKNOWN)] \
        == [OK, APP_FAILED, APP_CANCELLED, APP_FAILED]
