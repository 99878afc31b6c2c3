"""AppDef -> the memory backend's request: pure, so dry runs and tests need no backend."""

from __future__ import annotations

from typing import Dict, List, Mapping

from torchspec.specs import AppDef, CfgVal, Role, macros
from torchspec_memory.states import RANK0_ENV


class MemoryRequest:
    """What ``schedule`` receives: the app, its resolved cfg and every replica's filled-in role."""

    def __init__(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> None:
        self.app = app
        self.cfg = dict(cfg)

    def replicas(self, app_id: str) -> Dict[str, List[Role]]:
        return {role.name: role_replicas(role, app_id) for role in self.app.roles}

    def __str__(self) -> str:
        return f"MemoryRequest(app={self.app.name}, cfg={self.cfg})"


def role_replicas(role: Role, app_id: str) -> List[Role]:
    """One copy of ``role`` per replica, macros filled in as the backend would at launch."""
    return [macros.Values(img_root=role.image, app_id=app_id, replica_id=str(i), rank0_env=RANK0_ENV).apply(role)
            for i in range(role.num_replicas)]
