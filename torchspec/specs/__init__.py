"""The spec objects, mirroring ``torchx.specs``: AppDef, Role, Resource, statuses, run options, handles.

Everything TorchX users import from ``torchx.specs`` is importable from here
under the same name.  Importing this package is cheap: named resources are
discovered from entry points only when first looked up.
"""

from torchspec.specs.api import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    TORCHX_HOME,
    UNKNOWN,
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    AppStatusError,
    BindMount,
    CfgVal,
    DeviceMount,
    InvalidRunConfigException,
    MalformedAppHandleException,
    MountType,
    ParsedAppHandle,
    ReplicaState,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleDependency,
    RoleStatus,
    SecretRef,
    UnknownAppException,
    UnknownSchedulerException,
    VolumeMount,
    Workspace,
    get_type_name,
    is_started,
    is_terminal,
    macros,
    make_app_handle,
    parse_app_handle,
    parse_mounts,
    runopt,
    runopts,
)
from torchspec.specs.named_resources import _FACTORIES as _named_resource_factories
from torchspec.specs.named_resources import (
    _NamedResourcesLibrary,
    clear_named_resources_cache,
    get_named_resources,
    named_resource_names,
    named_resources,
    resource,
)

# Besides ``__all__`` (TorchX's list), the package also offers what TorchX
# users import from it anyway: GiB, AppStatusError, MountType, is_started and
# the registry internals TorchX's tests reach for.

#: One GiB in MB, for writing ``memMB=64 * GiB``.
GiB: int = 1024

__all__ = [
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "BindMount",
    "CfgVal",
    "DeviceMount",
    "get_type_name",
    "is_terminal",
    "macros",
    "MISSING",
    "NONE",
    "NULL_RESOURCE",
    "parse_app_handle",
    "ParsedAppHandle",
    "ReplicaState",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "runopt",
    "runopts",
    "UNKNOWN",
    "UnknownAppException",
    "UnknownSchedulerException",
    "InvalidRunConfigException",
    "MalformedAppHandleException",
    "VolumeMount",
    "Workspace",
    "TORCHX_HOME",
    "resource",
    "get_named_resources",
    "named_resources",
    "make_app_handle",
    "parse_mounts",
    "ALL",
]

