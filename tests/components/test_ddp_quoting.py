"""dist.ddp with a script path full of shell characters runs on every backend, quoted as TorchX quotes it.

TorchX's dist.ddp passes ``--script "my train.py"`` through ``shlex.quote``
into the ``bash -c`` torchrun line; torchspec must do the same, not refuse
the role name the path gives.  Each backend then carries that line its own
way (an argv for local and docker, an sbatch script for slurm, a manifest's
args for kubernetes), so each is proved on the real thing: local, docker
and slurm run it, and the words torchrun receives are checked; kubernetes
is checked on its manifest as the kubelet would read it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import shlex
import string
import subprocess
import sys
from typing import Any, Callable, Dict, List

import pytest
import skips
import slurm_support

from torchspec import specs
from torchspec.loader import load_app

ROOT = pathlib.Path(__file__).resolve().parents[2]
DDP = str(ROOT / "torchspec" / "components" / "dist" / "ddp.yaml")
EXE = pathlib.Path(sys.executable).with_name("torchspec")

#: a space, $, both quotes, ;, &, a backquote, $( ) and a newline: each one means something to a shell, to an
#: sbatch script or to Kubernetes' $(VAR) expansion
SCRIPT = "my tr$ain 'q\" ;& `id` $(id)\nz.py"
#: the role (and app) name TorchX would call "my tr$ain 'q\" ;& `id` $(id)\nz": what a role name can hold
ROLE = "my-tr-ain-q-id-id-z"
#: args are macro-substituted, as in TorchX (``${replica_id}`` works in them), so "$$" is one "$": "$$$$" is
#: how a spec writes "$$", which Kubernetes' expansion would read as "$" again unless escaped
ARGS = ["--msg", "a b $HOME ;& 'q\" $(TORCHSPEC_NAMESPACE) $$$$ ${replica_id}", ""]
RECEIVED = ["--msg", "a b $HOME ;& 'q\" $(TORCHSPEC_NAMESPACE) $$ 0", ""]
#: the script torchrun runs: its name and argv, one repr per line so that nothing in them can fake a line
PROBE = "import os, sys\nprint('RAN', repr(os.path.basename(__file__)), repr(sys.argv[1:]), flush=True)\n"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def need_torch() -> None:
    if not HAS_TORCH:
        skips.skip_or_fail("TORCH", "torch is not installed (bash scripts/test installs torch==2.13.0)")


def ddp_app(image: str, j: str = "1x1") -> specs.AppDef:
    return load_app(DDP, {"j": j, "script": SCRIPT, "image": image, "args": json.dumps(ARGS), "cpu": "1",
                          "memMB": "512"})


def torchrun_words(app_id: str, nnodes: str = "1", endpoint: str = "localhost:0",
                   args: List[str] = RECEIVED) -> List[str]:
    """The words torchrun must receive: TorchX's command for these inputs, split by a shell."""
    return ["torchrun", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id", app_id,
            "--nnodes", nnodes, "--nproc_per_node", "1", "--tee", "3", "--role", "", SCRIPT, *args]


def ran_line() -> str:
    """What the script prints when run by the real torchrun, which fills in its own macro ${local_rank} in the
    script's args with string.Template, so its "$$" is one "$" again."""
    return f"RAN {SCRIPT!r} {[string.Template(a).safe_substitute(local_rank='0') for a in RECEIVED]!r}"


