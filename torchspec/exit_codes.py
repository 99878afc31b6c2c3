"""The exit codes of ``torchspec``: one table that the code, ``--help`` and the documentation all come from.

Scripts branch on these numbers (``torchspec wait H || handle_failure``), so
they are stable: a code is never reused for another meaning.  ``--help`` and
the site's exit code page (docs/hooks.py, at build time) are generated from
:class:`ExitCode`, so the documentation cannot drift.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Optional


class ExitCode(IntEnum):
    """What a ``torchspec`` command's exit status means."""

    OK = 0
    SPEC_ERROR = 1
    #: ``torchspec diff``: the specs differ (as ``git diff --exit-code``); ``apply --plan``: something to do;
    #: the same number as SPEC_ERROR
    CHANGES = 1
    USAGE = 2
    INTERNAL = 3
    APP_FAILED = 4
    APP_CANCELLED = 5
    BACKEND = 6
    DIFF_INCOMPLETE = 7
    TIMEOUT = 124
    INTERRUPTED = 130

    def __str__(self) -> str:
        """The number, as on Python 3.11+ (3.10's IntEnum would print ``ExitCode.OK``)."""
        return str(self.value)

    @property
    def summary(self) -> str:
        """One line for ``--help``."""
        return _SUMMARY[self]

    @property
    def meaning(self) -> str:
        """The full meaning, for the documentation (Markdown)."""
        return _MEANING[self]


_SUMMARY = {
    ExitCode.OK: "ok; with wait and submit --wait/--log: the app SUCCEEDED",
    ExitCode.SPEC_ERROR: "spec errors found; diff: the specs differ; apply --plan: something to do",
    ExitCode.USAGE: "usage error (bad option, unknown scheduler, component or app handle)",
    ExitCode.INTERNAL: "internal error",
    ExitCode.APP_FAILED: "the app FAILED (wait, submit --wait/--log)",
    ExitCode.APP_CANCELLED: "the app was CANCELLED (wait, submit --wait/--log)",
    ExitCode.BACKEND: "the scheduler's backend cannot be reached or refused the request (apply: a step failed)",
    ExitCode.DIFF_INCOMPLETE: "diff: a side of a spec does not load; apply --plan: a spec has errors",
    ExitCode.TIMEOUT: "wait --timeout ran out before the app ended; apply: the lock was not free in time",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}

_MEANING = {
    ExitCode.OK: "success; lint found no errors (warnings alone do not fail unless `--strict`); with `wait` or "
                 "`submit --wait/--log`, the app SUCCEEDED",
    ExitCode.SPEC_ERROR: "the spec has errors (lint found errors, or a command could not load the spec; with "
                         "`apply`, the specs with errors were not submitted and the others were, unless "
                         "`--all-or-nothing`); with `diff`: the specs differ, as `git diff --exit-code` says it; "
                         "with `apply --plan`: there is something to create, replace or prune",
    ExitCode.USAGE: "usage error: bad option or value, a missing file, an unknown lint code, scheduler, component "
                    "or app handle, a bad `-c` run option, an app the scheduler cannot run as written (a program "
                    "its replicas would not find, such as `torchrun` without PyTorch), a package that an extra "
                    "installs is missing (the hint names the extra, e.g. `pip install 'torchspec-cli[ray]'`)",
    ExitCode.INTERNAL: "internal error: a bug in torchspec (`TORCHSPEC_DEBUG=1` shows the traceback)",
    ExitCode.APP_FAILED: "the app FAILED (`wait`, `submit --wait/--log`)",
    ExitCode.APP_CANCELLED: "the app was CANCELLED (`wait`, `submit --wait/--log`), or removed while `wait` "
                            "watched it (a cancel on docker or kubernetes removes the app)",
    ExitCode.BACKEND: "the scheduler's backend cannot be reached or refused the request: no Docker engine, an image "
                      "that cannot be found or pulled, a network that does not exist, a damaged `local` app folder, "
                      "no Ray cluster at the dashboard address; with `apply`, a submission or cancel failed, or "
                      "`--lock kubernetes` lost its Lease (what was done stays recorded on the jobs; run it again to "
                      "go on)",
    ExitCode.DIFF_INCOMPLETE: "`diff`: a side of a spec file does not load (its errors are reported, and the other "
                              "files are still compared); `apply --plan`: a spec does not load or its dry run fails",
    ExitCode.TIMEOUT: "`wait --timeout` ran out before the app ended; `apply`: another `apply` held the lock "
                      "longer than `--lock-timeout`",
    ExitCode.INTERRUPTED: "interrupted with Ctrl-C (the app keeps running; `torchspec cancel` stops it)",
}


def for_app_state(state: Optional[object]) -> ExitCode:
    """How an app ended, as an exit code: SUCCEEDED 0, CANCELLED 5, anything else 4."""
    name = str(state) if state is not None else "UNKNOWN"
    return {"SUCCEEDED": ExitCode.OK, "CANCELLED": ExitCode.APP_CANCELLED}.get(name, ExitCode.APP_FAILED)


def help_text() -> str:
    """The exit-code block of ``torchspec --help``."""
    return "\n".join(f"  {int(code):<3}  {code.summary}" for code in ExitCode)


__all__ = ["ExitCode", "for_app_state", "help_text"]
