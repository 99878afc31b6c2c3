"""What the Kubernetes manifest tests share, with no cluster: a flavor's object and its role's pod template in
a dry run's objects, and the kubernetes page's examples dry-run and validated (so a page's promise is tested
the way the request is, in every flavor)."""

from __future__ import annotations

import pathlib
import re
from typing import Any, Dict, List

from torchspec.loader import load_app
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, validate_manifests

KUBERNETES_PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "schedulers" / "kubernetes.md"
#: The Kubernetes schemas every manifest is checked against: the oldest and the newest bundled.
#: The Kubernetes versions a manifest rendered without ``-c k8s_version`` is checked against: 1.29, the first with
#: backoffLimitPerIndex (every Job carries it), and the newest bundled; ``-c k8s_version=1.25`` renders for older.
VERSIONS = ["1.29", "1.37"]
#: The oldest Kubernetes ``-c k8s_version`` renders for.
LEGACY = "1.25"


def top(objs: List[Dict[str, Any]], flavor: str) -> Dict[str, Any]:
    """The flavor's own object among a dry run's objects (the first Job for job)."""
    impl = FLAVOR_TABLE[flavor]
    return next(o for o in objs if (o["apiVersion"], o["kind"]) == (impl.api_version, impl.kind))


def role_pod(objs: List[Dict[str, Any]], flavor: str) -> Dict[str, Any]:
    """The first role's pod template in the flavor's object (a TrainJob's trainer as its CRD's check sees it)."""
    obj = top(objs, flavor)
    if not FLAVOR_TABLE[flavor].custom:  # a batch/v1 Job
        return obj["spec"]["template"]
    (_, template), *_ = FLAVOR_TABLE[flavor].pod_templates(obj)
    return template


def page_example(tmp_path: pathlib.Path, section: str, name: str, flavor: str) -> List[Dict[str, Any]]:
    """The objects of the spec named ``name`` (a YAML block starting ``name: NAME``) under the kubernetes page's
    ``## SECTION``, dry-run as ``flavor``; the official schemas and the bundled CRDs accept them."""
    page = KUBERNETES_PAGE.read_text()
    text = page.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(rf"```yaml\n(name: {re.escape(name)}\n.*?)```", text, re.S)
    assert found, f"no spec named {name} under '## {section}' of {KUBERNETES_PAGE}"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(found.group(1))
    objs = KubernetesScheduler("test").submit_dryrun(load_app(str(spec)), {"flavor": flavor}).request.objects
    assert validate_manifests(objs, VERSIONS, list(BUNDLED_CRDS)) == []
    legacy = KubernetesScheduler("test").submit_dryrun(load_app(str(spec)), {"flavor": flavor, "k8s_version": LEGACY})
    assert validate_manifests(legacy.request.objects, [LEGACY], list(BUNDLED_CRDS)) == []
    return objs
