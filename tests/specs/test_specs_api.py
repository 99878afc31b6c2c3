"""AppDef, Role, Resource, macros, mounts and dry-run info (ported from TorchX's api tests, plus edge cases)."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, List

import pytest

import torchspec.specs as specs
import torchspec.specs.api as api
from torchspec.specs import named_resources, named_resources_aws
from torchspec.specs.api import (
    MISSING,
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    BindMount,
    DeviceMount,
    MountType,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    macros,
    parse_mounts,
)

# Every public name torchx.specs.api offers within torchspec's scope.
TORCHX_API_NAMES = [
    "ALL", "MISSING", "NONE", "NULL_RESOURCE", "UNKNOWN", "AppDef", "AppDryRunInfo", "AppHandle", "AppState",
    "AppStatus", "AppStatusError", "BindMount", "CfgVal", "DeviceMount", "InvalidRunConfigException",
    "MalformedAppHandleException", "MountType", "ParsedAppHandle", "ReplicaState", "ReplicaStatus", "Resource",
    "RetryPolicy", "Role", "RoleStatus", "UnknownAppException", "UnknownSchedulerException", "VolumeMount",
    "get_type_name", "is_started", "is_terminal", "macros", "make_app_handle", "parse_app_handle", "runopt",
    "runopts", "_TERMINAL_STATES", "_STARTED_STATES", "TORCHX_HOME", "Workspace", "cases",
    "_OVERRIDES_LOCK_KEY", "_OverridesLock",
]  # fmt: skip


@pytest.mark.parametrize("name", TORCHX_API_NAMES)
def test_api_offers_torchx_names(name: str) -> None:
    assert hasattr(api, name)


def test_package_all_is_importable_and_matches_api() -> None:
    for name in specs.__all__:
        assert hasattr(specs, name), name
    for name in ("GiB", "AppStatusError", "MountType", "is_started", "_NamedResourcesLibrary"):
        assert hasattr(specs, name), name
    assert specs.Role is api.Role and specs.named_resources is named_resources
    assert specs.GiB == 1024


def test_sentinels() -> None:
    assert (specs.ALL, specs.MISSING, specs.NONE, specs.UNKNOWN) == ("all", "<MISSING>", "<NONE>", "<UNKNOWN>")
    assert NULL_RESOURCE == Resource(cpu=-1, gpu=-1, memMB=-1)


# ---------------------------------------------------------------- Resource


def test_copy_resource() -> None:
    resource = Resource(1, 2, 3, {"test_key": "test_value", "old_key": "old_value"})
    new_resource = Resource.copy(resource, test_key="test_value_new", new_key="new_value")
    assert (new_resource.cpu, new_resource.gpu, new_resource.memMB) == (1, 2, 3)
    assert new_resource.capabilities == {"old_key": "old_value", "test_key": "test_value_new", "new_key": "new_value"}
    assert resource.capabilities["test_key"] == "test_value"


def test_copy_resource_owns_its_devices() -> None:
    resource = Resource(1, 2, 3, devices={"vpc.amazonaws.com/efa": 4})
    new_resource = Resource.copy(resource)
    new_resource.devices["nvidia.com/gpu"] = 1
    assert new_resource.devices == {"vpc.amazonaws.com/efa": 4, "nvidia.com/gpu": 1}
    assert resource.devices == {"vpc.amazonaws.com/efa": 4}


def test_copy_resource_owns_its_tags() -> None:
    resource = Resource(1, 2, 3, tags={api.RESOURCE_TAG_NAME: "gpu_4"})
    new_resource = Resource.copy(resource)
    new_resource.tags["extra"] = "x"
    assert new_resource.tags == {api.RESOURCE_TAG_NAME: "gpu_4", "extra": "x"}
    assert resource.tags == {api.RESOURCE_TAG_NAME: "gpu_4"}


def test_resource_tags() -> None:
    untagged = Resource(cpu=4, gpu=1, memMB=1024)
    assert untagged.tags == {} and not untagged.is_fractional() and untagged.get_resource_name() is None
    assert Resource(4, 1, 1024, tags={api.RESOURCE_TAG_IS_FRACTIONAL: True}).is_fractional()
    assert not Resource(4, 1, 1024, tags={api.RESOURCE_TAG_IS_FRACTIONAL: False}).is_fractional()
    assert Resource(4, 1, 1024, tags={api.RESOURCE_TAG_NAME: "gpu_4"}).get_resource_name() == "gpu_4"
    # tags take part in equality: a tagged copy is a different resource
    assert Resource(4, 1, 1024, tags={api.RESOURCE_TAG_NAME: "gpu_4"}) != untagged


def test_named_resources_match_their_functions() -> None:
    assert named_resources_aws.aws_m5_2xlarge() == named_resources["aws_m5.2xlarge"]
    assert named_resources_aws.aws_t3_medium() == named_resources["aws_t3.medium"]
    assert named_resources_aws.aws_p3_2xlarge() == named_resources["aws_p3.2xlarge"]
    assert named_resources_aws.aws_p3_8xlarge() == named_resources["aws_p3.8xlarge"]


# ---------------------------------------------------------------- Role and AppDef


def test_role_defaults() -> None:
    default = Role("foobar", "torch")
    assert (default.name, default.image, default.entrypoint) == ("foobar", "torch", MISSING)
    assert default.env == {} and default.args == [] and default.metadata == {} and default.port_map == {}
    assert default.resource == NULL_RESOURCE
    assert (default.num_replicas, default.min_replicas, default.max_retries) == (1, None, 0)
    assert default.retry_policy == RetryPolicy.APPLICATION
    assert default.base_image is None and default.mounts == [] and default.overrides == {}


def test_role_defaults_are_not_shared() -> None:
    first, second = Role("a", "img"), Role("b", "img")
    first.args.append("x")
    first.env["K"] = "v"
    assert second.args == [] and second.env == {}


def test_build_role() -> None:
    resource = Resource(cpu=1, gpu=2, memMB=128)
    trainer = Role(
        "trainer",
        image="torch",
        entrypoint="/bin/echo",
        args=["hello", "world"],
        env={"ENV_VAR_1": "FOOBAR"},
        num_replicas=2,
        min_replicas=1,
        retry_policy=RetryPolicy.REPLICA,
        max_retries=5,
        resource=resource,
        port_map={"foo": 8080},
        metadata={"foo": "bar"},
        mounts=[BindMount(src_path="/a", dst_path="/b")],
    )
    assert (trainer.name, trainer.image, trainer.entrypoint) == ("trainer", "torch", "/bin/echo")
    assert trainer.env == {"ENV_VAR_1": "FOOBAR"} and trainer.args == ["hello", "world"]
    assert trainer.metadata == {"foo": "bar"} and trainer.port_map == {"foo": 8080}
    assert trainer.resource == resource
    assert (trainer.num_replicas, trainer.min_replicas, trainer.max_retries) == (2, 1, 5)
    assert trainer.retry_policy == RetryPolicy.REPLICA
    assert trainer.mounts == [BindMount("/a", "/b", False)]


def test_retry_policies() -> None:
    assert {p.value for p in RetryPolicy} == {"REPLICA", "APPLICATION", "ROLE"}
    assert RetryPolicy("ROLE") is RetryPolicy.ROLE
    assert RetryPolicy.APPLICATION == "APPLICATION"


def test_pre_proc_returns_the_request_unchanged() -> None:
    info: AppDryRunInfo[dict[str, int]] = AppDryRunInfo({"a": 1}, str)
    assert Role("r", "img").pre_proc("local", info) is info


def test_application() -> None:
    trainer = Role("trainer", "test_image", entrypoint="/bin/sleep", args=["10"], num_replicas=2)
    app = AppDef(name="test_app", roles=[trainer])
    assert app.name == "test_app" and app.roles == [trainer]
    assert AppDef(name="test_app").roles == []
    app = AppDef(name="test_app", metadata={"test_key": "test_value"})
    assert app.metadata["test_key"] == "test_value" and app.metadata.get("non_existent") is None


# ---------------------------------------------------------------- overrides


def test_override_role() -> None:
    role = Role("foobar", "torch", overrides={"image": lambda: "base", "entrypoint": lambda: "nentry"})
    assert (role.image, role.entrypoint) == ("base", "nentry")
    assert role.name == "foobar"


def test_async_override_role() -> None:
    async def update(value: str, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return value

    role = Role("foobar", "torch", overrides={"image": update("base", 0.01), "entrypoint": update("nentry", 0.02)})
    assert (role.image, role.entrypoint) == ("base", "nentry")


def test_async_override_inside_a_running_loop() -> None:
    async def update(value: str) -> str:
        await asyncio.sleep(0)
        return value

    async def read_image() -> str:
        return Role("foobar", "torch", overrides={"image": update("base")}).image

    assert asyncio.run(read_image()) == "base"


def test_override_future_of_the_running_loop_raises_and_stays() -> None:
    async def read_image() -> None:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        role = Role("foobar", "torch", overrides={"image": future})
        with pytest.raises(RuntimeError, match="currently running in this thread"):
            _ = role.image
        assert role.overrides["image"] is future

    asyncio.run(read_image())


def test_override_future_of_a_loop_running_elsewhere() -> None:
    owner = asyncio.new_event_loop()
    thread = threading.Thread(target=owner.run_forever, daemon=True)
    thread.start()
    try:

        async def make_future() -> asyncio.Future[str]:
            future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.02, future.set_result, "base")
            return future

        future = asyncio.run_coroutine_threadsafe(make_future(), owner).result()
        assert Role("foobar", "torch", overrides={"image": future}).image == "base"
    finally:
        owner.call_soon_threadsafe(owner.stop)
        thread.join(timeout=5)
        owner.close()


def test_override_resolves_once_and_memoizes() -> None:
    calls: List[int] = []

    def produce() -> str:
        calls.append(1)
        time.sleep(0.02)
        return "base"

    role = Role("foobar", "torch", overrides={"image": produce})
    readers = [threading.Thread(target=lambda: role.image) for _ in range(4)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    assert role.image == "base" and len(calls) == 1
    assert role.overrides["image"]() == "base"
    assert vars(role)["image"] == "base"


def test_failed_override_keeps_the_producer() -> None:
    def boom() -> str:
        raise RuntimeError("boom")

    role = Role("foobar", "torch", overrides={"image": boom})
    with pytest.raises(RuntimeError, match="boom"):
        _ = role.image
    assert role.overrides["image"] is boom


def test_producer_may_read_another_override_of_the_same_role() -> None:
    overrides: dict[str, Any] = {"entrypoint": lambda: "nentry"}
    role = Role("foobar", "torch", overrides=overrides)
    overrides["image"] = lambda: f"{role.entrypoint}-img"
    assert role.image == "nentry-img"


def test_roles_with_resolved_overrides_deep_copy_and_compare() -> None:
    role = Role("foobar", "torch", overrides={"image": lambda: "base"})
    assert role.image == "base"
    clone = copy.deepcopy(role)
    assert clone.image == "base"
    assert asdict(role)["image"] == "base"


def test_resolution_mints_one_lock_per_overrides_dict() -> None:
    overrides: dict[str, Any] = {"image": lambda: "base"}
    first, second = Role("a", "torch", overrides=overrides), Role("b", "torch", overrides=overrides)
    assert api._OVERRIDES_LOCK_KEY not in overrides, "no lock before anything is resolved"
    assert first.image == "base" and second.image == "base"
    lock = overrides[api._OVERRIDES_LOCK_KEY]
    assert isinstance(lock, api._OverridesLock)
    assert second.overrides[api._OVERRIDES_LOCK_KEY] is lock, "roles sharing a dict share its lock"
    # the reserved key never turns into a Role attribute
    with pytest.raises(AttributeError):
        getattr(first, api._OVERRIDES_LOCK_KEY)


def test_shared_overrides_resolve_once_across_roles() -> None:
    calls: List[int] = []

    def produce() -> str:
        calls.append(1)
        time.sleep(0.02)
        return "base"

    overrides: dict[str, Any] = {"image": produce}
    roles = [Role(str(i), "torch", overrides=overrides) for i in range(4)]
    readers = [threading.Thread(target=lambda role=role: role.image) for role in roles]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    assert [role.image for role in roles] == ["base"] * 4 and len(calls) == 1


def test_slow_producer_does_not_block_other_dicts() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow() -> str:
        entered.set()
        assert release.wait(timeout=10)
        return "slow"

    slow_role = Role("slow", "torch", overrides={"image": slow})
    fast_role = Role("fast", "torch", overrides={"image": lambda: "fast"})
    got: List[str] = []
    worker = threading.Thread(target=lambda: got.append(slow_role.image), daemon=True)
    worker.start()
    try:
        assert entered.wait(timeout=10)
        assert fast_role.image == "fast"  # would block here under one process-wide lock
    finally:
        release.set()
        worker.join(timeout=10)
    assert got == ["slow"]


def test_resolved_reads_take_no_lock() -> None:
    role = Role("foobar", "torch", overrides={"image": lambda: "base"})
    assert role.image == "base"

    class Refuse:
        def __enter__(self) -> None:
            raise AssertionError("locked on a resolved read")

        def __exit__(self, *exc: object) -> None:
            return None

    role.overrides[api._OVERRIDES_LOCK_KEY].lock = Refuse()
    assert role.image == "base" and role.name == "foobar"


def test_overrides_lock_deep_copies_fresh_and_compares_equal() -> None:
    lock = api._OverridesLock()
    clone = copy.deepcopy(lock)
    assert clone is not lock and clone.lock is not lock.lock
    assert clone == lock and hash(clone) == hash(lock)


# ---------------------------------------------------------------- macros


def _values(**extra: str) -> macros.Values:
    return macros.Values(img_root="img_root", app_id="app_id", replica_id="replica_id", rank0_env="rank0_env", **extra)


def test_substitute() -> None:
    v = _values()
    for key, val in asdict(v).items():
        assert v.substitute(f"tmpl-{getattr(macros, key)}") == f"tmpl-{val}"


def test_substitute_keeps_unknown_placeholders_and_escapes() -> None:
    v = _values()
    assert v.substitute("${unknown} $$HOME ${app_id}") == "${unknown} $HOME app_id"


def test_rank0_env_may_be_left_out() -> None:
    v = macros.Values(img_root="i", app_id="a", replica_id="0", base_img_root="b")
    assert v.substitute("${rank0_env}:${base_img_root}:${app_id}") == "${rank0_env}:b:a"


def test_apply() -> None:
    role = Role(
        name="test",
        image="test_image",
        entrypoint=f"{macros.img_root}/foo.py",
        args=[macros.img_root],
        env={"FOO": macros.app_id},
    )
    newrole = _values().apply(role)
    assert newrole != role
    assert newrole.args == ["img_root"] and newrole.env == {"FOO": "app_id"}
    # only args, env values and metadata are substituted
    assert newrole.entrypoint == "${img_root}/foo.py"
    assert role.args == [macros.img_root] and role.env == {"FOO": macros.app_id}


def test_apply_substitutes_nested_metadata() -> None:
    role = Role(
        name="test",
        image="test_image",
        metadata={
            "level1": {
                "list_with_dicts": [{"key": macros.replica_id, "list": [macros.app_id, "static"]}, 42],
                "simple": macros.rank0_env,
            },
            "strings": [macros.app_id, macros.img_root, "static"],
        },
    )
    newrole = _values().apply(role)
    assert newrole.metadata == {
        "level1": {"list_with_dicts": [{"key": "replica_id", "list": ["app_id", "static"]}, 42], "simple": "rank0_env"},
        "strings": ["app_id", "img_root", "static"],
    }
    assert role.metadata["strings"] == [macros.app_id, macros.img_root, "static"]


def test_apply_shares_overrides_with_the_copy() -> None:
    overrides: dict[str, Any] = {"entrypoint": lambda: "lazy.py"}
    role = Role(name="test", image="test_image", args=[macros.img_root], overrides=overrides)
    newrole = _values().apply(role)
    assert role.overrides is overrides and newrole.overrides is overrides
    assert newrole.entrypoint == "lazy.py" and role.entrypoint == "lazy.py"
    assert newrole.args == ["img_root"]


def test_apply_copies_roles_with_unpicklable_overrides() -> None:
    async def image() -> str:
        return "built"

    role = Role(name="test", image="test_image", overrides={"image": image()})
    newrole = _values().apply(role)
    assert newrole.image == "built" and role.image == "built"


def test_apply_without_overrides_gives_the_copy_its_own_dict() -> None:
    role = Role(name="test", image="test_image")
    assert _values().apply(role).overrides is not role.overrides


def test_apply_treats_a_lock_only_dict_as_empty() -> None:
    role = Role(name="test", image="test_image")
    role.overrides[api._OVERRIDES_LOCK_KEY] = api._OverridesLock()
    newrole = _values().apply(role)
    assert newrole.overrides is not role.overrides and newrole.overrides == {}


# ---------------------------------------------------------------- TORCHX_HOME and Workspace


def test_torchx_home_defaults_under_the_user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHX_HOME", raising=False)
    monkeypatch.setattr(Path, "home", lambda: tmp_path / "sally")
    home = api.TORCHX_HOME()
    assert home == tmp_path / "sally" / ".torchx" and home.is_dir()


def test_torchx_home_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_HOME", str(tmp_path / "custom"))
    sub = api.TORCHX_HOME("conda-pack", "out")
    assert sub == tmp_path / "custom" / "conda-pack" / "out" and sub.is_dir()
    assert api.TORCHX_HOME() == tmp_path / "custom"


def test_workspace_truthiness_and_shape() -> None:
    assert not api.Workspace(projects={}) and not api.Workspace.from_str("")
    single = api.Workspace(projects={"/src/proj": ""})
    assert single and single.is_unmapped_single_project()
    assert not api.Workspace(projects={"/src/proj": "proj"}).is_unmapped_single_project()
    assert not api.Workspace(projects={"/a": "", "/b": ""}).is_unmapped_single_project()


@pytest.mark.parametrize(
    "projects, text",
    [
        ({"/src/proj": ""}, "/src/proj"),
        ({"/src/proj": "proj"}, "/src/proj:proj"),
        ({"/src/app": "", "/src/torch": "torch"}, "/src/app;/src/torch:torch"),
    ],
)
def test_workspace_str_round_trips(projects: dict[str, str], text: str) -> None:
    assert str(api.Workspace(projects=projects)) == text
    assert api.Workspace.from_str(text).projects == projects


def test_workspace_from_lines_with_comments() -> None:
    text = "# projects to ship\n/src/app:\n\n  /src/third-party/verl: verl  \n"
    assert api.Workspace.from_str(text).projects == {"/src/app": "", "/src/third-party/verl": "verl"}


def test_workspace_merge_into(tmp_path: Path) -> None:
    for rel in ("app/README.md", "app/bin/cli", "torch/setup.py", "torch/torch/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    out = tmp_path / "out"
    (out / "bin").mkdir(parents=True)
    (out / "bin" / "kept").write_text("already there")
    api.Workspace(projects={str(tmp_path / "app"): "", str(tmp_path / "torch"): "torch"}).merge_into(out)
    for rel in ("README.md", "bin/cli", "bin/kept", "torch/setup.py", "torch/torch/__init__.py"):
        assert (out / rel).is_file(), rel


# ---------------------------------------------------------------- dry-run info


def test_dryrun_info_repr_uses_fmt() -> None:
    seen: List[object] = []

    def fmt(request: dict[str, str]) -> str:
        seen.append(request)
        return "formatted"

    request = {"k": "v"}
    info = AppDryRunInfo(request, fmt)
    assert repr(info) == "formatted" and str(info) == "formatted"
    assert seen == [request, request] and info.request is request


def test_dryrun_info_app_and_cfg() -> None:
    info = AppDryRunInfo("req", str)
    assert info.app is None and dict(info.cfg) == {}
    app = AppDef(name="test_app")
    info._app = app
    info._cfg = {"cluster": "foo", "priority": 1}
    assert info.app is app and dict(info.cfg) == {"cluster": "foo", "priority": 1}
    with pytest.raises(TypeError):
        info.cfg["cluster"] = "bar"  # type: ignore[index]


# ---------------------------------------------------------------- mounts


def test_parse_mounts_empty() -> None:
    assert parse_mounts([]) == []
    assert parse_mounts("") == []


def test_parse_mounts() -> None:
    opts = [
        "type=bind", "src=foo", "dst=dst",
        "type=bind", "source=foo1", "readonly", "target=dst1",
        "type=volume", "destination=dst2", "source=foo2", "readonly",
        "type=device", "src=duck",
        "type=device", "src=foo", "dst=bar", "perm=rw",
        "type=bind", "src=~/foo", "dst=dst",
    ]  # fmt: skip
    assert parse_mounts(opts) == [
        BindMount(src_path="foo", dst_path="dst"),
        BindMount(src_path="foo1", dst_path="dst1", read_only=True),
        VolumeMount(src="foo2", dst_path="dst2", read_only=True),
        DeviceMount(src_path="duck", dst_path="duck", permissions="rwm"),
        DeviceMount(src_path="foo", dst_path="bar", permissions="rw"),
        BindMount(src_path=f"{Path.home()}/foo", dst_path="dst"),
    ]


def test_parse_mounts_string_form() -> None:
    assert parse_mounts("type=bind,src=/data,dst=/data,readonly,type=volume,src=v,dst=/v,") == [
        BindMount(src_path="/data", dst_path="/data", read_only=True),
        VolumeMount(src="v", dst_path="/v"),
    ]


def test_parse_mounts_invalid() -> None:
    with pytest.raises(KeyError, match="type must be specified first"):
        parse_mounts(["src=foo"])
    with pytest.raises(KeyError, match="unknown mount option blah, must be one of.*type"):
        parse_mounts(["blah=foo"])
    with pytest.raises(KeyError, match="src"):
        parse_mounts(["type=bind"])
    with pytest.raises(KeyError, match="dst"):
        parse_mounts(["type=volume", "src=v"])
    with pytest.raises(ValueError, match="invalid mount type.*must be one of.*bind"):
        parse_mounts(["type=foo"])
    with pytest.raises(ValueError, match="x is not a valid permission"):
        parse_mounts(["type=device", "src=/dev/fuse", "perm=rx"])


def test_mount_types() -> None:
    assert [t.value for t in MountType] == ["bind", "volume", "device"]
    assert DeviceMount("/dev/a", "/dev/a").permissions == "rwm"
