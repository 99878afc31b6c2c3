"""``torchspec new scheduler NAME``: a scheduler plug-in package to start from, written from templates.

The templates (``templates/scheduler/``, package data) are torchspec's own, so
they are rendered with a plain Jinja environment, ``StrictUndefined``: a name
a template uses and this module does not give is an error, not an empty
string.  In template paths ``PACKAGE`` becomes the Python package
(``torchspec_NAME``) and ``NAME`` the scheduler's name; ``.j2`` is dropped.
``tests/plugins/torchspec-example`` in torchspec's repository is this
module's output for ``example``, checked byte for byte by the tests.
"""

from __future__ import annotations

import keyword
import os
import re
from pathlib import Path
from typing import Dict, List

from torchspec.errors import UsageError

TEMPLATES = Path(__file__).resolve().parent / "templates"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


def check_scheduler_name(name: str) -> None:
    """Refuse a name that cannot be a scheduler's and a package's (``torchspec_NAME``), or that is built in."""
    if not _NAME.fullmatch(name) or name.endswith("_") or keyword.iskeyword(name):
        raise UsageError(f"{name!r} cannot name a scheduler",
                         "use lower-case letters, digits and _ (a letter first, 32 at most), e.g. `batchq`")
    builtin = builtin_schedulers()
    if name in builtin:
        raise UsageError(f"{name!r} is a built-in scheduler's name, so a plug-in of that name could not be installed"
                         " beside torchspec", f"pick another name; the built-in ones: {', '.join(builtin)}")


def builtin_schedulers() -> List[str]:
    """The schedulers torchspec itself registers (through its own entry points)."""
    from torchspec.entry_points import entry_points
    from torchspec.version import is_own_dist

    return sorted({ep.name for ep in entry_points("torchspec.schedulers") if is_own_dist(ep.dist)})


def scheduler_names(name: str) -> Dict[str, str]:
    """What the templates are filled in with: ``batch_q`` -> ``torchspec_batch_q``, class ``BatchQScheduler``."""
    return {"name": name, "package": f"torchspec_{name}",
            "cls": "".join(part.capitalize() for part in name.split("_")) + "Scheduler"}


def render_scheduler_package(name: str) -> Dict[str, str]:
    """Every file of the package for ``name``: relative path -> text.  Pure: writes nothing."""
    import jinja2

    values = scheduler_names(name)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    root = TEMPLATES / "scheduler"
    files = {}
    for template in sorted(root.rglob("*.j2")):
        relative = template.relative_to(root).as_posix()[: -len(".j2")]
        relative = relative.replace("PACKAGE", values["package"]).replace("NAME", name)
        files[relative] = env.from_string(template.read_text(encoding="utf-8")).render(values)
    return files


def create_scheduler_package(name: str, dest: "str | os.PathLike[str] | None" = None) -> Path:
    """Write the scheduler package for ``name`` into ``dest`` (default ``./torchspec-NAME``); returns the folder.

    Refuses a ``dest`` that holds anything: files are never overwritten (move
    the folder away, or name another one).
    """
    check_scheduler_name(name)
    folder = Path(dest if dest is not None else f"torchspec-{name}")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{folder} is there and not an empty folder; nothing was written",
                         "name another folder (torchspec new scheduler NAME DIR), or remove that one")
    files = render_scheduler_package(name)
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


__all__ = ["check_scheduler_name", "create_scheduler_package", "render_scheduler_package"]
