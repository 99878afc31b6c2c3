"""Which flavors there are: the one table every other module looks a flavor up in.

Adding a flavor is a module that subclasses :class:`~.flavor.Flavor` (see
``job.py``, ``jobset.py``, ``volcano.py``) and one entry in
:data:`FLAVOR_TABLE`: the run option's choices and help, the dry run, reading
an app back, ``list`` and manifest validation all follow from it.  The order
is the order ``-c flavor=`` lists them and the order an app is searched for.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from torchspec.schedulers.kubernetes import job, jobset, pytorchjob, trainjob, volcano
from torchspec.schedulers.kubernetes.flavor import Flavor

FLAVOR_TABLE: Dict[str, Flavor] = {f.name: f for f in (job.FLAVOR, jobset.FLAVOR, volcano.FLAVOR, pytorchjob.FLAVOR,
                                                       trainjob.FLAVOR)}
#: The values ``-c flavor=`` takes.
FLAVORS: Tuple[str, ...] = tuple(FLAVOR_TABLE)


def flavor_of_kind(api_version: str, kind: str) -> Optional[Flavor]:
    """The flavor whose top-level object is ``apiVersion``/``kind``, or None."""
    return next((f for f in FLAVOR_TABLE.values() if (f.api_version, f.kind) == (api_version, kind)), None)


#: The parts of an app whose handling differs between flavors (each flavor's ``carries`` says how), in the
#: order the kubernetes page's table lists them.
CARRY_ROWS: Tuple[Tuple[str, str], ...] = (
    ("needs", "needs on the cluster"), ("roles", "roles"), ("entrypoint", "entrypoint"),
    ("elastic", "`min_replicas` < `num_replicas`"), ("retries", "retries"), ("ports", "`port_map`"),
    ("mounts", "mounts"), ("pod_patch", "`kubernetes.pod_patch`"), ("replica_id", "`${replica_id}`"),
    ("queue", "`-c queue=`"), ("deadline", "`-c active_deadline=`"), ("order", "`depends_on`"),
)


def carry_table() -> str:
    """What each flavor can and cannot carry, as a markdown table, for docs/schedulers/kubernetes.md (docs/hooks.py
    puts it there)."""
    flavors = list(FLAVOR_TABLE.values())
    lines = ["| | " + " | ".join(f"`{f.name}`" for f in flavors) + " |",
             "| --- |" + " --- |" * len(flavors)]
    lines += [f"| {title} | " + " | ".join({**f.carries_by_default, **f.carries}[key] for f in flavors) + " |"
              for key, title in CARRY_ROWS]
    return "\n".join(lines)