def image_folder(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "image dir $x"
    folder.mkdir()
    (folder / SCRIPT).write_text(PROBE)
    return folder


def test_the_role_is_named_after_the_script_as_a_role_name_can_hold() -> None:
    app = ddp_app("busybox")
    assert app.name == app.roles[0].name == ROLE
    assert app.roles[0].entrypoint == "bash" and app.roles[0].args[0] == "-c"
    assert shlex.split(app.roles[0].args[1]) == torchrun_words("${app_id}", args=ARGS)
    for script, role in [("train.py", "train"), ("_x.py", "x"), ("$$.py", "ddp"), ("a--b.c.py", "a--b.c"),
                         ("dir with space/t t.py", "t-t")]:
        assert load_app(DDP, {"script": script}).roles[0].name == role, script


def test_the_cli_dry_runs_a_script_with_a_space(tmp_path: pathlib.Path) -> None:
    """The command of issue 14: `dist.ddp -j 1x2 --script "my train.py"` (torchspec's -p), refused before."""
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]
    stub = tmp_path / "bin" / "torchrun"  # local refuses a torchrun its replicas would not find: PyTorch or not
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\n")
    stub.chmod(0o755)
    r = subprocess.run(command + ["dryrun", "-s", "local", "dist.ddp", "-p", "j=1x2", "-p", "script=my train.py"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60,
                       env={**os.environ, "TORCHSPEC_HOME": str(tmp_path), "NO_COLOR": "1",
                            "PYTHONPATH": str(ROOT), "PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}"})
    assert r.returncode == 0, r.stderr
    assert "role my-train:" in r.stdout and "--role '\"'\"''\"'\"' '\"'\"'my train.py'\"'\"''" in r.stdout


# ---------------------------------------------------------------- local: submit --wait, for real


def test_local_runs_the_script(tmp_path: pathlib.Path) -> None:
    need_torch()
    folder = image_folder(tmp_path)
    env = {**os.environ, "TORCHSPEC_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]

    def torchspec(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command + list(args), capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=300)

    submitted = torchspec("submit", "-s", "local", "dist.ddp", "-p", "j=1x1", "-p", f"script={SCRIPT}",
                          "-p", f"image={folder}", "-p", f"args={json.dumps(ARGS)}", "--wait")
    handle = submitted.stdout.strip().splitlines()[0]
    logs = torchspec("logs", handle).stdout
    assert submitted.returncode == 0, submitted.stderr + logs
    assert ran_line() in logs, logs
    assert handle.startswith(f"local://torchspec/{ROLE}-")


# ---------------------------------------------------------------- docker: a real container


#: stand-ins in the busybox test image: bash runs the -c line with busybox's POSIX sh (the quoting shlex.quote
#: writes is POSIX), torchrun prints each word it gets, then checks the script is a file there
BASH_SHIM = '#!/bin/sh\nexec /bin/sh "$@"\n'
TORCHRUN_SHIM = """#!/bin/sh
for a in "$@"; do printf 'ARG<%s>\\n' "$a"; done
while [ "$#" -gt 0 ] && [ "$1" != --role ]; do shift; done
[ -f "$3" ] && printf 'FOUND<%s>\\n' "$3"
"""


def printed_words(logs: str) -> List[str]:
    return re.findall(r"ARG<(.*?)>\n(?=ARG<|FOUND<|\Z)", logs, re.DOTALL)


def test_docker_runs_the_line_in_a_container(tmp_path: pathlib.Path, busybox_image: str, docker_session: str,
                                             docker_cleanup: Any) -> None:
    from torchspec.runner import get_runner

    folder = image_folder(tmp_path)
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("bash", BASH_SHIM), ("torchrun", TORCHRUN_SHIM)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    app = ddp_app(busybox_image)
    role = app.roles[0]
    role.mounts += [specs.BindMount(str(shims), "/shims", read_only=True),
                    specs.BindMount(str(folder), "/work", read_only=True)]
    role.env["PATH"] = "/shims:/bin"
    role.metadata["docker.working_dir"] = "/work"
    with get_runner(docker_session) as runner:
        handle = runner.run(app, "docker", {"pull": "never"})
        status = runner.wait(handle, wait_interval=0.5, timeout=120)
        logs = "".join(runner.log_lines(handle, ROLE, 0))
    assert status is not None and status.state == specs.AppState.SUCCEEDED, logs
    app_id = handle.rsplit("/", 1)[1]
    assert printed_words(logs) == torchrun_words(app_id)[1:], logs  # the words after argv[0]
    assert f"FOUND<{SCRIPT}>" in logs


# ---------------------------------------------------------------- slurm: a real sbatch script


def test_slurm_runs_the_script(slurm_jobs: list, tmp_path: pathlib.Path) -> None:
    need_torch()
    from torchspec.schedulers.slurm.scheduler import SlurmScheduler

    folder = image_folder(tmp_path)
    app = ddp_app(str(folder))
    sched = SlurmScheduler("test")
    info = sched.submit_dryrun(app, {"log_dir": str(tmp_path / "logs")})
    job_id = sched.schedule(info)
    slurm_jobs.append(job_id)
    desc = slurm_support.wait_terminal(sched, job_id)
    logs = "".join(sched.log_iter(job_id, ROLE, 0))
    assert desc.state == specs.AppState.SUCCEEDED, f"{desc.msg}\n{logs}"
    assert ran_line() in logs, logs


# ---------------------------------------------------------------- kubernetes: the manifest, as the kubelet reads it


def kubernetes_expand(text: str, env: Callable[[str], str]) -> str:
    """What the kubelet makes of a command, args item or env value: Kubernetes' expansion (third_party/forked/
    golang/expansion), restated: ``$$`` is one ``$``, ``$(NAME)`` a defined variable's value (else kept as is),
    any other ``$`` itself."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(" and ")" in text[i + 2:]:
            end = text.index(")", i + 2)
            out.append(env(text[i + 2:end]))
            i = end + 1
        else:
            out.append("$" + text[i + 1])
            i += 2
    return "".join(out)


@pytest.mark.parametrize("j", ["1x1", "2x1"])
def test_kubernetes_args_reach_bash_intact(j: str) -> None:
    from torchspec.schedulers.kubernetes import attempt
    from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE
    from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler

    request = KubernetesScheduler("t").submit_dryrun(ddp_app("ghcr.io/acme/train:1", j=j), {}).request
    job = request.objects[1]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][-1] == "bash" and len(container["args"]) == 2 and container["args"][0] == "-c"
    assert container["command"][:3] == attempt.wrap([], FLAVOR_TABLE["job"].attempt_parts)  # the attempt's shell
    defined: Dict[str, str] = {"TORCHSPEC_NAMESPACE": "ml"}
    defined["TORCHSPEC_REPLICA_ID"] = "0"
    line = kubernetes_expand(container["args"][1], lambda name: defined.get(name, f"$({name})"))
    nnodes, endpoint = ("1", "localhost:0") if j == "1x1" else ("2", "${TORCHSPEC_RANK0_HOST}:29500")
    assert shlex.split(line) == torchrun_words(f"ml:{request.app_id}", nnodes, endpoint)
