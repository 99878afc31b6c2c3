"""What the two Kubeflow flavors share: one trainer role, and the operator's torchrun rendezvous instead of ours.

``pytorchjob`` (Training Operator) and ``trainjob`` (Trainer) both start the
nodes of one role and hand each the rendezvous in ``PET_*`` variables.  This
module checks a role against that model (:func:`one_role`,
:func:`launch_refusals`) and says which of its ports is the rendezvous the
operator now provides (:func:`rendezvous_port`).  Pure, like every flavor module.
"""

from __future__ import annotations

import re
from typing import Collection, List, Optional, Set

from torchspec.schedulers.kubernetes.flavor import Refusal
from torchspec.schedulers.kubernetes.torchrun import Launch
from torchspec.schedulers.replicas import ENV_REPLICA_ID, is_elastic  # noqa: F401 - pytorchjob, trainjob
from torchspec.specs import AppDef, Role

#: The port name dist.ddp gives torchrun's rendezvous (``port_map: {c10d: ...}``).
RENDEZVOUS_PORT_NAME = "c10d"
#: torchrun's own default for ``--nproc_per_node``: what the operators' ``auto`` must not replace.
DEFAULT_NPROC = "1"
#: ``$(TORCHSPEC_REPLICA_ID)`` as the pod template has it, not escaped (``$$(`` is a literal the user wrote).
_REPLICA_REF = re.compile(r"(?<!\$)((?:\$\$)*)\$\(" + ENV_REPLICA_ID + r"\)")


def one_role(app: AppDef, what: str) -> List[Refusal]:
    """A refusal for every role after the first: ``what`` (a PyTorchJob...) runs one role."""
    return [Refusal(("roles", i), f"role {role.name!r} is a second role: {what} runs one role")
            for i, role in enumerate(app.roles) if i > 0]


def launch_refusals(role: Role, launch: Launch, nproc_values: Collection[str]) -> List[Refusal]:
    """What in the torchrun command the operator's model cannot take: a node count other than the role's
    replicas, a process count it cannot pass on (only digits and ``nproc_values``)."""
    out: List[Refusal] = []
    nnodes = launch.nnodes
    wanted = (str(role.min_replicas if is_elastic(role) else role.num_replicas), str(role.num_replicas))
    if nnodes is not None and all(n.isdigit() for n in nnodes) and nnodes != wanted:
        out.append(Refusal(("roles", 0, "args"),
                           f"role {role.name!r}: torchrun --nnodes {launch.value('nnodes')} is not the role's"
                           f" {':'.join(dict.fromkeys(wanted))} replicas, which the operator starts"))
    nproc = launch.value("nproc_per_node")
    if nproc is not None and not nproc.isdigit() and nproc not in nproc_values:
        allowed = ", ".join(["a number", *nproc_values])
        out.append(Refusal(("roles", 0, "args"),
                           f"role {role.name!r}: torchrun --nproc_per_node {nproc}: the operator takes {allowed}"))
    return out


def nproc_per_node(launch: Launch) -> str:
    """Processes per node, as the torchrun command says (torchrun's default 1 where it does not)."""
    return launch.value("nproc_per_node") or DEFAULT_NPROC


def rendezvous_port(role: Role, launch: Launch) -> Optional[int]:
    """The rendezvous port: the one the command named, else the role's ``c10d`` port; None if neither."""
    return launch.port or role.port_map.get(RENDEZVOUS_PORT_NAME)


def rendezvous_port_names(role: Role, launch: Optional[Launch]) -> Set[str]:
    """The role's ports that are torchrun's rendezvous, which the operator now provides."""
    if launch is None:
        return set()
    port = rendezvous_port(role, launch)
    return {name for name, number in role.port_map.items() if name == RENDEZVOUS_PORT_NAME or number == port}


def replace_replica_id(text: str, ref: str) -> str:
    """``text`` with every (unescaped) ``$(TORCHSPEC_REPLICA_ID)`` reference made ``ref``."""
    return _REPLICA_REF.sub(lambda m: m.group(1) + ref, text)

