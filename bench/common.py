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


def runner_options(ap: argparse.ArgumentParser) -> None:
    """``--runner`` (how to run torchspec) and ``--fail-on-miss``, as every benchmark takes them."""
    ap.add_argument("--runner", choices=["auto", "script", "module"], default="auto",
                    help="how to run torchspec: its console script or python -m torchspec")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a target is missed")


def timed(cmd: list[str], env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """Seconds ``cmd`` took, and its stdout; an exit status not in ``ok`` stops the benchmark."""
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
