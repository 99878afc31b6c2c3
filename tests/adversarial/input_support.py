"""What the input-side adversarial tests share: running the real CLI, and checking an outcome is clean.

A hostile input must end in a coded diagnostic or a refusal with the
documented exit code, never a traceback and never an interpreter crash
(which is why deep-nesting cases run the CLI in a subprocess: a crash there
fails the test instead of killing the test run).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

from torchspec.errors import Diagnostic
from torchspec.exit_codes import ExitCode
from torchspec.loader import LoadOptions, load_text

ROOT = pathlib.Path(__file__).resolve().parents[2]

SPEC = """\
name: app
roles:
  - name: a
    image: .
    entrypoint: echo
    args: ["hi"]
"""


def cli(*args: str, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``torchspec ARGS`` in a fresh interpreter (this tree first on the path), output captured."""
    full_env = dict(os.environ, NO_COLOR="1", PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])), **(env or {}))
    return subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=full_env, timeout=timeout, errors="replace")


def assert_clean(result: subprocess.CompletedProcess[str], code: ExitCode, *expected: str) -> str:
    """The command exited with ``code`` (not a crash, not exit 3) and printed each of ``expected``; its output."""
    output = result.stdout + result.stderr
    assert result.returncode == code, f"exit {result.returncode}, wanted {int(code)}:\n{output[-3000:]}"
    assert "Traceback" not in output, output[-3000:]
    assert "internal error" not in output, output[-3000:]
    for text in expected:
        assert text in output, f"{text!r} not in:\n{output[-3000:]}"
    return output


def problems(text: str, fmt: str = "yaml", path: str | None = None, **options: Any) -> list[Diagnostic]:
    """Every diagnostic loading ``text`` gives (never an exception: that would fail the test)."""
    loaded = load_text(text, path or f"spec.{fmt}", fmt, LoadOptions(**options))
    return loaded.all_diagnostics()


def first_error(text: str, fmt: str = "yaml", **options: Any) -> Diagnostic:
    """The first error loading ``text`` gives; fails when it loads cleanly."""
    errors = [d for d in problems(text, fmt, **options) if d.is_error]
    assert errors, f"expected an error for {text[:200]!r}"
    return errors[0]


def assert_error_at(text: str, fmt: str, code: str, where: tuple[int, int], message: str) -> Diagnostic:
    """The first error loading ``text`` is ``code`` at (line, column) ``where`` and says ``message``."""
    d = first_error(text, fmt)
    assert (d.code, d.line, d.column) == (code, *where), str(d)
    assert message in d.message, str(d)
    return d
