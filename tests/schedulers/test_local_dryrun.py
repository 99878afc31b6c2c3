"""The local scheduler's dry run: the request it builds and prints, without starting anything."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.entrypoint import resolve_entrypoint
from torchspec.schedulers.local.scheduler import LocalScheduler
from torchspec.schedulers.local.translate import LocalRequest, set_cuda_visible_devices
from torchspec.schedulers.replicas import ENV_RANK0_HOST, make_app_id


def role(name: str = "trainer", **kwargs: object) -> specs.Role:
    defaults: dict = {"image": ".", "entrypoint": "sh", "args": ["-c", "true"]}
    defaults.update(kwargs)
    return specs.Role(name=name, **defaults)


def test_request_substitutes_macros_per_replica_and_prints_everything(sched: LocalScheduler, tmp_path) -> None:
    app = specs.AppDef(
        "hello",
        roles=[
            role(
                image=str(tmp_path),
                args=["--rank", "${replica_id}", "--root", "${img_root}", "--id", "${app_id}", "$${${rank0_env}}"],
                env={"RID": "${replica_id}", "KEEP": "x"},
                num_replicas=2,
                max_retries=3,
                retry_policy=specs.RetryPolicy.ROLE,
            )
        ],
    )
    info = sched.submit_dryrun(app, {"env": {"KEEP": "from-cfg", "EXTRA": "${replica_id}"}})
    request: LocalRequest = info.request
    app_id = request.app_id
    assert request.app_dir == os.path.join(sched.state_dir, "apps", app_id)
    assert not os.path.exists(request.app_dir)  # a dry run writes nothing

    [role_request] = request.roles
    assert (role_request.max_retries, role_request.retry_policy) == (3, "ROLE")
    for k, replica in enumerate(role_request.replicas):
        assert replica.args == ["sh", "--rank", str(k), "--root", str(tmp_path), "--id", app_id,
                                f"${{{ENV_RANK0_HOST}}}"]
        assert replica.cwd == str(tmp_path)
        assert replica.env["RID"] == str(k)
        assert replica.env["KEEP"] == "from-cfg"  # the env run option wins over the role's env
        assert replica.env["EXTRA"] == str(k)
        assert replica.env["TORCHSPEC_REPLICA_ID"] == str(k)
        assert replica.env["TORCHSPEC_ROLE_NAME"] == "trainer"
        assert replica.env["TORCHSPEC_APP_ID"] == app_id
        assert replica.env["TORCHSPEC_NUM_REPLICAS"] == "2"
        assert replica.env[ENV_RANK0_HOST] == "localhost"
        assert replica.env["PYTHONUNBUFFERED"] == "1"
        assert replica.output == os.path.join(request.app_dir, "trainer", str(k), "output.log")

    text = str(info)
    assert f"local app {app_id}" in text
    assert f"sh --rank 1 --root {tmp_path} --id {app_id}" in text
    assert "RID=1" in text and f"cwd:      {tmp_path}" in text
    assert f'output:   {os.path.join(request.app_dir, "trainer", "1", "output.log")}' in text
    assert info.cfg["kill_grace_s"] == 5 and info.app is app


def test_request_round_trips_through_json(sched: LocalScheduler, tmp_path) -> None:
    request = sched.submit_dryrun(specs.AppDef("rt", roles=[role(image=str(tmp_path), num_replicas=2)]), {}).request
    again = LocalRequest.from_json(request.to_json())
    request.spec = {}
    assert again == request


def test_image_dot_is_the_submitting_folder_and_entrypoints_resolve(sched: LocalScheduler, tmp_path,
                                                                     monkeypatch) -> None:
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "run.sh"
    script.write_text("#!/bin/sh\necho run\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    app = specs.AppDef("img", roles=[role("a", entrypoint="bin/run.sh", args=[]), role("b", entrypoint="sh")])
    request = sched.submit_dryrun(app, {}).request
    assert request.roles[0].replicas[0].args == [str(script)]
    assert request.roles[0].replicas[0].cwd == str(tmp_path)
    assert request.roles[1].replicas[0].args[0] == "sh"  # left to PATH, which has it
    assert request.spec["roles"][0]["image"] == "."  # the spec keeps what was submitted


def test_the_program_a_shell_command_starts_is_found_before_launch(sched: LocalScheduler, tmp_path) -> None:
    """`bash -c "torchrun ..."` (dist.ddp) without torchrun on the replicas' PATH is refused at the dry run,
    with the fix, rather than every replica failing with `torchrun: command not found` (exit 4)."""
    bin_dir, image = tmp_path / "bin", tmp_path / "image"
    bin_dir.mkdir()
    image.mkdir()
    (bin_dir / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    path = {"PATH": str(bin_dir)}  # the replicas' PATH: bash, and no torchrun

    def dryrun(command: str, **env: str) -> LocalRequest:
        app = specs.AppDef("x", roles=[role(image=str(image), entrypoint="bash", args=["-c", command],
                                            env={**path, **env})])
        return sched.submit_dryrun(app, {}).request

    for command in ("torchrun --nnodes 1 train.py", "LOGLEVEL=INFO exec torchrun train.py"):
        with pytest.raises(AppRefusedError) as refused:
            dryrun(command)
        assert "role 'trainer': 'torchrun', which its bash -c command starts, is not a command on the replicas'" \
               " PATH" in refused.value.message
        assert refused.value.hint == "install PyTorch, which provides torchrun: pip install torch (or pip install" \
                                     " 'torchspec-cli[torch]')"
    with pytest.raises(AppRefusedError, match="no-such-tool"):
        dryrun("no-such-tool --flag")
    for command in ("./run.sh", "${img_root}/run.sh"):  # macros are filled first: the path the replica runs
        with pytest.raises(AppRefusedError, match="run.sh, which its bash -c command starts, does not exist"):
            dryrun(command)
    # what the shell runs itself, or what cannot be known without running it, is left to the replica
    for command in ("echo hi", "for i in 1 2; do torchrun; done", '"$TOOL" x', "$HOME/tool", "", "(torchrun)"):
        dryrun(command)
    # a program on the replicas' PATH, in the image folder (also on it) or at its path there is found
    torchrun = bin_dir / "torchrun"
    torchrun.write_text("#!/bin/sh\n")
    torchrun.chmod(0o755)
    dryrun("torchrun --nnodes 1 train.py")
    torchrun.rename(image / "torchrun")
    dryrun("torchrun --nnodes 1 train.py")
    dryrun("./torchrun")
    # entrypoints themselves were checked already; a missing torchrun gets the same fix
    with pytest.raises(AppRefusedError) as refused:
        sched.submit_dryrun(specs.AppDef("x", roles=[role(image=str(tmp_path), entrypoint="torchrun", env=path)]), {})
    assert (refused.value.hint or "").startswith("install PyTorch")


def test_bad_images_and_entrypoints_fail_the_dry_run(sched: LocalScheduler, tmp_path) -> None:
    with pytest.raises(ValueError, match="not a folder on this machine"):
        sched.submit_dryrun(specs.AppDef("x", roles=[role(image="ghcr.io/pytorch/pytorch:2.3.0")]), {})
    with pytest.raises(ValueError, match="'no-such-cmd' is neither a file under the image folder"):
        sched.submit_dryrun(specs.AppDef("x", roles=[role(image=str(tmp_path), entrypoint="no-such-cmd")]), {})
    with pytest.raises(ValueError, match="two roles named"):
        sched.submit_dryrun(specs.AppDef("x", roles=[role(image=str(tmp_path))] * 2), {})
    with pytest.raises(ValueError, match="cannot be used as a folder name"):
        sched.submit_dryrun(specs.AppDef("x", roles=[role("a/b", image=str(tmp_path))]), {})
    with pytest.raises(specs.InvalidRunConfigException):
        sched.submit_dryrun(specs.AppDef("x", roles=[role(image=str(tmp_path))]), {"kill_grace_s": "soon"})


def test_use_cwd_ignores_container_images(sched: LocalScheduler, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = specs.AppDef("x", roles=[role(image="ghcr.io/pytorch/pytorch:2.3.0")])
    request = sched.submit_dryrun(app, {"use_cwd": True}).request
    assert request.roles[0].replicas[0].cwd == str(tmp_path)


def test_prepend_cwd_puts_the_image_first_on_path(sched: LocalScheduler, tmp_path) -> None:
    app = specs.AppDef("x", roles=[role(image=str(tmp_path))])
    assert "PATH:     $PATH:" in str(sched.submit_dryrun(app, {}))
    info = sched.submit_dryrun(app, {"prepend_cwd": True})
    assert info.request.roles[0].replicas[0].prepend_path
    assert f"PATH:     {tmp_path}:$PATH" in str(info)


def test_run_opts_document_every_option(sched: LocalScheduler) -> None:
    opts = sched.run_opts()
    names = [name for name, _ in opts]
    assert names == ["state_dir", "use_cwd", "prepend_cwd", "auto_set_cuda_visible_devices", "kill_grace_s", "grace_period", "env"]
    assert all(opt.help and not opt.is_required for _, opt in opts)
    cfg = opts.resolve(opts.cfg_from_str("kill_grace_s=2,env=A:1;B:2,prepend_cwd=true"))
    assert cfg["kill_grace_s"] == 2 and cfg["env"] == {"A": "1", "B": "2"} and cfg["prepend_cwd"] is True


def test_app_ids_are_unique_and_safe_folder_names() -> None:
    assert make_app_id("hello", "k3x9q2") == "hello-k3x9q2"
    assert make_app_id("../my app/", "abcdef") == "my-app-abcdef"
    assert make_app_id("", "abcdef") == "app-abcdef"
    assert len({make_app_id("same") for _ in range(200)}) == 200


def test_resolve_entrypoint(tmp_path) -> None:
    (tmp_path / "train.py").write_text("")
    assert resolve_entrypoint("r", "train.py", str(tmp_path), os.environ.get("PATH")) == str(tmp_path / "train.py")
    assert resolve_entrypoint("r", sys.executable, str(tmp_path), "") == sys.executable
    sh = shutil.which("sh")
    assert sh is not None
    assert resolve_entrypoint("r", "sh", str(tmp_path), os.path.dirname(sh)) == "sh"
    with pytest.raises(ValueError, match="does not exist"):
        resolve_entrypoint("r", str(tmp_path / "nope"), str(tmp_path), "")


def test_cuda_visible_devices_are_handed_out_in_role_order(sched: LocalScheduler, tmp_path) -> None:
    app = specs.AppDef(
        "gpu",
        roles=[
            role("a", image=str(tmp_path), num_replicas=2, resource=specs.Resource(cpu=1, gpu=2, memMB=1)),
            role("b", image=str(tmp_path), resource=specs.Resource(cpu=1, gpu=-1, memMB=1)),
            role("c", image=str(tmp_path), resource=specs.Resource(cpu=1, gpu=1, memMB=1)),
        ],
    )
    request = sched.submit_dryrun(app, {}).request
    set_cuda_visible_devices(app, request.roles, device_count=8)
    devices = [[r.env.get("CUDA_VISIBLE_DEVICES") for r in role.replicas] for role in request.roles]
    assert devices == [["0,1", "2,3"], [None], ["4"]]

    request = sched.submit_dryrun(app, {}).request
    set_cuda_visible_devices(app, request.roles, device_count=4)  # 5 wanted: set nothing
    assert all("CUDA_VISIBLE_DEVICES" not in r.env for role in request.roles for r in role.replicas)


def test_validate_accepts_roles_without_resources(sched: LocalScheduler) -> None:
    sched._validate(specs.AppDef("x", roles=[role()]), "local")


def test_the_dry_run_prints_the_labels_the_app_keeps(sched: LocalScheduler) -> None:
    """An app's metadata are its labels (list -l selects by them): the dry run shows them, as docker's does."""
    app = specs.AppDef("labelled", roles=[role()], metadata={"team": "ml", "torchspec.dev/link.logs": "https://x"})
    printed = str(sched.submit_dryrun(app, {}))
    labels = printed.split("  labels (kept in state.json; describe and list -l read them):\n", 1)[1]
    assert labels.startswith("    team=ml\n    torchspec.dev/link.logs=https://x\n  role trainer:"), printed
    assert "labels" not in str(sched.submit_dryrun(specs.AppDef("bare", roles=[role()]), {}))
