"""Lint of many files divides them among forked processes: the result is the one a single process gives."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import torchspec.lint as lint_module
from process_support import children, cpu_seconds, finish, ignores, interruptible
from torchspec.lint import PARALLEL_FROM, LintOptions, jobs_for, lint_paths

GOOD = "name: ok-{n}\nroles:\n  - name: r\n    image: img\n    entrypoint: echo\n    num_replicas: {r}\n"
BAD = "name: bad-{n}\nroles:\n  - name: r\n    image: img\n    entrypoint: echo\n    num_replica: 2\n"
TEMPLATED = ("name: t-{n}\nparams:\n  k: {{type: integer, default: 2}}\nroles:\n  - name: r\n    image: img\n"
             "    entrypoint: echo\n    args: [\"{{{{ env('HOME') }}}}\", \"{{{{ k * 3 }}}}\"]\n")


@pytest.fixture
def folder(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "specs"
    for n in range(PARALLEL_FROM * 2):
        sub = root / f"team{n % 5}"
        sub.mkdir(parents=True, exist_ok=True)
        text = (BAD if n % 9 == 4 else TEMPLATED if n % 7 == 2 else GOOD).format(n=n, r=n % 3 + 1)
        (sub / f"spec{n:03d}.yaml").write_text(text)
    (root / "notes.yaml").write_text("just: data\n")  # not a spec: skipped in either case
    (root / "outside.yaml").symlink_to(tmp_path / "elsewhere.yaml")  # skipped with a note
    (tmp_path / "elsewhere.yaml").write_text(GOOD.format(n=0, r=1))
    return root


@pytest.fixture
def single_threaded(monkeypatch) -> None:
    """Earlier tests of this session may have left threads of their own (servers, watchers)."""
    monkeypatch.setattr(lint_module, "_fork_is_safe", lambda: True)


def test_many_files_lint_in_processes_to_the_same_result(folder: pathlib.Path, monkeypatch,
                                                         single_threaded) -> None:
    used: list[int] = []
    real = lint_module._lint_in_processes

    def spy(found, options, jobs):
        used.append(jobs)
        return real(found, options, jobs)

    monkeypatch.setattr(lint_module, "_lint_in_processes", spy)
    alone = lint_paths([str(folder)], LintOptions(jobs=1))
    assert not used
    shared = lint_paths([str(folder)], LintOptions(jobs=2))
    assert used == [2]
    assert shared.files == alone.files and len(alone.files) == PARALLEL_FROM * 2
    assert [d.to_dict() for d in shared.diagnostics] == [d.to_dict() for d in alone.diagnostics]
    assert {d.code for d in alone.diagnostics} == {"TS202"}
    assert shared.env_read == alone.env_read and alone.env_read
    assert shared.notes == alone.notes and any("outside.yaml" in note for note in alone.notes)


def test_how_many_processes(single_threaded) -> None:
    cpus = len(os.sched_getaffinity(0))
    assert jobs_for(0, PARALLEL_FROM - 1) == 1  # few files: not worth a process
    assert jobs_for(1, 10_000) == 1
    assert jobs_for(0, 10_000) == cpus
    assert jobs_for(3, 10_000) == 3
    assert jobs_for(8, PARALLEL_FROM) == 2  # at most one per PARALLEL_FROM // 2 files


def test_beside_another_thread_lint_stays_in_this_process() -> None:
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert jobs_for(4, 10_000) == 1
    finally:
        stop.set()
        thread.join()


def test_the_cli_reports_alike_with_one_or_more_jobs_and_checks_the_config(folder: pathlib.Path) -> None:
    def lint(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "torchspec", "lint", *args], capture_output=True, text=True,
                              cwd=cwd, env=dict(os.environ, NO_COLOR="1"))

    one, two = lint("-j", "1", str(folder)), lint("-j", "2", "--format", "text", str(folder))
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout and "TS202" in one.stdout
    (folder / ".torchspec.toml").write_text("[lint]\njobs = -2\n")
    bad = lint(".", cwd=folder)
    assert bad.returncode == 2 and "lint.jobs" in bad.stderr and "-2" in bad.stderr, bad.stderr


def test_ctrl_c_stops_every_lint_process_quietly(tmp_path: pathlib.Path) -> None:
    """Ctrl-C reaches the whole foreground process group: one message, exit 130, no traceback from any
    process, none left behind."""
    import signal

    slow = ("name: slow-{n}\nroles:\n  - name: r\n    image: img\n    entrypoint: echo\n"
            "    args: [\"{{% for i in range(100000) %}}{{% for j in range(100000) %}}{{% endfor %}}{{% endfor %}}\"]\n")
    folder = tmp_path / "slow-specs"
    folder.mkdir()
    for n in range(PARALLEL_FROM):
        (folder / f"spec{n}.yaml").write_text(slow.format(n=n))
    for jobs in ("0", "1"):
        # interruptible: SIGINT at its default even where this test run was started ignoring it
        proc = subprocess.Popen(interruptible([sys.executable, "-m", "torchspec", "lint", "-j", jobs, str(folder)]),
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            wait_until(lambda: every_process_renders(proc.pid), READY_S, f"lint -j {jobs} to render templates")
        except AssertionError:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        os.killpg(proc.pid, signal.SIGINT)
        _, err = finish(proc, timeout=120)
        assert proc.returncode == 130, err
        assert err.strip() == "error: aborted", err
        left = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True).stdout.split()
        assert not left, left


#: How long lint may take to start rendering; the wait ends as soon as it does.
READY_S = 120.0
#: CPU time that says a process renders a template: a worker (forked: its own time starts at 0) does nothing
#: else; lint alone starts up in ~0.1 s, and a template runs for its whole budget.
WORKER_RENDERS_CPU_S, ALONE_RENDERS_CPU_S = 0.3, 1.0


def every_process_renders(lint: int) -> bool:
    """Whether every process of a lint run is rendering a (slow) template: its workers, each past the
    initializer that leaves Ctrl-C to the parent (SIGINT ignored), when it forked some, else itself.

    Work done, not time passed: on a loaded machine, 2 s after the start a process may still be importing.
    Workers are all forked before the first file is handed out, so once one renders they are all there.
    """
    import signal

    workers = children(lint)
    if not workers:
        return cpu_seconds(lint) >= ALONE_RENDERS_CPU_S
    return all(ignores(pid, signal.SIGINT) and cpu_seconds(pid) >= WORKER_RENDERS_CPU_S for pid in workers)


def wait_until(condition, timeout: float, what: str) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)
