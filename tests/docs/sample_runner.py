"""Run a page's shell samples as written and compare what they print with what the page shows.

A sample is a fenced block whose lines starting with ``$ `` are commands; the lines after one, up to the next
``$ `` or the block's end, are what it prints: stdout and stderr together, as a terminal shows them (a block
whose command prints nothing to either shows nothing). The commands of a :class:`Session` run one by one, each
in its own ``bash``, in order, in one folder: ``cd`` carries over to the next command, and so does the exit
status, so ``$ echo $?`` prints the one before. ``torchspec`` is this checkout's CLI (a shim on ``PATH``).

Two things in a page's sample are not what a run prints byte for byte:

- a line holding only ``...`` stands for one or more lines left out;
- random parts, given as a regex with groups ``stable`` and ``random`` (an app id's name and its suffix):
  the n-th distinct random part seen after a ``stable`` value in the page's samples stands for the n-th one
  the run printed after that value, for the whole session, so a page that shows one app id twice must see
  the same app twice.

(Named ``sample_runner``, not ``samples``: ``samples/`` beside it is the folder of the files samples use.)
"""

from __future__ import annotations

import contextlib
import difflib
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Pattern, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: an app id's random suffix (`hello-k3x9q2`), wherever it ends (a quote, a path, `,`, `@`), and after
#: `torchspec-` too (a docker network's name)
APP_ID = re.compile(r"(?:(?<![\w-])|(?<=torchspec-))(?P<stable>[a-z][a-z0-9]*)-(?P<random>[a-z0-9]{6})(?!\w)")
SAMPLES = pathlib.Path(__file__).resolve().parent / "samples"
PROMPT = "$ "
ELISION = "..."


@dataclass(frozen=True)
class Block:
    """A fenced block of a Markdown page: where it opens (1-based), its info string, the heading it is under,
    and its text with the fence's indentation taken off (nested shorter fences are text)."""

    path: pathlib.Path
    line: int
    info: str
    heading: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def is_sample(self) -> bool:
        return any(line.startswith(PROMPT) for line in self.text.splitlines())


@dataclass(frozen=True)
class Step:
    """One ``$ `` command of a block, at its page line, with what the page says it prints."""

    command: str
    shown: str
    where: str


