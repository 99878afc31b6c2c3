"""The docker scheduler's pure part: AppDef + run options -> containers, networks, labels. No engine needed."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.docker.labels import CANCELLED_SUFFIX, LABEL_APP_ID, LABEL_ATTEMPT, LABEL_ROLE
from torchspec.schedulers.docker.options import docker_run_opts
from torchspec.schedulers.docker.scheduler import DockerScheduler
from torchspec.schedulers.docker.translate import app_to_job, container_name, copied_env
from torchspec.schedulers.docker.views import AppView, ContainerView, view_of
from torchspec.schedulers.docker.workspace import workspace_context
from torchspec.schedulers.logfile import parse_stamp


def role(**kw: object) -> specs.Role:
    base: dict = dict(name="trainer", image="busybox:latest", entrypoint="sh", args=["-c", "echo ${replica_id}"])
    base.update(kw)
    return specs.Role(**base)  # type: ignore[arg-type]


def job(app: specs.AppDef, environ: dict | None = None, **cfg: object):
    resolved = docker_run_opts().resolve(cfg)  # type: ignore[arg-type]
    return app_to_job(app, resolved, "app-abc123", "sess", "/work", environ or {})


def test_one_container_per_replica_with_macros_and_rank0_host() -> None:
    app = specs.AppDef("app", roles=[role(num_replicas=3, args=["${replica_id}", "${app_id}", "$${${rank0_env}}"])])
    containers = job(app).containers
    assert [c.name for c in containers] == ["app-abc123-trainer-0", "app-abc123-trainer-1", "app-abc123-trainer-2"]
    assert [c.hostname for c in containers] == [c.name for c in containers]
    assert containers[2].command == ["2", "app-abc123", "${TORCHSPEC_RANK0_HOST}"]
    assert {c.env["TORCHSPEC_RANK0_HOST"] for c in containers} == {"app-abc123-trainer-0"}
    assert containers[1].env["TORCHSPEC_REPLICA_ID"] == "1"
    assert containers[0].entrypoint == ["sh"]


def test_network_per_app_by_default_and_named_or_builtin_on_request() -> None:
    app = specs.AppDef("app", roles=[role(num_replicas=2)])
    default = job(app)
    assert default.create_network and default.network == "torchspec-app-abc123"
    host = job(app, network="host")
    assert not host.create_network
    assert all(c.hostname is None and c.env["TORCHSPEC_RANK0_HOST"] == "localhost" for c in host.containers)
    named = job(app, network="mynet")
    assert not named.create_network and named.containers[0].hostname == "app-abc123-trainer-0"


def test_resources_become_limits_and_gpus_device_requests() -> None:
    res = specs.Resource(cpu=2, gpu=1, memMB=512)
    c = job(specs.AppDef("app", roles=[role(resource=res)]), shm_size="2g").containers[0]
    assert (c.nano_cpus, c.mem_limit_mb, c.gpu_count, c.shm_size) == (2_000_000_000, 512, 1, "2g")
    ids = specs.Resource(cpu=1, gpu=2, memMB=64, capabilities={"docker.gpu_device_ids": "0,3"})
    assert job(specs.AppDef("app", roles=[role(resource=ids)])).containers[0].gpu_device_ids == ["0", "3"]
    none = job(specs.AppDef("app", roles=[role()])).containers[0]
    assert (none.nano_cpus, none.mem_limit_mb, none.gpu_count) == (None, None, 0)


def test_host_config_the_engine_receives() -> None:
    from docker import APIClient

    res = specs.Resource(cpu=1, gpu=2, memMB=256)
    r = role(resource=res, port_map={"rdzv": 29500}, max_retries=3, retry_policy=specs.RetryPolicy.REPLICA,
             mounts=[specs.BindMount("data", "/data", read_only=True), specs.VolumeMount("ckpt", "/ckpt"),
                     specs.DeviceMount("/dev/fuse", "/dev/fuse", "rw")])
    c = job(specs.AppDef("app", roles=[r]), publish_ports=True, privileged=True).containers[0]
    kwargs = c.create_kwargs(APIClient(base_url="unix:///nonexistent", version="1.41"))
    host = kwargs["host_config"]
    assert host["Binds"] == ["/work/data:/data:ro", "ckpt:/ckpt:rw"]
    assert host["Devices"] == [{"PathOnHost": "/dev/fuse", "PathInContainer": "/dev/fuse", "CgroupPermissions": "rw"}]
    assert host["NanoCpus"] == 1_000_000_000 and host["Memory"] == 256 * 1024 * 1024
    assert host["DeviceRequests"][0]["Count"] == 2
    assert host["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert host["PortBindings"] == {"29500/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]}
    assert host["Privileged"] is True and host["NetworkMode"] == "torchspec-app-abc123"
    aliases = kwargs["networking_config"]["EndpointsConfig"]["torchspec-app-abc123"]["Aliases"]
    assert aliases == ["app-abc123-trainer-0"]


def test_only_replica_policy_uses_the_engines_restart_policy() -> None:
    for policy, expected in [("REPLICA", 2), ("APPLICATION", 0), ("ROLE", 0)]:
        r = role(max_retries=2, retry_policy=specs.RetryPolicy(policy))
        assert job(specs.AppDef("app", roles=[r])).containers[0].restart_max == expected


def test_env_precedence_and_copied_values_never_printed() -> None:
    r = role(env={"A": "role", "B": "role"})
    environ = {"AWS_SECRET_ACCESS_KEY": "hunter2", "AWS_REGION": "eu", "A": "shell", "OTHER": "x"}
    j = job(specs.AppDef("app", roles=[r]), environ, copy_env=["AWS_*", "A"], env={"B": "opt"})
    env = j.containers[0].env
    assert env["AWS_SECRET_ACCESS_KEY"] == "hunter2" and env["A"] == "role" and env["B"] == "opt"
    assert "OTHER" not in env
    text = str(j)
    assert "hunter2" not in text and "AWS_SECRET_ACCESS_KEY=<copied from the submitting environment>" in text
    assert copied_env(["X?"], {"XA": "1", "XAB": "2"}) == {"XA": "1"}


def test_labels_let_any_process_rebuild_the_role() -> None:
    from torchspec.specs.convert import build_role

    r = role(num_replicas=2, env={"K": "${app_id}"}, max_retries=1)
    c = job(specs.AppDef("app", roles=[r])).containers[1]
    assert c.labels[LABEL_APP_ID] == "app-abc123" and c.labels[LABEL_ATTEMPT] == "0"
    rebuilt = build_role(json.loads(c.labels[LABEL_ROLE]))
    assert rebuilt.env == {"K": "${app_id}"} and rebuilt.num_replicas == 2 and rebuilt.max_retries == 1


def test_dryrun_text_is_complete() -> None:
    r = role(mounts=[specs.VolumeMount("ckpt", "/ckpt", read_only=True)], port_map={"p": 80})
    text = str(job(specs.AppDef("app", roles=[r])))
    for expected in ["network: torchspec-app-abc123 (created", "volumes", "ckpt", "app-abc123-trainer-0:",
                     "80/tcp exposed, not published", "volume:     ckpt:/ckpt:ro", "stop grace: 10s"]:
        assert expected in text, expected


@pytest.mark.parametrize("bad,message", [
    (specs.AppDef("app", roles=[]), "has no roles"),
    (specs.AppDef("app", roles=[role(name="a_b"), role(name="a-b")]), "would share the container names"),
    (specs.AppDef("app", roles=[role(resource=specs.Resource(1, 0, 64, devices={"foo/bar": 1}))]),
     "cannot provide the device 'foo/bar'"),
])
def test_refuses_what_docker_cannot_run(bad: specs.AppDef, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        job(bad)


@pytest.mark.parametrize("image", [".", "./img", "../img", "/home/me/img", "~/img", ""])
def test_a_folder_for_an_image_is_refused_before_any_build(image: str) -> None:
    """`.` (the components' default) is no image: dry run, submit and a --workspace build refuse it, naming the
    role, with a hint, as TS603 at the role's image; nothing reaches an engine."""
    app = specs.AppDef("app", roles=[role(), role(name="reader", image=image)])
    with pytest.raises(AppRefusedError) as raised:
        job(app)
    assert "role 'reader'" in str(raised.value) and "docker runs every role in a container image" in str(raised.value)
    assert (raised.value.code, raised.value.path) == ("TS603", ("roles", 1, "image"))
    assert "-p image=NAME" in (raised.value.hint or "")
    sched = DockerScheduler("sess")
    sched.client = None  # type: ignore[assignment]  # an engine call would fail with a TypeError
    with pytest.raises(AppRefusedError, match="role 'trainer'"):
        sched.build_workspace_and_update_role(role(image=image), "/nonexistent", {})


def test_default_bridge_is_refused_where_replicas_must_find_rank0() -> None:
    with pytest.raises(ValueError, match="default bridge network"):
        job(specs.AppDef("app", roles=[role(num_replicas=2)]), network="bridge")
    one = job(specs.AppDef("app", roles=[role()]), network="bridge").containers[0]
    assert one.env["TORCHSPEC_RANK0_HOST"] == "localhost" and "network alias" not in str(one.describe_lines())


def test_stop_timeout_zero_is_kept_and_negative_refused() -> None:
    assert job(specs.AppDef("app", roles=[role()]), stop_timeout=0).containers[0].stop_timeout == 0
    with pytest.raises(ValueError, match="stop_timeout=-1 must be 0 or more"):
        job(specs.AppDef("app", roles=[role()]), stop_timeout=-1)


@pytest.mark.parametrize("metadata, capabilities, message", [
    ({"docker.working_dir": {"a": "b"}}, {}, "must be an absolute path"),
    ({"docker.working_dir": "relative"}, {}, "must be an absolute path"),
    ({}, {"docker.gpu_device_ids": {"x": 1}}, "comma-separated GPU ids"),
])
def test_metadata_and_capabilities_of_the_wrong_type_are_refused(metadata: dict, capabilities: dict,
                                                                  message: str) -> None:
    r = role(metadata=metadata, resource=specs.Resource(1, 1, 64, capabilities=capabilities))
    with pytest.raises(ValueError, match=message):
        job(specs.AppDef("app", roles=[r]))


def test_bad_pull_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="pull must be one of"):
        job(specs.AppDef("app", roles=[role()]), pull="sometimes")


