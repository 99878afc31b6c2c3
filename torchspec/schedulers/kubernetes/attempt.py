"""How a replica on Kubernetes knows which attempt it is on: ``TORCHSPEC_ATTEMPT``, 0 on the first run.

No controller hands a pod that number, but each writes its parts on the pods
it makes, where the downward API can read them:

- the Job controller, on each pod it makes again for an index (under
  ``backoffLimitPerIndex``, which every torchspec Job sets where the cluster
  has it): the index's earlier pods it counted as failed, and those it ignored
  (a disruption: evicted, preempted, its node lost);
- JobSet, on every pod: how often the whole JobSet restarted;
- Volcano, on every pod: how often the Job restarted.

Each part is a variable of its own (:data:`FAILURES`...), and a container restarted
in place (``restartPolicy: OnFailure``, as PyTorchJob's replicas are) counts its
own starts in the pod's ``/dev/shm``, an emptyDir that outlives the container.
Adding them up takes a shell: the container's command is wrapped in
``/bin/sh -c SCRIPT COMMAND ARGS...``, which exports the sum and ``exec``\\ s the
command (signals reach it, its exit code is the replica's).  The run option
``attempt_env=false`` leaves the command alone, for an image with no shell: the
parts are still there, the sum is not.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from torchspec.schedulers.kubernetes.states import (INDEX_FAILURE_COUNT, INDEX_IGNORED_FAILURE_COUNT,
                                                    JOBSET_RESTARTS_KEY, VOLCANO_RETRY_COUNT_KEY, Obj)
from torchspec.schedulers.replicas import ENV_ATTEMPT

#: The parts of an attempt number, as variables: (name, where the downward API reads it).
FAILURES = (f"{ENV_ATTEMPT}_FAILURES", f"metadata.annotations['{INDEX_FAILURE_COUNT}']")
DISRUPTIONS = (f"{ENV_ATTEMPT}_DISRUPTIONS", f"metadata.annotations['{INDEX_IGNORED_FAILURE_COUNT}']")
JOBSET_RESTARTS = (f"{ENV_ATTEMPT}_APP_RESTARTS", f"metadata.labels['{JOBSET_RESTARTS_KEY}']")
VOLCANO_RESTARTS = (f"{ENV_ATTEMPT}_APP_RESTARTS", f"metadata.annotations['{VOLCANO_RETRY_COUNT_KEY}']")
#: Every name a part may have: the role's own env cannot set them.
PART_NAMES = frozenset(name for name, _ in (FAILURES, DISRUPTIONS, JOBSET_RESTARTS, VOLCANO_RESTARTS))

#: Where a container counts its starts within its pod (the pod's /dev/shm is always an emptyDir).
STARTS_FILE = "/dev/shm/.torchspec-starts"


def part_env(parts: Sequence[Tuple[str, str]]) -> List[Obj]:
    """The container env entries that read each part (a missing annotation or label reads as ``""``)."""
    return [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}} for name, path in parts]


def script(parts: Sequence[Tuple[str, str]], exports: Sequence[str] = (), count: bool = True) -> str:
    """The ``sh -c`` script that exports ``exports`` (``NAME="$VALUE"``) and, with ``count``, the attempt number,
    then ``exec``\\ s its arguments.  Written without ``$(`` but for arithmetic, so that the kubelet's ``$(VAR)``
    expansion leaves it as it is; a part that is not a number stops the shell before the command runs."""
    lines = [f"export {e}" for e in exports]
    if count:
        terms = " + ".join(["starts"] + [f"${{{name}:-0}}" for name, _ in parts])
        lines += [
            f"f={STARTS_FILE}; starts=0; [ -r $f ] && read -r starts < $f",
            "case $starts in ''|*[!0-9]*) starts=0;; esac",
            "{ echo $((starts + 1)) > $f; } 2>/dev/null",
            f"export {ENV_ATTEMPT}=$(({terms}))",
        ]
    return "; ".join(lines + ['exec "$0" "$@"'])


def wrap(command: List[str], parts: Sequence[Tuple[str, str]], exports: Sequence[str] = (),
         count: bool = True) -> List[str]:
    """``command`` run by the shell that exports ``exports`` and, with ``count``, sets the attempt number first;
    as it is when there is nothing to export (``attempt_env=false`` on a flavor that exports nothing)."""
    if not count and not exports:
        return list(command)
    return ["/bin/sh", "-c", script(parts, exports, count)] + list(command)