def blocks(path: pathlib.Path) -> List[Block]:
    """Every fenced block of ``path``, in order (```` ```` ```` fences may hold ```` ``` ```` ones)."""
    found: List[Block] = []
    lines = path.read_text().splitlines()
    heading = ""
    i = 0
    while i < len(lines):
        opening = re.match(r"^( *)(`{3,})(.*)$", lines[i])
        if not opening:
            if lines[i].startswith("#"):
                heading = lines[i].lstrip("#").strip()
            i += 1
            continue
        indent, fence, info = len(opening.group(1)), opening.group(2), opening.group(3).strip()
        body: List[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^ *{fence}`*\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        found.append(Block(path, i - len(body), info, heading, "".join(line + "\n" for line in body)))
        i += 1
    return found


#: a first line that is a comment naming only the file a block shows: ``# jobs/train.yaml``, ``{# lib/images.j2 #}``
NAMED_FILE = re.compile(r"^(?:#|\{#-?)[ \t]*(?P<path>[\w.-][\w./-]*\.[A-Za-z0-9]+)[ \t]*(?:-?#\})?[ \t]*$")


def named_path(block: Block) -> Optional[str]:
    """The relative path a block's first line names (see :data:`NAMED_FILE`), or None."""
    match = NAMED_FILE.match(block.text.split("\n", 1)[0])
    if not match:
        return None
    path = match.group("path")
    assert ".." not in pathlib.PurePosixPath(path).parts, f"{block.where}: {path} is outside the folder"
    return path


def write_named(found: Iterable[Block], folder: pathlib.Path) -> List[pathlib.Path]:
    """Write each of ``found`` that names its file (:func:`named_path`) under ``folder``, as shown; the paths."""
    written = []
    for block in found:
        name = named_path(block)
        if name is not None:
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.text)
            written.append(path)
    return written


def samples(paths: Iterable[pathlib.Path]) -> List[Block]:
    """The blocks of ``paths`` that hold a ``$ `` command."""
    return [block for path in paths for block in blocks(path) if block.is_sample()]


def steps(block: Block) -> List[Step]:
    """The commands of a sample block with what each prints."""
    lines = block.text.splitlines()
    assert lines and lines[0].startswith(PROMPT), f"{block.where}: a sample starts with a `$ ` command"
    found: List[Step] = []
    for number, line in enumerate(lines):
        if line.startswith(PROMPT):
            found.append(Step(line[len(PROMPT):], "", f"{block.path.relative_to(ROOT)}:{block.line + 1 + number}"))
        else:
            last = found[-1]
            found[-1] = Step(last.command, last.shown + line + "\n", last.where)
    return found


def matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is ``shown``, a line of only ``...`` in it standing for one or more lines."""
    pattern = "".join(r"(?:[^\n]*\n)+" if line.strip() == ELISION else re.escape(line + "\n")
                      for line in shown.splitlines())
    return re.fullmatch(pattern, printed) is not None


@dataclass
class Randoms:
    """What random parts of the page stand for which of the run (see the module's docstring)."""

    pattern: Pattern[str]
    shown: Dict[str, List[str]] = field(default_factory=dict)
    printed: Dict[str, List[str]] = field(default_factory=dict)

    def learn(self, text: str, seen: Dict[str, List[str]]) -> None:
        for match in self.pattern.finditer(text):
            parts = seen.setdefault(match.group("stable"), [])
            if match.group("random") not in parts:
                parts.append(match.group("random"))

    def as_shown(self, printed: str) -> str:
        """``printed`` with each random part the page's own, where the page has one for it."""
        self.learn(printed, self.printed)

        def swap(match: "re.Match[str]") -> str:
            stable, random = match.group("stable"), match.group("random")
            index = self.printed[stable].index(random)
            names = self.shown.get(stable, [])
            if index >= len(names):
                return match.group(0)
            start, end = match.span("random")
            return match.group(0)[:start - match.start()] + names[index] + match.group(0)[end - match.start():]

        return self.pattern.sub(swap, printed)

    def as_printed(self, command: str) -> str:
        """``command`` as the run must type it: each random part the page shows (an app id it printed before)
        swapped for the run's own."""

        def swap(match: "re.Match[str]") -> str:
            stable, random = match.group("stable"), match.group("random")
            names, printed = self.shown.get(stable, []), self.printed.get(stable, [])
            if random not in names or names.index(random) >= len(printed):
                return match.group(0)
            start, end = match.span("random")
            return (match.group(0)[:start - match.start()] + printed[names.index(random)]
                    + match.group(0)[end - match.start():])

        return self.pattern.sub(swap, command)


@contextlib.contextmanager
def examples_session(tmp: pathlib.Path, env: Optional[Dict[str, str]] = None) -> Iterator["Session"]:
    """A session in ``tmp/work``, which holds a copy of the repository's examples/ (what most pages' commands
    name), app ids random (:data:`APP_ID`), in ``env`` (default :func:`sample_env`); every local app it leaves
    running is cancelled at the end."""
    shutil.copytree(ROOT / "examples", tmp / "work" / "examples")
    session = Session(tmp / "work", sample_env(tmp) if env is None else env, Randoms(APP_ID))
    try:
        yield session
    finally:
        cancel_running(session)


def run_samples(session: "Session", found: Iterable[Block], timeout: float = 120) -> None:
    """Run the blocks' commands in order in ``session``, then check that each printed what its page shows."""
    for block in found:
        session.run(steps(block), timeout=timeout)
    session.check()


def cancel_running(session: "Session", scheduler: str = "local") -> None:
    """Cancel every app of ``scheduler`` that the session's environment knows and that has not ended, then
    check that none is left (a test's clean-up: a sample that failed half way may leave one running)."""
    torchspec = shutil.which("torchspec", path=session.env["PATH"])
    assert torchspec, "no torchspec on the session's PATH"

    def live() -> List[str]:
        listed = subprocess.run([torchspec, "list", "-s", scheduler], env=session.env, capture_output=True,
                                text=True, timeout=60)
        rows = [line.split() for line in listed.stdout.splitlines()[1:]]
        return [row[0] for row in rows if len(row) > 1 and row[1] not in ("SUCCEEDED", "FAILED", "CANCELLED")]

    for handle in live():
        subprocess.run([torchspec, "cancel", handle], env=session.env, capture_output=True, timeout=60)
    assert not live()


def sample_env(tmp: pathlib.Path, **extra: str) -> Dict[str, str]:
    """An environment of its own under ``tmp``: state, config, HOME and git's identity; this checkout's
    ``torchspec`` first on PATH; no colour, 200 columns; ``extra`` on top."""
    shims = tmp / "bin"
    shims.mkdir(parents=True, exist_ok=True)
    shim = shims / "torchspec"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m torchspec "$@"\n')
    shim.chmod(0o755)
    env = {name: value for name, value in os.environ.items()
           if name not in {"FORCE_COLOR", "TORCHSPEC_DEBUG", "KUBECONFIG", "TORCHXCONFIG"}
           and not name.startswith("GIT_")}
    env.update(PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]),
               NO_COLOR="1", COLUMNS="200", HOME=str(tmp / "home"), TORCHSPEC_HOME=str(tmp / "state"),
               XDG_CONFIG_HOME=str(tmp / "xdg"), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="Ada",
               GIT_AUTHOR_EMAIL="ada@example.com", GIT_COMMITTER_NAME="Ada", GIT_COMMITTER_EMAIL="ada@example.com")
    env.update(extra)
    return env


@dataclass
class Session:
    """A shell session in ``cwd`` with ``env``: runs steps in order and keeps what each printed."""

    cwd: pathlib.Path
    env: Dict[str, str] = field(repr=False)
    randoms: Optional[Randoms] = None
    status: int = 0
    ran: List[Tuple[Step, str]] = field(default_factory=list, repr=False)  # each step, what it printed

    def run(self, block_steps: List[Step], timeout: float = 120) -> None:
        if self.randoms:
            for step in block_steps:
                self.randoms.learn(step.shown, self.randoms.shown)
        where = pathlib.Path(tempfile.mkdtemp()) / "cwd"
        for step in block_steps:
            command = self.randoms.as_printed(step.command) if self.randoms else step.command
            script = (f"cd {shlex.quote(str(self.cwd))} && (exit {self.status})\n{command}\n"
                      f"status=$?; pwd > {shlex.quote(str(where))}; exit $status\n")
            done = subprocess.run(["bash", "-c", script], env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout)
            self.status = done.returncode
            self.cwd = pathlib.Path(where.read_text().strip())
            printed = self.randoms.as_shown(done.stdout) if self.randoms else done.stdout
            self.ran.append((step, printed))
        shutil.rmtree(where.parent)

    def check(self) -> None:
        """Fails with a unified diff (the page's text against the run's) for each step that printed otherwise."""
        assert self.ran, "no sample was run"
        problems = []
        for step, printed in self.ran:
            assert "Traceback" not in printed, f"{step.where}: $ {step.command}\n{printed}"
            if not matches(step.shown, printed):
                diff = difflib.unified_diff(step.shown.splitlines(), printed.splitlines(), "the page", "the run",
                                            lineterm="", n=2)
                elided = any(line.strip() == ELISION for line in step.shown.splitlines())
                note = f" (a line of only `{ELISION}` there stands for lines left out)" if elided else ""
                problems.append(f"{step.where}: $ {step.command}{note}\n" + "\n".join(diff))
        assert not problems, "what the page shows is not what the commands print:\n\n" + "\n\n".join(problems)