def test_names_stay_valid_hostnames() -> None:
    long_id = "a" * 40 + "-abc123"
    name = container_name(long_id, "Very_Long_Role_Name_" * 4, 99999)
    assert len(name) <= 63 and name.startswith(long_id + "-very-lon")


def test_submit_dryrun_needs_no_engine() -> None:
    sched = DockerScheduler("s", client=None)
    info = sched.submit_dryrun(specs.AppDef("My App", roles=[role()]), {})
    assert info.request.app_id.startswith("my-app-")
    assert "docker app my-app-" in str(info)


def _attrs(name: str, status: str, exit_code: int = 0, attempt: int = 0, policy: str = "APPLICATION",
           retries: int = 0, restarts: int = 0, replica: int = 0) -> dict:
    return {
        "Id": name, "Name": "/" + name, "RestartCount": restarts, "Created": "2026-01-01T00:00:00Z",
        "State": {"Status": status, "ExitCode": exit_code, "OOMKilled": False, "Error": "",
                  "FinishedAt": "2026-01-01T00:00:0%dZ" % replica},
        "Config": {"Hostname": name, "Labels": {
            "torchspec.role-name": "w", "torchspec.replica-id": str(replica), "torchspec.attempt": str(attempt),
            LABEL_ROLE: json.dumps({"retry_policy": policy, "max_retries": retries})}},
    }


