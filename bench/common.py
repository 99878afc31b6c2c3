"""Helpers every benchmark under bench/ uses: finding torchspec, medians, durations, processes.

Imported by path-less name (``from common import ...``): Python puts this
folder first on ``sys.path`` when a benchmark runs as a script.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def find_torchspec(mode: str) -> list[str] | None:
    """The command that runs torchspec: the console script beside sys.executable
    (``mode`` "script" or "auto"), else ``python -m torchspec`` ("module" or "auto")."""
    script = Path(sys.executable).parent / ("torchspec.exe" if os.name == "nt" else "torchspec")
    if mode in ("auto", "script") and script.exists():
        return [str(script)]
    if mode == "script":
        return None
    try:
        ok = importlib.util.find_spec("torchspec.__main__") is not None
    except ImportError:
        ok = False
    return [sys.executable, "-m", "torchspec"] if ok else None


def as_installed(cache_dir: Path) -> dict[str, str]:
    """Put the torchspec being measured in the state a user's install is in; the env entries for that.

    Its bytecode is compiled (pip compiles on install; where
    PYTHONDONTWRITEBYTECODE is set, a source checkout would otherwise be
    compiled again by every run, ~40 ms of each command), and its entry-point
    cache is the benchmark's own (``XDG_CACHE_HOME``: a cache shared with
    other processes on the machine may be evicted by them between two runs).
    The first, uncounted round of each benchmark fills that cache.
    """
    import compileall

    spec = importlib.util.find_spec("torchspec")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(folder, quiet=2)
    return {"XDG_CACHE_HOME": str(cache_dir)}


def bench_env(work: Path) -> dict[str, str]:
    """The environment torchspec runs in for a benchmark: a TORCHSPEC_HOME of its own, no colour, as installed."""
    return {**os.environ, "TORCHSPEC_HOME": str(work / "home"), "NO_COLOR": "1", **as_installed(work / "cache")}


def runner_options(ap: argparse.ArgumentParser) -> None:
    """``--runner`` (how to run torchspec) and ``--fail-on-miss``, as every benchmark takes them."""
    ap.add_argument("--runner", choices=["auto", "script", "module"], default="auto",
                    help="how to run torchspec: its console script or python -m torchspec")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a target is missed")


def parse_and_find(ap: argparse.ArgumentParser) -> tuple[argparse.Namespace, list[str]]:
    """The benchmark's arguments (with --runner and --fail-on-miss added) and the torchspec command to time."""
    runner_options(ap)
    args = ap.parse_args()
    return args, torchspec_or_exit(args.runner)


def torchspec_or_exit(mode: str) -> list[str]:
    """:func:`find_torchspec`, or exit 2 saying how to install it."""
    ts = find_torchspec(mode)
    if ts is None:
        print("torchspec is not installed (pip install -e .)", file=sys.stderr)
        sys.exit(2)
    return ts


def timed(cmd: list[str], env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """Seconds ``cmd`` took (one blocking run) and its stdout; an exit code not in ``ok`` stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-800:]}")
    return elapsed, proc.stdout


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt_s(t: float) -> str:
    """A duration for a table column: milliseconds under a second, "-" for none (nan)."""
    if t != t:  # nan
        return "-"
    return f"{t * 1000:8.1f} ms" if t < 1 else f"{t:8.3f} s "


def proc_matches(needles: list[bytes]) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose command line holds one of ``needles``."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            if not any(n in cmdline for n in needles):
                continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
        except (OSError, IndexError):
            continue
        found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")[:160]))
    return found
