"""TSM's builder objects: ``Container``, ``Role``, ``ElasticRole``, ``Application``, ``RunConfig``.

TorchElastic's Training Session Manager (``torchelastic.tsm.driver``) said
an app with chained builders::

    trainer = Role(name="trainer").runs("train.py", "--epochs", "5", LR="0.1").on(container).replicas(4)
    app = Application(name="job").of(trainer)

Each object here keeps TSM's fields and methods and turns into torchspec's
own (:meth:`Application.to_appdef`), which the session then runs through
the Runner on any scheduler.  A :class:`Container` may hold a resource per
scheduler; the one for the scheduler the app runs on applies there only.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from torchspec.specs import MISSING, NULL_RESOURCE, AppDef, Resource, RetryPolicy, macros
from torchspec.specs import Role as SpecRole

#: The scheduler name under which a Container's resource applies on every scheduler (TSM's SchedulerBackend.ALL).
ALL = "all"


class SchedulerBackend:
    """TSM's name for a scheduler backend; ``ALL`` binds a resource to every one."""

    ALL = ALL


class SessionMismatchException(Exception):
    """The app handle belongs to another session (TSM raises it where a session acts on an app it must own)."""

    def __init__(self, app_handle: str, session_name: str) -> None:
        super().__init__(f"App handle: {app_handle} is not a handle in the current session: {session_name}")
        self.app_handle, self.session_name = app_handle, session_name


class AppNotReRunnableException(Exception):
    """The app was attached to the session (rebuilt from what the scheduler keeps), so it cannot run again."""

    def __init__(self, app: "Application") -> None:
        super().__init__(f"App {app.name} is attached (rebuilt from the scheduler by Session.attach), so it cannot"
                         " be re-run: run the Application it was made from instead")
        self.app = app


@dataclass
class Container:
    """What a role's replicas run in: an image (a Docker image, or a folder for the local scheduler), a
    resource per scheduler (``ALL``: every scheduler) and named ports."""

    image: str
    resources: Resource = field(default_factory=lambda: copy.deepcopy(NULL_RESOURCE))
    port_map: Dict[str, int] = field(default_factory=dict)
    #: scheduler -> resource, from :meth:`require` with a scheduler named
    scheduler_resources: Dict[str, Resource] = field(default_factory=dict)

    def require(self, resources: Resource, scheduler: str = ALL) -> "Container":
        if scheduler == ALL:
            self.resources = resources
        else:
            self.scheduler_resources[scheduler] = resources
        return self

    def ports(self, **kwargs: int) -> "Container":
        self.port_map.update(kwargs)
        return self

    def resource_for(self, scheduler: str) -> Resource:
        """The resource that applies on ``scheduler``: its own if :meth:`require` named it, else ``ALL``'s."""
        return copy.deepcopy(self.scheduler_resources.get(scheduler, self.resources))


@dataclass
class Role:
    """A set of replicas with one duty; built with :meth:`runs`, :meth:`on` and :meth:`replicas`."""

    name: str
    entrypoint: str = MISSING
    args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    container: Container = field(default_factory=lambda: Container(image=MISSING))
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION

    def runs(self, entrypoint: str, *args: str, **kwargs: str) -> "Role":
        """The command: ``entrypoint`` (relative to the image's root) with ``args``; ``kwargs`` are env."""
        self.entrypoint = entrypoint
        self.args += [*args]
        self.env.update({**kwargs})
        return self

    #: TSM's own example writes ``.run(...)``: the same.
    run = runs

    def on(self, container: Container) -> "Role":
        self.container = container
        return self

    def replicas(self, replicas: int) -> "Role":
        self.num_replicas = replicas
        return self

    def with_retry_policy(self, retry_policy: RetryPolicy, max_retries: int = 0) -> "Role":
        self.retry_policy = retry_policy
        self.max_retries = max_retries
        return self

    def to_spec(self, scheduler: str) -> SpecRole:
        """torchspec's Role for ``scheduler`` (the container's resource for it)."""
        return SpecRole(name=self.name, image=self.container.image, entrypoint=self.entrypoint,
                        args=list(self.args), env=dict(self.env), num_replicas=self.num_replicas,
                        max_retries=self.max_retries, retry_policy=RetryPolicy(self.retry_policy),
                        resource=self.container.resource_for(scheduler), port_map=dict(self.container.port_map))

    @classmethod
    def from_spec(cls, role: SpecRole) -> "Role":
        """A TSM Role of what a scheduler describes (the resource applies on every scheduler)."""
        container = Container(image=role.image, resources=role.resource, port_map=dict(role.port_map))
        return cls(name=role.name, entrypoint=role.entrypoint, args=list(role.args), env=dict(role.env),
                   container=container, num_replicas=role.num_replicas, max_retries=role.max_retries,
                   retry_policy=role.retry_policy)