def test_states_from_inspect() -> None:
    assert view_of(_attrs("a", "running")).state == specs.AppState.RUNNING
    assert view_of(_attrs("a", "created")).state == specs.AppState.PENDING
    assert view_of(_attrs("a", "restarting")).state == specs.AppState.PENDING
    assert view_of(_attrs("a", "exited", 0)).state == specs.AppState.SUCCEEDED
    assert view_of(_attrs("a", "exited", 1)).state == specs.AppState.FAILED
    assert view_of(_attrs("a" + CANCELLED_SUFFIX, "exited", 143)).state == specs.AppState.CANCELLED
    oom = _attrs("a", "exited", 137)
    oom["State"]["OOMKilled"] = True
    assert "OOMKilled" in view_of(oom).describe_failure()


def test_app_state_waits_for_pending_retries() -> None:
    def app(*attrs: dict) -> AppView:
        return AppView("x", [view_of(a) for a in attrs])

    pending = app(_attrs("w0", "exited", 3, retries=2), _attrs("w1", "running", replica=1))
    assert pending.state == specs.AppState.RUNNING and "restarting (APPLICATION retry 1 of 2)" in pending.msg
    spent = app(_attrs("w0", "exited", 3, attempt=2, retries=2), _attrs("w1", "exited", 0, attempt=2, replica=1))
    assert spent.state == specs.AppState.FAILED and spent.msg.startswith("w/0 exited with code 3 after 2 restarts")
    replica = app(_attrs("w0", "exited", 3, policy="REPLICA", retries=2, restarts=2))
    assert replica.state == specs.AppState.FAILED
    latest = app(_attrs("w0.attempt0", "exited", 3, retries=1), _attrs("w0", "exited", 0, attempt=1))
    assert latest.state == specs.AppState.SUCCEEDED and [c.attempt for c in latest.replicas_of("w", 0)] == [0, 1]
    assert isinstance(latest.current[0], ContainerView) and latest.current[0].attempt == 1


