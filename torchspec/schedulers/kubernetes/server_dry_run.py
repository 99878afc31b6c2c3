"""The API server's own dry run of a request (``-c server_dry_run=True``): what the cluster itself refuses.

Each object of the request is created, in the order ``submit`` creates
them, with ``dryRun=All`` and ``fieldValidation=Strict``: the server runs its
validation, the CRDs' CEL rules, its admission plug-ins and webhooks (quota,
policies) as for a real create, and stores nothing.  What no schema file can
tell, the cluster answers.  Every refusal is a :class:`ServerRefusal`: one per
cause of a 422 (each naming its field, which :mod:`.origin` places in the
spec), one for any other answer (403 forbidden, 404 no such namespace or
CRD, 409 exists, a webhook's error).  A server that cannot be reached, or
rejects the credentials, is a :class:`~torchspec.errors.BackendError` naming
the server: nothing was checked.

``dryrun`` (the scheduler's ``_submit_dryrun``) raises the refusals,
``lint --scheduler kubernetes`` reports each as a TS604 at its line.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from torchspec.errors import AppRefusedError, BackendError, format_path
from torchspec.schedulers.kubernetes.client import Cluster, api_error, status_body
from torchspec.schedulers.kubernetes.flavors import flavor_of_kind
from torchspec.schedulers.kubernetes.origin import parse_field, place, spec_path
from torchspec.schedulers.kubernetes.states import Obj
from torchspec.schedulers.kubernetes.status import describe_obj

#: The lint code of a refusal (``torchspec lint --explain TS604``).
SERVER_REFUSES = "TS604"
#: What strict field validation names in a 400: ``unknown field "spec.x"``, ``duplicate field "y"``.
_STRICT_FIELD = re.compile(r'(unknown|duplicate) field "([^"]+)"')
_HINT_422 = ("the cluster's own checks (its Kubernetes version, CEL rules, admission webhooks) refuse the field "
             "named; `torchspec dryrun -s kubernetes FILE` shows the manifest")


@dataclass(frozen=True)
class ServerRefusal:
    """One thing the API server refused in its dry run of one object of the request."""

    obj: Obj
    #: the HTTP status of the answer: 422 invalid, 403 forbidden, 404, 409...
    status: int
    #: what the server said: one cause's message for a 422 (``Invalid value: "2": must be ...``), else the
    #: whole answer, as :func:`~.client.api_error` words it
    message: str
    #: the field of ``obj`` the cause names (``spec.template.spec.containers[0].image``; "" for the object as a
    #: whole); None where the refusal is the whole answer, not one of its causes
    field: Optional[str] = None
    hint: Optional[str] = None

    def text(self, roles: Sequence[Mapping[str, Any]] = ()) -> str:
        """The refusal in one line, naming the object (and its role) and the field."""
        if self.field is None:
            return self.message
        role, _ = place(self.obj, parse_field(self.field))
        name = roles[role].get("name") if role is not None and 0 <= role < len(roles) else None
        what = describe_obj(self.obj) + (f" for role {name!r}" if name is not None else "")
        return f"the API server refuses the {what}: " + (f"{self.field}: " if self.field else "") + self.message

    def spec_path(self, roles: Sequence[Mapping[str, Any]]) -> Tuple[Any, ...]:
        """Where in the spec (whose ``roles`` these are) the refused field is written; ``()`` for the document."""
        return spec_path(*place(self.obj, parse_field(self.field or "")), roles)


def dry_run(cluster: Cluster, objects: Sequence[Obj], namespace: Optional[str],
            context: Optional[str]) -> List[ServerRefusal]:
    """Create ``objects`` in ``namespace`` (default: the cluster's) with ``dryRun=All``, in order; every
    refusal.  Raises :class:`~torchspec.errors.BackendError` (naming the server) where the server cannot be
    reached or rejects the credentials."""
    namespace = namespace or cluster.default_namespace(context)
    refusals: List[ServerRefusal] = []
    for obj in objects:
        body = copy.deepcopy(obj)
        body["metadata"]["namespace"] = namespace
        try:
            cluster.create(body, context, dry_run=True)
        except Exception as e:  # noqa: BLE001 - every answer becomes a refusal, or a BackendError
            refusals += _refusals(e, obj, namespace, cluster.where(context))
    return refusals


def _refusals(e: BaseException, obj: Obj, namespace: str, where: str) -> List[ServerRefusal]:
    """The server's answer to the dry run of ``obj`` as refusals: one per cause (or unknown field) it names."""
    error = api_error(e, f"creating {describe_obj(obj)} in namespace {namespace} (dry run)", where)
    status = getattr(e, "status", None)
    if not isinstance(status, int) or status in (0, 401):
        raise error  # unreachable, or the credentials refused: nothing could be checked
    body = status_body(e)
    causes = [c for c in ((body.get("details") or {}).get("causes") or []) if isinstance(c, dict)]
    if status == 422 and causes:
        return [ServerRefusal(obj, status, str(c.get("message") or c.get("reason") or "invalid"),
                              str(c.get("field") or ""), _HINT_422) for c in causes]
    fields = _STRICT_FIELD.findall(str(body.get("message") or ""))
    if status == 400 and fields:
        return [ServerRefusal(obj, status, "unknown field: the cluster's Kubernetes (or the CRD) has no such field"
                              if how == "unknown" else "duplicate field", field, _HINT_422) for how, field in fields]
    flavor = flavor_of_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
    if status == 404 and flavor is not None and flavor.custom and \
            (body.get("details") or {}).get("kind") != "namespaces":
        # the API group is not served at all (its answer is a bare "404 page not found")
        return [ServerRefusal(obj, status, f"{error.message.rstrip('.')}: this cluster serves no {flavor.kind} "
                                           f"({flavor.api_version}), which flavor {flavor.name} creates: is the "
                                           f"CRD installed (and its controller)?", None, error.hint)]
    return [ServerRefusal(obj, status, error.message, None, error.hint)]


def raise_refusals(refusals: Sequence[ServerRefusal], roles: Sequence[Mapping[str, Any]]) -> None:
    """Raise what ``dryrun`` reports: manifests the server finds invalid (every refusal a 422 or an
    unknown field) are an :class:`~torchspec.errors.AppRefusedError` naming each field where the spec
    writes it; any other refusal (forbidden, a missing namespace or CRD, a webhook's error) a
    :class:`~torchspec.errors.BackendError` with the server's reason.  Nothing where there are none."""
    if not refusals:
        return
    texts = []
    for r in refusals:
        path = r.spec_path(roles)
        texts.append((path, r.text(roles) + (f" (in the spec at {format_path(path)})" if path else "")))
    if all(r.status in (400, 422) for r in refusals):
        raise AppRefusedError("the cluster refuses the manifests in its dry run: " + "; ".join(t for _, t in texts),
                              _HINT_422, code=SERVER_REFUSES, problems=texts)
    raise BackendError("; ".join(t for _, t in texts), next((r.hint for r in refusals if r.hint), None))