#: The port rank 0's c10d store listens on, as ``dist.ddp``'s default.
RDZV_PORT = 29500
#: TSM spellings of torchrun's options.
_LAUNCH_NAMES = {"nprocs_per_node": "nproc_per_node"}


class ElasticRole(Role):
    """A Role whose entrypoint runs under torchrun (TSM ran ``torchelastic.distributed.launch``, which became
    torchrun): ``ElasticRole("trainer", nproc_per_node=8, nnodes="2:4", max_restarts=3)``.

    The replicas meet at the first replica's host (the c10d rendezvous on
    port 29500, as ``dist.ddp``); ``nnodes`` ``MIN:MAX`` lets the app run
    with MIN nodes (the role's ``min_replicas``), and defaults to the number
    of replicas.  Other keyword arguments become torchrun options
    (``--name value``, a true bool ``--name``).
    """

    def __init__(self, name: str, **launch_kwargs: Any) -> None:
        super().__init__(name=name)
        self.launch_kwargs = {_LAUNCH_NAMES.get(key, key): value for key, value in launch_kwargs.items()}

    def to_spec(self, scheduler: str) -> SpecRole:
        role = super().to_spec(scheduler)
        options = dict(self.launch_kwargs)
        nnodes = str(options.pop("nnodes", self.num_replicas))
        # ${rank0_env} is the NAME of the variable holding rank 0's host: bash expands it ($$ is a literal $);
        # a single node lets torchrun pick a free port
        endpoint = ("localhost:0" if nnodes.split(":")[-1] == "1"
                    else "$${" + macros.rank0_env + "}:" + str(RDZV_PORT))
        launch = {"rdzv_backend": "c10d", "rdzv_endpoint": endpoint, "rdzv_id": macros.app_id, "nnodes": nnodes,
                  **options}  # a rendezvous of the caller's own (rdzv_backend=etcd...) wins
        words = ["torchrun"]
        for key, value in launch.items():
            if isinstance(value, bool):
                words += [f"--{key}"] if value else []
            else:  # our endpoint is left for bash to expand
                words += [f"--{key}", value if value is endpoint else shlex.quote(str(value))]
        words += [shlex.quote(word) for word in [self.entrypoint, *self.args]]
        role.entrypoint, role.args = "bash", ["-c", " ".join(words)]
        if ":" in nnodes:
            role.min_replicas = int(nnodes.split(":")[0])
        role.port_map.setdefault("c10d", RDZV_PORT)
        return role


@dataclass
class Application:
    """A distributed app: named roles, built with :meth:`of`."""

    name: str
    roles: List[Role] = field(default_factory=list)
    #: rebuilt from a scheduler by :meth:`Session.attach`: it cannot be run again
    is_attached: bool = False

    def of(self, *roles: Role) -> "Application":
        self.roles += [*roles]
        return self

    def to_appdef(self, scheduler: str) -> AppDef:
        """torchspec's AppDef of this app for ``scheduler``."""
        return AppDef(name=self.name, roles=[role.to_spec(scheduler) for role in self.roles])


@dataclass
class RunConfig:
    """The run options (cfg) of a run: ``RunConfig().set("log_dir", "/tmp")``."""

    cfgs: Dict[str, Any] = field(default_factory=dict)

    def set(self, cfg_key: str, cfg_val: Any) -> None:
        self.cfgs[cfg_key] = cfg_val

    def get(self, key: str) -> Optional[Any]:
        return self.cfgs.get(key, None)

    def __repr__(self) -> str:
        return self.cfgs.__repr__()
