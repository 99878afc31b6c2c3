"""``torchspec rerun``: submit again exactly what an app was submitted with, from its provenance record.

The record (:mod:`torchspec.runner.provenance`) holds the app as it was
submitted, so a rerun does not depend on today's file: a spec edited, moved or
deleted since still reruns as it ran.  What it cannot hold are the values
``env()`` read (secrets are never written down): the record has
``<value from env(NAME)>`` in their place, and a rerun reads each from the
environment again (a variable that is not set is an error naming it).

If the file the app came from now renders to something else, the rerun says
so, naming the fields that differ; ``from_file`` submits today's file instead
(with the params it was submitted with).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from torchspec.errors import UsageError
from torchspec.runner import provenance
from torchspec.runner.provenance import Source
from torchspec.specs import AppDef

if TYPE_CHECKING:
    from torchspec.runner.api import Runner
    from torchspec.specs import CfgVal

_PLACEHOLDER = re.compile(r"<value from env\(([A-Za-z_][A-Za-z0-9_]*)\)>")


@dataclass
class Rerun:
    """What a rerun did: the new app, and how the file compares with what ran before."""

    handle: str
    previous: str
    #: "unchanged", "changed", "missing" (the file is gone) or None (the app came from no file)
    file_state: Optional[str]
    file: Optional[str]
    #: the fields of the spec that differ between the recorded run and today's file ("roles.trainer.image")
    changed: List[str] = field(default_factory=list)
    from_file: bool = False


def rerun(runner: "Runner", handle: str, scheduler: Optional[str] = None,
          cfg: Optional[Mapping[str, "CfgVal"]] = None, from_file: bool = False) -> Rerun:
    """Submit the app ``handle`` names again (see the module's docstring); ``scheduler`` and ``cfg`` as given
    win over the recorded ones (recorded run options apply only on the recorded scheduler)."""
    record = provenance.load(handle)
    if record is None or "spec" not in record:
        raise UsageError(f"no record of how {handle} was submitted is kept on this machine",
                         "rerun works for apps submitted from here (the record is in TORCHSPEC_HOME/provenance);"
                         " submit the spec file again instead")
    recorded = recorded_app(record)
    today, file_state, changed = compare_with_file(record, recorded)
    if from_file and today is None:
        raise UsageError(f"--from-file: {record.get('file') or handle} is not a spec file that loads today",
                         "rerun without --from-file to submit what ran before")
    app = today if from_file and today is not None else recorded
    name = scheduler or record["scheduler"]
    options: Dict[str, Any] = _filled(record.get("run_options") or {}) if name == record["scheduler"] else {}
    options.update(cfg or {})
    source = Source(record.get("file") or record.get("component"), record.get("params") or {},
                    record.get("params_file"), rerun_of=handle)
    new = runner.schedule(runner.dryrun(app, name, cfg=options, source=source))
    return Rerun(new, handle, file_state, record.get("file"), changed, from_file)


def recorded_app(record: Mapping[str, Any]) -> AppDef:
    """The app of a provenance record, each value ``env()`` read filled in from the environment again."""
    from torchspec.specs.convert import build_app

    return build_app(_filled(record["spec"]))


def _filled(data: Any) -> Any:
    """``data`` with every ``<value from env(NAME)>`` replaced by ``$NAME``; a :class:`UsageError` naming every
    variable that is not set."""
    missing: List[str] = []

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            names = _PLACEHOLDER.findall(value)
            missing.extend(n for n in names if n not in os.environ and n not in missing)
            return _PLACEHOLDER.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    filled = fill(data)
    if missing:
        raise UsageError(f"the recorded spec read {', '.join(missing)} with env(), and "
                         f"{'it is' if len(missing) == 1 else 'they are'} not set now",
                         "secrets are never recorded: set them as they were when the app was submitted")
    return filled


def compare_with_file(record: Mapping[str, Any], recorded: AppDef
                      ) -> Tuple[Optional[AppDef], Optional[str], List[str]]:
    """How the record's file compares with ``recorded`` (its app): (today's app or None, the file's state:
    None without a file, "missing", "unchanged" or "changed", the field paths that differ, as ``diff`` names
    them).  The dashboard shows the same."""
    path = record.get("file")
    if not path:
        return None, None, []
    if not os.path.isfile(path):
        return None, "missing", []
    from torchspec.errors import SpecError
    from torchspec.loader import load_app
    from torchspec.redaction import ENV_READ
    from torchspec.specs.canonical import canonical_app

    try:
        today = load_app(path, record.get("params") or {}, record.get("params_file"))
    except (SpecError, UsageError):
        return None, "changed", ["(the file no longer loads)"]
    old, new = canonical_app(recorded, ENV_READ).fields(), canonical_app(today, ENV_READ).fields()
    changed = sorted(".".join(p) for p in set(old) | set(new) if old.get(p) != new.get(p))
    return today, "changed" if changed else "unchanged", changed
