"""An app's placement groups go when the app ends, however it ends: its driver removes them, and a backstop.

A placement group holds its bundles' resources (GPUs, on a real cluster)
until it is removed.  Ray removes a job's groups once it learns that the
job's driver is gone, but torchspec does not stake a cluster's GPUs on
that alone: CI saw a group of a cancelled app hold its CPUs for minutes
after the app read CANCELLED (issue 42).  So:

1. The driver removes its groups on every way out (:func:`remove_groups`,
   from its ``finally``): the app succeeded or failed, a retry policy gave
   up, the groups could not be placed (or not within
   ``placement_timeout``), the driver raised, or it was stopped (SIGTERM)
   at any stage: before it created a group, while the groups wait to be
   placed, while the replicas run.  It takes SIGTERM (a flag) before it
   connects to Ray, so a cancel during its start is acted on too, and it
   removes what the cluster lists under the app's name
   (:func:`~.states.group_prefix`) as well as the groups it holds.
2. What no driver can do (it was SIGKILLed, crashed, lost its node), the
   backstop does, where a user looks: every time torchspec asks the
   cluster about an app whose job is terminal (``describe``, so ``status``,
   the last look of ``wait``, ``cancel``, ``delete``), it lists the groups
   still live that are named for the app or were made by its Ray job
   (:func:`leaked`), and, if there are any, submits a cleanup job
   (:func:`cleanup_submission`) that removes exactly those.

Why the backstop is a job: torchspec's client reaches the cluster only
through its dashboard, whose State API lists groups but cannot remove them;
only a process connected to the cluster can.  The job runs this module's
own source (``python -c``, so it needs no upload and no torchspec on the
cluster, and asks for no CPU), removes the groups by id, and prints what it
removed.  Its submission id names the app and the groups
(``torchspec-cleanup-<submission id>-<digest>``), so asking again about the
same leftovers submits nothing more; it carries no ``torchspec.app``
metadata, so ``list`` never shows it as an app.  A group of an app that
still runs is never touched: the backstop looks only at terminal apps.

This module runs on the cluster (the driver imports it, the cleanup job is
its source): it imports nothing but the standard library at the top, and
``ray`` or torchspec only inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import shlex
import sys
from typing import Any, Dict, Iterable, List, Mapping, Sequence

#: The metadata key of a cleanup job: the submission id of the app whose groups it removes.
META_CLEANUP = "torchspec.cleanup"
#: A group in one of these states holds, or waits for, the cluster's resources.
LIVE_STATES = ("PENDING", "PREPARED", "CREATED", "RESCHEDULING")


def remove_groups(prefix: str = "", ids: Sequence[str] = ()) -> List[str]:
    """Remove every live placement group whose id (hex) is one of ``ids`` or whose name starts with ``prefix``;
    the names (or ids) of those removed.  Needs a connected ``ray``; a group that went meanwhile (Ray removed it
    as its job ended) is skipped."""
    from ray import PlacementGroupID
    from ray.util import placement_group_table
    from ray.util.placement_group import PlacementGroup, remove_placement_group

    removed = []
    for group_id, info in placement_group_table().items():
        name = info.get("name") or ""
        if info.get("state") not in LIVE_STATES or not (group_id in ids or (prefix and name.startswith(prefix))):
            continue
        try:
            remove_placement_group(PlacementGroup(PlacementGroupID(bytes.fromhex(group_id))))
        except Exception:  # removed meanwhile: Ray says so with a ValueError or its own error types
            continue
        removed.append(name or group_id)
    return removed


def leaked(groups: Iterable[Mapping[str, str]], submission_id: str, job_id: str) -> List[Mapping[str, str]]:
    """The live groups of ``groups`` (``{"id", "name", "state", "job_id"}``, as ``RayCluster.placement_groups``
    lists them) that belong to the app: named for its submission id, or made by its driver's Ray job
    (``job_id``, empty when the driver never connected), as a group of an older torchspec, named for its role
    alone, was.  Pure: the caller knows the app is terminal."""
    from torchspec.schedulers.ray.states import group_prefix

    prefix = group_prefix(submission_id)
    return [g for g in groups if g.get("state") in LIVE_STATES
            and ((g.get("name") or "").startswith(prefix) or (job_id and g.get("job_id") == job_id))]


def cleanup_submission(submission_id: str, groups: Sequence[Mapping[str, str]]) -> Dict[str, Any]:
    """The ``submit_job`` arguments of the job that removes ``groups`` (left by the app ``submission_id``)."""
    ids = sorted(g["id"] for g in groups)
    digest = hashlib.sha256(" ".join(ids).encode()).hexdigest()[:10]
    with open(__file__, encoding="utf-8") as source:
        script = source.read()
    return {"entrypoint": f"python -c {shlex.quote(script)} {' '.join(ids)}",
            "submission_id": f"torchspec-cleanup-{submission_id}-{digest}",
            "metadata": {META_CLEANUP: submission_id},
            "entrypoint_num_cpus": 0}


def main(ids: List[str]) -> int:
    """The cleanup job: connect to the cluster it runs on, remove the groups ``ids``, say which went."""
    import logging

    import ray

    ray.init(logging_level=logging.WARNING)
    removed = remove_groups(ids=ids)
    print(f"removed {len(removed)} placement group(s) left behind: {', '.join(removed) or '-'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
