"""Names: Kubernetes' own name rules, the names torchspec gives its objects, and the app id.

The rules (apimachinery's validation) are checked here so a bad value is a
usage error at dry run and in ``torchspec lint``, not a 422 from the API
server (or, worse, text nobody meant as a name).  :class:`AppRef` is the app
id, ``[CONTEXT:]NAMESPACE:NAME``, both ways.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Collection, Dict, List, Mapping, Optional, Tuple

from torchspec.schedulers.replicas import dns_label

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"(?:(?P<prefix>[^/]+)/)?(?P<name>[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
#: A resource quantity (``2Gi``, ``512M``, ``1.5e9``), without a sign: no size here can be negative.
_QUANTITY = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?\d+)?")
#: The rules as error messages spell them out.
DNS_LABEL_RULE = "lowercase letters, digits and inner '-', at most 63 characters"
DNS_SUBDOMAIN_RULE = "lowercase letters, digits, inner '-' and '.', at most 253 characters"


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label: what namespaces, Services and the Jobs' pod hostnames must be."""
    return len(text) <= 63 and _DNS1123_LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """A DNS-1123 subdomain: what most object names (Secrets, ServiceAccounts, PriorityClasses) must be."""
    return len(text) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(text) is not None


def is_qualified_name(text: str) -> bool:
    """A label key or resource name: ``[DNS subdomain/]name`` with a name of at most 63 characters."""
    match = _QUALIFIED_NAME.fullmatch(text)
    return match is not None and len(match["name"]) <= 63 and (
        match["prefix"] is None or is_dns_subdomain(match["prefix"]))


def is_label_value(text: str) -> bool:
    """What a label's value may be (the Kueue queue, a node label a capability selects on)."""
    return len(text) <= 63 and _LABEL_VALUE.fullmatch(text) is not None


def is_quantity(text: str) -> bool:
    """A resource quantity Kubernetes parses (``2Gi``, ``512M``), never negative."""
    return _QUANTITY.fullmatch(text) is not None


def role_key(app_id: str, role_name: str) -> str:
    """The role as a DNS label, short enough that ``{app_id}-{key}-{k}`` (and JobSet's
    ``{app_id}-{key}-0-{k}``) stays a valid 63-character hostname for up to a million replicas."""
    return dns_label(role_name, max_len=max(1, 52 - len(app_id)))


def app_name(name: str) -> str:
    """The DNS-1035 label an app id starts with: Service names must begin with a letter."""
    label = dns_label(name, max_len=40)
    return label if label[0].isalpha() else f"app-{label}"[:40].rstrip("-")


def label_value(text: str) -> str:
    """``text`` as a label value (63 characters of ``[A-Za-z0-9._-]``, alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def safe_label_value(text: str) -> str:
    """``text`` as a label value: itself where it is one, else each run of other characters than
    ``[A-Za-z0-9._-]`` made ``_``, trimmed to alphanumeric ends, and one longer than 63 characters cut to 54 and
    ended with ``-`` and 8 hex digits of its SHA-256 (so two long values stay two labels)."""
    if is_label_value(text):
        return text
    import hashlib

    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    value = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
    value = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)
    if len(value) > 63:
        value = re.sub(r"[^A-Za-z0-9]+$", "", value[:54]) + "-" + digest
    return value or digest


def metadata_labels(metadata: Mapping[str, str], reserved: Collection[str], kept_apart: Collection[str] = (),
                    ) -> Tuple[Dict[str, str], List[str], List[Tuple[Tuple[Any, ...], str]]]:
    """The app's metadata as Kubernetes labels: (the labels, a note for each value written differently, a
    problem (where in the spec, what) for each key that cannot be a label key or is one of ``reserved``, the
    labels torchspec sets itself).  Keys in ``kept_apart`` are not made labels."""
    labels: Dict[str, str] = {}
    notes: List[str] = []
    problems: List[Tuple[Tuple[Any, ...], str]] = []
    for key, value in metadata.items():
        if key in kept_apart:
            continue
        if key in reserved:
            problems.append((("metadata", key), f"metadata {key!r} is a label torchspec sets itself on Kubernetes;"
                             " choose another key"))
        elif not is_qualified_name(key):
            problems.append((("metadata", key), f"metadata {key!r} cannot be a Kubernetes label key ([DNS subdomain"
                             "/]name, the name at most 63 letters, digits, '-', '_' or '.', alphanumeric at both"
                             " ends)"))
        else:
            labels[key] = safe_label_value(value)
            if labels[key] != value:
                notes.append(f"label {key}={labels[key]}: the metadata's value {value!r} is no label value (at"
                             " most 63 letters, digits, '-', '_' or '.'); the annotation keeps it as it is")
    return labels, notes, problems


def port_name(name: str) -> Optional[str]:
    """A port name Kubernetes accepts (IANA service name: 15 chars, a letter, no ``--``), or None."""
    label = re.sub(r"-+", "-", dns_label(name, max_len=15)).strip("-")
    return label if re.search(r"[a-z]", label) else None


@dataclass(frozen=True)
class AppRef:
    """Where an app lives, as its app id says: ``[CONTEXT:]NAMESPACE:NAME[@FLAVOR]``, or a bare ``NAME[@FLAVOR]``.

    ``flavor`` names the kind of the app's objects (``pytorchjob``...), so the
    app is read from that kind alone; an id without one (the ``job`` flavor's,
    and every id made before flavors were written into it) is searched for in
    every kind, Jobs first.

    ``context`` is None for the scheduler's context (else the kubeconfig's
    current one), ``namespace`` None for that context's namespace.  The
    context comes first and may itself hold ``:`` (EKS contexts are ARNs), so
    the id is split from the right: namespace and name are DNS labels and
    never hold one.  A handle's app id may not hold ``/`` (the handle's last
    ``/`` ends the session name), so ``/`` in a context is written ``%2F``
    (and ``%`` as ``%25``).
    """

    name: str
    namespace: Optional[str] = None
    context: Optional[str] = None
    flavor: Optional[str] = None

    def __str__(self) -> str:
        parts = [f"{self.name}@{self.flavor}" if self.flavor else self.name]
        if self.namespace is not None or self.context is not None:
            parts.insert(0, self.namespace or "")
        if self.context is not None:
            parts.insert(0, self.context.replace("%", "%25").replace("/", "%2F"))
        return ":".join(parts)

    @classmethod
    def parse(cls, app_id: str) -> Optional["AppRef"]:
        """The parts of ``app_id``; None when it cannot be an app of this scheduler (a namespace or name
        that is no DNS label, an empty context), so that such an id is an unknown app, not an API error."""
        from urllib.parse import unquote

        context: Optional[str] = None
        namespace: Optional[str] = None
        rest, has_namespace, name = app_id.rpartition(":")
        if has_namespace:
            context_text, has_context, namespace = rest.rpartition(":")
            if has_context:
                context = unquote(context_text)
                if not context:
                    return None
            if has_context and not namespace:
                namespace = None  # CONTEXT::NAME: that context's namespace
            elif not is_dns_label(namespace):
                return None
        name, has_flavor, flavor = name.partition("@")
        if not is_dns_label(name) or (has_flavor and not is_dns_label(flavor)):
            return None
        return cls(name=name, namespace=namespace, context=context, flavor=flavor or None)
