"""What ran, recorded at submit: where the spec came from, its content hash, who submitted it, with what.

A job rerun months later should be the same job, and a look at a running app
should say which commit of which file it is.  At every submit through the
runner (``submit``, ``apply``, ``rerun``, ``Runner.run``) a record is made
before torchspec adds its own variables to the roles:

- ``content_hash``: the spec's canonical hash (:func:`torchspec.specs.canonical.content_hash`,
  the form ``diff`` compares; secrets by digest only);
- ``component`` and ``file``: what was named and the spec file it resolved to (None for a built-in, whose
  file is torchspec's own, and for an AppDef made in Python);
- ``git``: of the file's repository, ``commit``, ``branch``, ``path`` in the repository, ``dirty`` and, when
  dirty, ``diff_sha256``: a hash of ``git diff HEAD`` and of the untracked files' names, never their text;
- ``params``, ``params_file`` and ``run_options`` as given, and ``spec``, the app as submitted, with every
  value ``env()`` read shown as ``<value from env(NAME)>`` (``env_read`` lists the names): nothing recorded
  holds a secret;
- ``scheduler``, ``torchspec_version``, ``user``, ``submitted_at`` (UTC, ISO 8601), and ``rerun_of``: the
  handle of the app a ``torchspec rerun`` submitted again (None otherwise).

The whole record is kept on this machine (``$TORCHSPEC_HOME/provenance/SCHEDULER/APP_ID.json``, an
:class:`~torchspec.schedulers.app_store.AppStore`); a summary of it (:func:`label`, a few hundred bytes) goes
with the app as the label :data:`LABEL`, which every scheduler that keeps labels keeps in the engine (an
annotation, a container label, the job's comment), so that another machine sees where an app came from.
``describe`` and ``status -o json`` show it; ``torchspec rerun`` submits the recorded spec again.
"""

from __future__ import annotations

import datetime
import getpass
import hashlib
import json
import logging
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from torchspec.errors import TorchSpecError
from torchspec.schedulers.app_store import AppStore
from torchspec.specs import AppDef, parse_app_handle

#: The label that carries the summary; hidden where labels are shown (``list``, ``describe``), as it is not the
#: user's.
LABEL = "torchspec.dev/provenance"
#: The folder of the state folder that keeps the records.
RECORDS = "provenance"
#: Bumped when a record's shape changes incompatibly.
VERSION = 1
_GIT_TIMEOUT_S = 10

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Source:
    """Where an app came from, as the runner knows it when it loads the app (empty: an AppDef from Python)."""

    component: Optional[str] = None
    params: Mapping[str, Any] = field(default_factory=dict)
    params_file: Optional[str] = None
    #: the app this one reruns (``torchspec rerun``)
    rerun_of: Optional[str] = None


def record(app: AppDef, source: Source, scheduler: str, run_options: Mapping[str, Any]) -> Dict[str, Any]:
    """The provenance of submitting ``app`` (before torchspec's variables are added to its roles)."""
    from torchspec.redaction import ENV_READ, for_describe, placeholder, redact_data
    from torchspec.specs.canonical import content_hash, options_form
    from torchspec.specs.convert import dump_app
    from torchspec.version import __version__

    path = spec_file(source.component)
    spec = for_describe(dump_app(app))
    shown = json.dumps(spec)
    return {
        "version": VERSION,
        "content_hash": content_hash(app, env_read=ENV_READ),
        "component": source.component,
        "file": path,
        "git": git_state(path) if path else None,
        "params": redact_data({str(k): str(v) for k, v in source.params.items()}),
        "params_file": os.path.abspath(source.params_file) if source.params_file else None,
        "run_options": redact_data(options_form(run_options)),
        "scheduler": scheduler,
        "torchspec_version": __version__,
        "user": _user(),
        "submitted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # the variables whose values the spec holds (ENV_READ is every one this process read)
        "env_read": sorted(name for name in ENV_READ if placeholder(name) in shown),
        "spec": spec,
        "rerun_of": source.rerun_of,
    }


def label(provenance: Mapping[str, Any]) -> str:
    """The summary that travels with the app as :data:`LABEL`: the record's keys, fewer of them (no params,
    options or spec: the engine keeps labels in fields of limited size) and no time (so a dry run shows the
    same label twice); compact JSON."""
    keep = ("content_hash", "component", "file", "git", "scheduler", "user", "torchspec_version", "rerun_of")
    summary = {key: provenance.get(key) for key in keep if provenance.get(key) is not None}
    if isinstance(summary.get("git"), dict):
        summary["git"] = {k: v for k, v in summary["git"].items() if k != "diff_sha256"}
    return json.dumps(summary, separators=(",", ":"), sort_keys=True)


