"""An AppDef as a canonical plain dict, and the content hash of what would run.

Two spec files that would run the same job give equal canonical forms, however
they are written: key order, quoting, templates against literal values, a named
resource against its numbers.  ``torchspec diff`` compares canonical forms
field by field; ``torchspec apply`` stores :func:`content_hash` on the job it
submits and compares it on the next run.

The form, per app::

    {"name": ..., "metadata": {...}, "role_order": [role names],
     "roles": {ROLE: {"image", "entrypoint", "args", "env", "num_replicas", "max_retries", "retry_policy",
                      "resource", "port_map", "mounts", "metadata", "overrides", ...}}}

Lists whose order means something (``args``, ``role_order``) keep it; mounts
are sorted by where they mount.  Secrets (what ``env()`` read, the rule of
:func:`torchspec.redaction.secrets`) never appear: a value holding one
shows as render prints it (``<value from env(NAME)>``), and the secret's
SHA-256 goes into :attr:`Canonical.secrets`, which is compared and hashed but
never printed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    from torchspec.specs import AppDef

#: Bumped when the canonical form changes, so that a stored hash of another form is recognised as such.
HASH_VERSION = "v1"

Path = tuple[str, ...]


@dataclass(frozen=True)
class Canonical:
    """One app's canonical form: ``data`` (plain, JSON-able, secrets redacted) and the secrets' digests."""

    data: dict[str, Any]
    #: field path -> SHA-256 of the value holding a secret; for comparing and hashing only, never printed
    secrets: dict[Path, str] = field(default_factory=dict)

    def fields(self) -> dict[Path, Any]:
        """Every leaf by its path: mappings are walked into, lists and scalars are leaves.

        ``("roles", "trainer", "env", "TOKEN")`` is one env variable; ``("roles", "trainer", "args")``
        is the whole argument list.
        """
        out: dict[Path, Any] = {}
        _flatten(self.data, (), out)
        return out


def canonical_app(app: "AppDef", env_read: Iterable[str] = ()) -> Canonical:
    """The canonical form of ``app``, whose templates read the variables ``env_read`` with ``env()``.

    Call it before ``Runner.dryrun``, which adds torchspec's variables to the roles.
    """
    from torchspec.redaction import secrets as env_secrets
    from torchspec.specs.convert import dump_app

    dumped = dump_app(app)
    roles: dict[str, Any] = {}
    for role, data in zip(app.roles, dumped["roles"], strict=True):
        data = {**data, "overrides": _plain(role.overrides)}
        data["mounts"] = sorted(data.pop("mounts", []), key=lambda m: json.dumps(m, sort_keys=True))
        for key in ("env", "port_map", "metadata"):
            data.setdefault(key, {})
        roles[data.pop("name")] = data
    plain = {"name": app.name, "metadata": dumped.get("metadata", {}), "role_order": [r.name for r in app.roles],
             "roles": roles}
    secrets: dict[Path, str] = {}
    data = _redacted(_plain(plain), (), env_secrets(env_read), secrets)
    return Canonical(_sorted(data), secrets)


def options_form(run_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Run options as plain sorted data; options left unset (None) are left out."""
    return _sorted(_plain({k: v for k, v in (run_options or {}).items() if v is not None}))


def content_hash(app: "AppDef | Canonical", *, scheduler: str | None = None,
                 run_options: Mapping[str, Any] | None = None, env_read: Iterable[str] = ()) -> str:
    """``v1-`` and 40 hex digits: what would run, as one value short enough for a Kubernetes label.

    Covers the canonical app (secrets by digest), the scheduler and its
    resolved run options (``Runner.run_options``); equal hashes mean an
    unchanged job.  The ``v1`` names the canonical form the hash was made of.
    """
    form = app if isinstance(app, Canonical) else canonical_app(app, env_read)
    payload = {"app": form.data, "secrets": sorted([list(path), digest] for path, digest in form.secrets.items()),
               "scheduler": scheduler, "run_options": options_form(run_options)}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{HASH_VERSION}-{hashlib.sha256(text.encode()).hexdigest()[:40]}"


# ---------------------------------------------------------------- helpers


def _plain(value: Any) -> Any:
    """JSON-able data: tuples as lists, enums and other objects as their text."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(getattr(value, "value", value))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _redacted(value: Any, path: Path, secrets: list[tuple[str, str]], found: dict[Path, str]) -> Any:
    """``value`` with every secret replaced by ``<value from env(NAME)>``; digests of the values that held one."""
    if not secrets:
        return value
    if isinstance(value, dict):
        return {_hide(k, secrets): _redacted(v, path + (_hide(k, secrets),), secrets, found) for k, v in value.items()}
    if isinstance(value, list):  # a list is one field: one digest for all of it
        hidden = [_redacted(v, path, secrets, {}) for v in value]
        if hidden != value:
            found[path] = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
        return hidden
    if isinstance(value, str):
        hidden = _hide(value, secrets)
        if hidden != value:
            found[path] = hashlib.sha256(value.encode()).hexdigest()
        return hidden
    return value


def _hide(text: str, secrets: list[tuple[str, str]]) -> str:
    for secret, name in secrets:
        text = text.replace(secret, f"<value from env({name})>")
    return text


def _flatten(value: Any, path: Path, out: dict[Path, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, path + (key,), out)
    else:
        out[path] = value
