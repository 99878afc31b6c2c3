"""Whether an app's placement groups can ever be placed on a cluster: pure, for ``schedule`` and the driver.

Ray leaves a placement group that does not fit pending for ever.  torchspec
refuses an app whose groups can never fit the cluster's nodes as they are:
a bundle no node can hold, a STRICT_PACK group no node can hold whole, a
STRICT_SPREAD group with more bundles than nodes that can hold one, or more
of a resource than the whole cluster has.  The check is sound (it refuses
nothing that could fit), not complete: a packing that fails for want of a
cleverer bin-packing than Ray's waits, and the run option
``placement_timeout`` bounds that wait.  ``schedule`` checks against the
nodes the dashboard lists, and the driver again once it runs.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

Bundle = Mapping[str, float]


def amount(key: str, value: float) -> str:
    """``2 CPU``, ``1.5 GiB memory``: an amount of a resource in words."""
    if key in ("memory", "object_store_memory"):
        gib = value / 2**30
        number = f"{gib:g} GiB" if gib >= 1 else f"{value / 2**20:g} MiB"
        return f"{number} {key}"
    return f"{value:g} {key}"


def _fits(bundle: Bundle, node: Mapping[str, float]) -> bool:
    return all(node.get(key, 0) >= value for key, value in bundle.items())


def _bundle_problem(role: str, bundle: Bundle, nodes: Sequence[Mapping[str, float]], where: str) -> Optional[str]:
    if any(_fits(bundle, node) for node in nodes):
        return None
    for key, value in bundle.items():
        most = max((node.get(key, 0) for node in nodes), default=0)
        if most < value:
            has = f"no node has more than {amount(key, most)}" if most else f"no node has any {key}"
            return f"role {role!r} asks for {amount(key, value)} per replica, but {has} ({where})"
    together = " and ".join(amount(k, v) for k, v in bundle.items())
    return f"role {role!r} asks for {together} per replica, but no node has all of it at once ({where})"


def _total(bundles: List[Bundle]) -> Dict[str, float]:
    total: Dict[str, float] = {}
    for bundle in bundles:
        for key, value in bundle.items():
            total[key] = total.get(key, 0) + value
    return total


def _role_problem(role: Mapping[str, Any], nodes: Sequence[Mapping[str, float]], where: str) -> Optional[str]:
    name, strategy, bundles = role["role"], role["strategy"], role["bundles"]
    problem = _bundle_problem(name, bundles[0], nodes, where) if bundles else None
    if problem:
        return problem
    if strategy == "STRICT_PACK" and not any(_fits(_total(bundles), node) for node in nodes):
        total = " and ".join(amount(k, v) for k, v in _total(bundles).items())
        return (f"role {name!r} asks for {total} on one node (placement_strategy STRICT_PACK,"
                f" {len(bundles)} replicas), but no node has that much ({where})")
    if strategy == "STRICT_SPREAD":
        able = sum(1 for node in nodes if _fits(bundles[0], node))
        if able < len(bundles):
            return (f"role {name!r} asks for {len(bundles)} replicas on {len(bundles)} different nodes"
                    f" (placement_strategy STRICT_SPREAD), but only {able} node(s) can hold one ({where})")
    return None


def never_fits(roles: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, float]], where: str
               ) -> Optional[str]:
    """Why the roles' placement groups (the plan's ``roles``) can never be placed on ``nodes``; None if they may.

    ``nodes`` holds each live node's total resources; ``where`` names the
    cluster in the message (e.g. ``the cluster at 127.0.0.1:8265 has 2 nodes``).
    """
    for role in roles:
        problem = _role_problem(role, nodes, where)
        if problem:
            return problem
    cluster = _total(list(nodes))
    asked = _total([b for role in roles for b in role["bundles"]])
    for key, value in asked.items():
        if value > cluster.get(key, 0):
            parts = ", ".join(f"{r['role']}: {len(r['bundles'])} x {amount(key, r['bundles'][0].get(key, 0))}"
                              for r in roles if r["bundles"] and r["bundles"][0].get(key))
            return (f"the app asks for {amount(key, value)} in all ({parts}), but the whole cluster has"
                    f" {amount(key, cluster.get(key, 0))} ({where})")
    return None
