"""One app's page, as data: its roles and replicas, the spec that ran (secrets hidden), what changed in its
file since, the links its metadata declares, and what it recorded in the configured trackers.

Everything here is read through the :class:`~torchspec.runner.Runner` the
dashboard reads with, which never submits: its ``describe`` therefore comes
from what the scheduler kept (made safe at submit by
:func:`torchspec.redaction.for_describe`), never from an AppDef held in
memory with the values ``env()`` read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.specs import AppStatus

#: Metadata keys that name a link: ``torchspec.dev/link.tensorboard: https://...`` shows as "tensorboard".
LINK_PREFIX = "torchspec.dev/link."


def status_data(handle: str, status: "AppStatus") -> Dict[str, Any]:
    """The app's state and a row per replica (state, exit code, restarts, host, error), as plain JSON."""
    roles = []
    for role in status.roles:
        replicas = [{"id": r.id, "state": getattr(r.state, "name", str(r.state)),
                     "exit_code": getattr(r, "exit_code", None), "restarts": getattr(r, "num_restarts", 0),
                     "host": r.hostname or "", "error": _short(r.structured_error_msg)} for r in role.replicas]
        roles.append({"role": role.role, "replicas": replicas})
    return {"handle": handle, "state": status.state.name, "terminal": status.is_terminal(),
            "num_restarts": status.num_restarts, "msg": status.msg or "", "roles": roles}


def _short(text: Optional[str]) -> str:
    if not text or text == "<NONE>":
        return ""
    return text if len(text) <= 400 else text[:400] + "..."


def spec_and_provenance(runner: "Runner", handle: str) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """(the spec that ran, the provenance record or summary): the record's copy where kept, else the
    scheduler's; both without the raw provenance label, every value ``env()`` read as its placeholder."""
    from torchspec.redaction import for_describe, redact_data
    from torchspec.runner.provenance import LABEL

    record = runner.provenance(handle)
    spec = record.get("spec") if record else None
    if spec is None:
        from torchspec.specs.convert import dump_app

        app = runner.describe(handle)
        spec = for_describe(dump_app(app)) if app is not None else None
    if spec is not None:
        spec = dict(spec)
        spec["metadata"] = {k: v for k, v in (spec.get("metadata") or {}).items() if k != LABEL}
    return spec, redact_data(record) if record else None


def changes_since(record: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """How the record's file compares with today's: ``{"state", "file", "changed"}``; state None where the
    app came from no file (a built-in, Python), "missing", "unchanged" or "changed" (with the field paths,
    as ``torchspec rerun`` names them)."""
    if not record or not record.get("file") or "spec" not in record:
        return {"state": None, "file": None, "changed": []}
    from torchspec.errors import TorchSpecError
    from torchspec.runner.rerun import compare_with_file
    from torchspec.specs.convert import build_app

    try:
        recorded = build_app(record["spec"])  # the placeholders stay: nothing is submitted from here
        _, state, changed = compare_with_file(record, recorded)
    except (TorchSpecError, ValueError, KeyError, TypeError) as e:
        return {"state": "changed", "file": record["file"], "changed": [f"(cannot compare: {e})"]}
    return {"state": state, "file": record["file"], "changed": changed}


def links(spec: Optional[Dict[str, Any]]) -> List[Dict[str, str]]:
    """The links the spec's metadata declares: keys ``torchspec.dev/link.NAME`` (named NAME) and any other
    value that is an http(s) URL (named by its key); only http and https, never ``javascript:`` or ``data:``."""
    found = []
    for key, value in sorted(((spec or {}).get("metadata") or {}).items()):
        if not isinstance(value, str) or not is_web_url(value):
            continue
        name = key[len(LINK_PREFIX):] if key.startswith(LINK_PREFIX) else key
        found.append({"name": name or key, "url": value.strip()})
    return found


def is_web_url(text: str) -> bool:
    """An absolute http or https URL with a host: the only links the dashboard makes clickable."""
    try:
        parts = urlsplit(text.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and not any(c in text for c in "\r\n\t ")


def tracked(runner: "Runner", handle: str) -> List[Dict[str, Any]]:
    """What the app recorded in each tracker of the runner's config (its run id is its handle): one entry
    per tracker, with the error that kept one from being read (:func:`torchspec.runner.trackers.recorded`)."""
    from torchspec.runner.trackers import recorded

    return recorded(runner.config, handle)


def spec_yaml(spec: Optional[Dict[str, Any]]) -> str:
    """The spec as YAML, keys in the order a spec file has them."""
    if spec is None:
        return ""
    import yaml

    return str(yaml.safe_dump(spec, sort_keys=False, default_flow_style=False, allow_unicode=True))