def from_label(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """What :func:`label` wrote, or None (no label, or one that is not torchspec's JSON)."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def save(handle: str, provenance: Optional[Mapping[str, Any]]) -> None:
    """Keep the record of the app ``handle`` names; a record that cannot be written is a warning, since the app
    is submitted by then and its label still says where it came from."""
    if provenance is None:
        return
    scheduler, _, app_id = parse_app_handle(handle)
    try:
        AppStore(scheduler, kind=RECORDS).put(app_id, {**provenance, "handle": handle})
    except (OSError, TorchSpecError) as e:
        logger.warning("%s was submitted, but its provenance could not be kept on this machine: %s", handle, e)


def load(handle: str) -> Optional[Dict[str, Any]]:
    """The record kept when ``handle`` was submitted from this machine; None where there is none."""
    scheduler, _, app_id = parse_app_handle(handle)
    return AppStore(scheduler, kind=RECORDS).get(app_id)


def spec_file(component: Optional[str]) -> Optional[str]:
    """The spec file ``component`` names, absolute; None for a built-in (torchspec's own file, not the
    user's), a package's component or Python component, or nothing named."""
    if not component:
        return None
    from torchspec.components import is_python_component

    path = component.split(":", 1)[0] if is_python_component(component) else component
    path = os.path.abspath(os.path.expanduser(path))
    return path if os.path.isfile(path) else None


def git_state(path: str) -> Optional[Dict[str, Any]]:
    """The git state of the repository ``path`` is in; None outside one (or without git)."""
    folder = os.path.dirname(path)
    head = _git(folder, "rev-parse", "--show-toplevel", "HEAD", "--abbrev-ref", "HEAD")
    if head is None:
        return None
    root, commit, branch = (head.splitlines() + ["", "", ""])[:3]
    status = _git(folder, "status", "--porcelain", "-z", "--untracked-files=normal")
    dirty = bool(status)
    state: Dict[str, Any] = {"commit": commit or None, "branch": None if branch in ("", "HEAD") else branch,
                             "path": os.path.relpath(os.path.realpath(path), os.path.realpath(root)),
                             "dirty": dirty}
    if dirty:
        digest = hashlib.sha256()
        digest.update((_git(folder, "diff", "HEAD", "--binary", "--no-ext-diff") or "").encode("utf-8", "surrogateescape"))
        digest.update((_git(folder, "ls-files", "--others", "--exclude-standard", "-z") or "").encode("utf-8",
                                                                                                      "surrogateescape"))
        state["diff_sha256"] = digest.hexdigest()
    return state


def _git(folder: str, *args: str) -> Optional[str]:
    """git's output, or None where it fails (not a repository, no commit yet, no git)."""
    try:
        done = subprocess.run(["git", "--no-optional-locks", *args], cwd=folder, capture_output=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="surrogateescape").strip("\n")


def _user() -> Optional[str]:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (a container) and no LOGNAME/USER
        return None


def images(metadata: Mapping[str, str]) -> Dict[str, str]:
    """Each role's image as the engine resolved it, from a DescribeAppResponse's metadata ({} where the
    scheduler reports none: local, slurm and ray run no images)."""
    from torchspec.schedulers.api import IMAGE_ID_PREFIX

    return {key[len(IMAGE_ID_PREFIX):]: value for key, value in metadata.items() if key.startswith(IMAGE_ID_PREFIX)}


def split_labels(labels: Mapping[str, str]) -> Tuple[Dict[str, str], Optional[Dict[str, Any]]]:
    """An app's labels as the user gave them, and the provenance summary they carried (None: none)."""
    shown = {k: v for k, v in labels.items() if k != LABEL}
    return shown, from_label(labels.get(LABEL))


def summary(provenance: Mapping[str, Any]) -> str:
    """The provenance in a few lines for people (``describe`` prints them as YAML comments)."""
    git = provenance.get("git") or {}
    where = git.get("path") or provenance.get("file") or provenance.get("component") or "an AppDef made in Python"
    lines = [f"from {where}"]
    if git.get("commit"):
        digest = f" (diff sha256 {git['diff_sha256'][:12]})" if git.get("diff_sha256") else ""
        state = f", with uncommitted changes{digest}" if git.get("dirty") else ""
        lines[0] += f" at {git['commit'][:12]}" + (f" ({git['branch']})" if git.get("branch") else "") + state
    elif provenance.get("file"):
        lines[0] += " (not in a git repository)"
    version = provenance.get("torchspec_version")
    who = [f"by {provenance['user']}" if provenance.get("user") else "",
           f"at {provenance['submitted_at']}" if provenance.get("submitted_at") else "",
           f"with torchspec {version}" if version else ""]
    if any(who):
        lines.append("submitted " + " ".join(part for part in who if part))
    lines.append(f"content hash {provenance.get('content_hash')}")
    for key in ("params", "run_options"):
        if provenance.get(key):
            lines.append(f"{key.replace('_', ' ')}: " + ", ".join(f"{k}={v}" for k, v in provenance[key].items()))
    return "\n".join(lines)
