"""How this torchspec was installed: the command that adds an extra, and what ``torchspec --version`` says.

Read only when asked (a missing extra's hint, ``--version``), from files next to the package: the
``.dist-info`` folder's ``INSTALLER`` (``pip``, ``uv``), a pipx or uv tool environment's own file in
``sys.prefix``, a source checkout's ``.git``. The standard library only, and no process is started:
the commit of a checkout is read from ``.git`` itself.
"""

from __future__ import annotations

import glob
import os
import shlex
import sys
from typing import Dict, List, Optional

from torchspec.version import DIST_NAME, __version__

#: the package's folder, and the folder it sits in (a checkout's root, or site-packages)
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(PACKAGE_DIR)

#: a third-party module (its top-level name) -> the extra that installs it
EXTRA_OF_MODULE: Dict[str, str] = {
    "docker": "docker", "requests": "docker", "kubernetes": "kubernetes", "urllib3": "kubernetes",
    "kubernetes_validate": "kubernetes-validate", "ray": "ray", "starlette": "ui", "uvicorn": "ui",
    "pygls": "lsp", "lsprotocol": "lsp", "torch": "torch", "fsspec": "tracker",
    "mlflow": "mlflow",
}

#: what each extra installs, for ``pipx inject`` where the installed metadata cannot be read
#: (tests/test_install.py checks it against pyproject.toml)
EXTRA_REQUIREMENTS: Dict[str, List[str]] = {
    "docker": ["docker>=7"], "kubernetes": ["kubernetes>=28"], "kubernetes-validate": ["kubernetes-validate>=1.30"],
    "ray": ["ray[default]>=2.60"], "ui": ["starlette>=0.37", "uvicorn>=0.29"], "lsp": ["pygls>=2.1,<3"],
    "torch": ["torch>=2.0"], "tracker": ["fsspec>=2023.1"], "mlflow": ["mlflow-skinny>=2.10"],
}


def source_checkout() -> Optional[str]:
    """The root of the git checkout torchspec runs from (an editable install, or ``PYTHONPATH``), else None."""
    if os.path.exists(os.path.join(ROOT, ".git")) and os.path.isfile(os.path.join(ROOT, "pyproject.toml")):
        return ROOT
    return None


def dist_info() -> Optional[str]:
    """The ``.dist-info`` folder installed with the package, where it sits in site-packages."""
    normalized = DIST_NAME.replace("-", "_")
    found = sorted(glob.glob(os.path.join(glob.escape(ROOT), f"{normalized}-*.dist-info")))
    return found[-1] if found else None


def installer() -> str:
    """How torchspec was installed: ``checkout``, ``pipx``, ``uv-tool``, ``uv`` or ``pip`` (also the guess
    for whatever says nothing: conda, a distribution's package)."""
    if source_checkout():
        return "checkout"
    if os.path.isfile(os.path.join(sys.prefix, "pipx_metadata.json")):
        return "pipx"
    if os.path.isfile(os.path.join(sys.prefix, "uv-receipt.toml")):
        return "uv-tool"
    info = dist_info()
    if info is not None:
        try:
            with open(os.path.join(info, "INSTALLER"), encoding="utf-8") as f:
                if f.read().strip() == "uv":
                    return "uv"
        except OSError:
            pass
    return "pip"


def install_command(extra: str) -> str:
    """The command that installs ``extra`` where this torchspec is installed, e.g.
    ``pip install 'torchspec-cli[docker]'``, ``pipx inject torchspec-cli 'docker>=7'``."""
    how = installer()
    if how == "checkout":
        return f"pip install -e {shlex.quote(f'{ROOT}[{extra}]')}"
    spec = shlex.quote(f"{DIST_NAME}[{extra}]")
    if how == "pipx":
        packages = " ".join(shlex.quote(r) for r in requirements_of(extra))
        return f"pipx inject {DIST_NAME} {packages}"
    if how == "uv-tool":
        return f"uv tool install {spec}"
    if how == "uv":
        return f"uv pip install {spec}"
    return f"pip install {spec}"


def requirements_of(extra: str) -> List[str]:
    """The packages ``extra`` installs (``[all]`` expanded), from the installed metadata where it is there."""
    if extra == "all":
        return [r for name in ("docker", "kubernetes", "kubernetes-validate", "ray", "ui", "lsp")
                for r in requirements_of(name)]
    found: List[str] = []
    info = dist_info()
    try:
        with open(os.path.join(info or "", "METADATA"), encoding="utf-8") as f:
            for line in f:
                name, _, marker = line.partition(";")
                if name.startswith("Requires-Dist:") and f'extra == "{extra}"' in marker:
                    found.append(name[len("Requires-Dist:"):].strip().replace(" ", ""))
    except OSError:
        pass
    return found or EXTRA_REQUIREMENTS.get(extra, [f"{DIST_NAME}[{extra}]"])


def extra_for(error: ImportError) -> Optional[str]:
    """The extra that installs the module ``error`` could not import, or None for one no extra brings."""
    name = (getattr(error, "name", None) or "").split(".")[0]
    return EXTRA_OF_MODULE.get(name)


def git_commit(root: str) -> Optional[str]:
    """The commit checked out in ``root``, read from ``.git`` (a worktree's ``gitdir:`` file followed), with
    the branch: ``e691c4d8b2a0, branch main``; None where it cannot be read."""
    git = os.path.join(root, ".git")
    try:
        if os.path.isfile(git):  # a worktree or submodule: "gitdir: PATH"
            with open(git, encoding="utf-8") as f:
                git = os.path.join(root, f.read().partition("gitdir:")[2].strip())
        with open(os.path.join(git, "HEAD"), encoding="utf-8") as f:
            head = f.read().strip()
        if not head.startswith("ref: "):
            return f"{head[:12]}, detached"
        ref = head[5:]
        branch = ref.rpartition("refs/heads/")[2]
        common = git
        if os.path.isfile(os.path.join(git, "commondir")):
            with open(os.path.join(git, "commondir"), encoding="utf-8") as f:
                common = os.path.join(git, f.read().strip())
        for base in (git, common):
            if os.path.isfile(os.path.join(base, ref)):
                with open(os.path.join(base, ref), encoding="utf-8") as f:
                    return f"{f.read().strip()[:12]}, branch {branch}"
        with open(os.path.join(common, "packed-refs"), encoding="utf-8") as f:
            for line in f:
                sha, _, name = line.strip().partition(" ")
                if name == ref:
                    return f"{sha[:12]}, branch {branch}"
    except OSError:
        return None
    return None


def version_report() -> str:
    """What ``torchspec --version`` prints: the version, where it is installed and how, the Python, and the
    commit of a source checkout."""
    lines = [f"torchspec {__version__}",
             f"location: {PACKAGE_DIR}",
             f"python: {sys.version.split()[0]} ({sys.executable})"]
    checkout = source_checkout()
    if checkout:
        lines.append(f"source checkout: {checkout} (commit {git_commit(checkout) or 'unknown'})")
    else:
        lines.append(f"installed by: {installer()} ({DIST_NAME})")
    return "\n".join(lines)
