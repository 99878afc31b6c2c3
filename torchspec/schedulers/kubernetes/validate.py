"""Validation against the official schemas: Kubernetes' own (``kubernetes-validate``) and the bundled CRDs.

Used by the tests, by ``torchspec lint --scheduler kubernetes``
(:func:`validate_manifests`, :data:`BUNDLED_CRDS`, :func:`load_crds`) and by
the translator, which checks a role's ``kubernetes.pod_patch`` still makes a
valid Pod (:func:`pod_problem`).  ``kubernetes-validate``, ``jsonschema`` and
``yaml`` are imported only when a check runs.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from torchspec.schedulers.kubernetes.flavors import flavor_of_kind
from torchspec.schedulers.kubernetes.states import Obj

#: The CRDs of the custom flavors that ship with torchspec (see crds/README.md), for ``validate_manifests``.
BUNDLED_CRDS: Tuple[str, ...] = tuple(
    sorted(os.path.join(os.path.dirname(__file__), "crds", name)
           for name in ("batch.volcano.sh_jobs.yaml", "jobset.x-k8s.io_jobsets.yaml", "kubeflow.org_pytorchjobs.yaml",
                        "trainer.kubeflow.org_trainjobs.yaml"))
)


def as_pod(template: Obj) -> Obj:
    """A pod template as the Pod it makes, so that Pod's schema can check it."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", **(template.get("metadata") or {})},
            "spec": template.get("spec")}


def _error_path(error: Any) -> str:
    """Where in the object a schema error is, as ``spec.containers.0.image``."""
    return ".".join(str(p) for p in error.path)


def pod_problem(template: Obj) -> Optional[str]:
    """``path: message`` of what the newest bundled Kubernetes schema refuses in ``template``'s Pod;
    None when it accepts it, or when ``kubernetes-validate`` is not installed (nothing can be checked)."""
    try:
        import kubernetes_validate
    except ImportError:
        return None
    try:
        kubernetes_validate.validate(as_pod(template), kubernetes_validate.latest_version(), strict=True)
    except kubernetes_validate.ValidationError as e:
        return f"{_error_path(e)}: {e.message}"
    return None


def crd_schema(crd: Mapping[str, Any], version: Optional[str] = None, strict: bool = True) -> Obj:
    """The JSON Schema of a CRD's served ``version`` (default: the storage one), made checkable.

    OpenAPI's ``nullable: true`` becomes a ``null`` type; with ``strict``,
    every object that lists its properties refuses others (as the API server
    prunes them, silently, which is worse than an error here).
    """
    versions = crd["spec"]["versions"]
    chosen = next((v for v in versions if v["name"] == version), None) if version else \
        next((v for v in versions if v.get("storage")), versions[0])
    if chosen is None:
        raise KeyError(f"CRD {crd['metadata']['name']} does not serve version {version}")
    schema = copy.deepcopy(chosen["schema"]["openAPIV3Schema"])

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.pop("nullable", False) and "type" in node:
                node["type"] = [node["type"], "null"]
            if strict and "properties" in node and "additionalProperties" not in node \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(schema)
    return schema


def load_crds(paths: Iterable[str]) -> Dict[Tuple[str, str], Obj]:
    """CRD files -> {(apiVersion, kind): schema} for every served version."""
    import yaml

    out: Dict[Tuple[str, str], Obj] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for crd in yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
                for v in crd["spec"]["versions"]:
                    if v.get("served"):
                        out[(f"{group}/{v['name']}", kind)] = crd_schema(crd, v["name"])
    return out


def _pod_templates(obj: Obj) -> List[Tuple[str, Obj]]:
    """(where, pod template) of every pod template inside a flavor's custom object (a JobSet, a PyTorchJob...)."""
    flavor = flavor_of_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
    return flavor.pod_templates(obj) if flavor is not None else []


def validate_manifests(objs: Sequence[Obj], versions: Sequence[str] = ("1.25", "1.37"),
                       crd_paths: Iterable[str] = ()) -> List[str]:
    """Every problem the official schemas find in ``objs``, as ``Kind name (version): path: message``.

    Core kinds are checked with ``kubernetes-validate`` (strict: unknown
    fields are errors) for each Kubernetes ``version``; custom kinds against
    the CRDs in ``crd_paths`` (kinds without one are not checked), and the pod
    templates inside them as core Pods.  Raises ``RuntimeError`` when
    ``kubernetes-validate`` is not installed.
    """
    try:
        import kubernetes_validate
    except ImportError:
        raise RuntimeError("validating manifests needs the kubernetes-validate package:"
                           " pip install 'torchspec-cli[kubernetes-validate]'") from None
    import jsonschema

    crds = load_crds(crd_paths)
    problems: List[str] = []

    def core(obj: Obj, label: str) -> None:
        for version in versions:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                problems.append(f"{label} ({version}): {_error_path(e)}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError:
                return  # a custom kind whose CRD was not given: not checked

    for obj in objs:
        label = f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"
        api = (obj.get("apiVersion"), obj.get("kind"))
        if api in crds:
            validator = jsonschema.Draft7Validator(crds[api])  # type: ignore[index]
            for error in validator.iter_errors(obj):
                problems.append(f"{label} (CRD): {_error_path(error)}: {error.message}")
            for where, template in _pod_templates(obj):
                core(as_pod(template), f"{label} {where} pod template")
        else:
            core(obj, label)
    return problems