def test_parse_stamp() -> None:
    when, rest = parse_stamp(b"2026-11-23T15:01:02.123456789Z hello world")
    assert rest == b"hello world" and when is not None and when.microsecond == 123456 and when.tzinfo is not None
    assert parse_stamp(b"no stamp")[0] is None
    when, rest = parse_stamp(b"2026-11-23T16:01:02.5+01:00 kubelet line")
    assert rest == b"kubelet line" and when is not None and when.hour == 16 and when.utcoffset().seconds == 3600


def test_workspace_context_is_reproducible_and_honours_dockerignore(tmp_path) -> None:
    (tmp_path / "a.py").write_text("print(1)")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("b")
    (tmp_path / "secret.env").write_text("x")
    (tmp_path / ".dockerignore").write_text("*.env\n")
    os.symlink("/etc/passwd", tmp_path / "link")
    ws = specs.Workspace({str(tmp_path): ""})
    data, digest = workspace_context("busybox", "sha256:1", ws)
    again, digest_again = workspace_context("busybox", "sha256:1", ws)
    assert data == again and digest == digest_again
    assert workspace_context("busybox", "sha256:2", ws)[1] != digest  # a new base image means a new build
    names = tarfile.open(fileobj=io.BytesIO(data)).getnames()
    assert set(names) == {"Dockerfile", ".dockerignore", "ws/a.py", "ws/sub/b.txt", "ws/link"}
    link = tarfile.open(fileobj=io.BytesIO(data)).getmember("ws/link")
    assert link.issym() and link.linkname == "/etc/passwd"  # a link, never the file it points to
    (tmp_path / "a.py").write_text("print(2)")
    assert workspace_context("busybox", "sha256:1", ws)[1] != digest


def test_each_replacement_is_told_its_attempt() -> None:
    """A replica starts at TORCHSPEC_ATTEMPT=0 (a role's own value loses); the watcher's replacement of a
    container says the next attempt, in its environment as in its label, every other variable kept."""
    from torchspec.schedulers.docker.watcher import next_attempt

    env = job(specs.AppDef("app", roles=[role(env={"TORCHSPEC_ATTEMPT": "7"})])).containers[0].env
    assert env["TORCHSPEC_ATTEMPT"] == "0"
    attrs = {"Config": {"Env": ["A=1", "TORCHSPEC_ATTEMPT=0", "B=2"], "Labels": {"torchspec.attempt": "0"},
                        "Hostname": "app-abc123-trainer-0"}, "HostConfig": {"NetworkMode": "bridge"}}
    config = next_attempt(attrs, 2)
    assert config["Env"] == ["A=1", "B=2", "TORCHSPEC_ATTEMPT=2"] and config["Labels"]["torchspec.attempt"] == "2"
    assert attrs["Config"]["Env"] == ["A=1", "TORCHSPEC_ATTEMPT=0", "B=2"]  # the old container's, untouched
