"""What a spec or run option adds to a Slurm job beyond what torchspec models (issue 35), with no cluster:
``slurm.*`` keys (a typo refused, at its place), exclusive, signal, licenses, the pass-through sbatch_args and
srun_args (checked against the cluster's --help, injection refused or quoted), and container images (pyxis)."""

from __future__ import annotations

import pathlib
import shlex
import subprocess
import sys
import textwrap
from typing import Dict, Optional

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.lint import LintOptions
from torchspec.runner.check import lint_paths
from torchspec.schedulers.slurm.flags import ClientHelp, container_image, help_options
from torchspec.schedulers.slurm.options import slurm_run_opts
from torchspec.schedulers.slurm.scheduler import SlurmScheduler
from torchspec.schedulers.slurm.translate import app_to_request

ROOT = pathlib.Path(__file__).resolve().parents[3]
#: What a cluster's ``sbatch --help`` / ``srun --help`` list, in their own layout (Slurm 22.05), and the line
#: pyxis adds to srun's.
SBATCH_HELP = """Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]

Parallel run options:
  -A, --account=name          charge job to specified account
      --comment=name          arbitrary comment
  -J, --job-name=jobname      name of job
  -L, --licenses=names        required license, comma separated
      --mail-type=type        notify on state change: BEGIN, END, FAIL or ALL
  -o, --output=out            file for batch script's standard output
  -t, --time=minutes          time limit
      --signal=[[R][B]:]num[@time] send signal when time limit within time seconds
      --exclusive[=user]      allocate nodes in exclusive mode when
                              cpu consumable resource is enabled
  -B  --extra-node-info=S[:C[:T]]  combine request of sockets per node,
      --reservation=name      allocate resources from named reservation
"""
SRUN_HELP = """Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]

Parallel run options:
  -c, --cpus-per-task=ncpus   number of cpus required per task
  -l, --label                 prepend task number to lines of stdout/err
      --het-group=value       hetjob component allocation(s) in which to launch
"""
SRUN_USAGE = "Usage: srun [-N nnodes] [-n ntasks]\n            [--cpu-bind=...] [--mem-bind=...] [--exact]\n"
PYXIS_HELP = """
Options provided by plugins:
      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH
                              [pyxis] the image to use for the container
      --container-mounts=SRC:DST[:FLAGS][,SRC:DST...]
                              [pyxis] bind mount[s] inside the container.
"""


def cluster(pyxis: bool = False) -> Dict[str, ClientHelp]:
    """The --help of a cluster's sbatch and srun (with pyxis when asked), as the scheduler reads them."""
    srun = SRUN_HELP + (PYXIS_HELP if pyxis else "")
    return {"sbatch": ClientHelp("sbatch", help_options(SBATCH_HELP)),
            "srun": ClientHelp("srun", help_options(srun, SRUN_USAGE))}


@pytest.fixture
def img(tmp_path):
    folder = tmp_path / "img"
    folder.mkdir()
    (folder / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "run.sh").chmod(0o755)
    return str(folder)


def role(img: str, capabilities: Optional[dict] = None, **kw: object) -> specs.Role:
    base: dict = dict(name="trainer", image=img, entrypoint="run.sh",
                      resource=specs.Resource(cpu=1, gpu=0, memMB=512, capabilities=capabilities or {}))
    base.update(kw)
    return specs.Role(**base)  # type: ignore[arg-type]


def script(app: specs.AppDef, helps: Optional[Dict[str, ClientHelp]] = None, **cfg: object) -> str:
    resolved = slurm_run_opts().resolve(cfg)  # type: ignore[arg-type]
    return str(app_to_request(app, resolved, "/work", helps))


def sbatch_lines(text: str) -> list:
    return [line for line in text.splitlines() if line.startswith("#SBATCH")]


def refusal(app: specs.AppDef, helps: Optional[Dict[str, ClientHelp]] = None, **cfg: object) -> AppRefusedError:
    with pytest.raises(AppRefusedError) as raised:
        script(app, helps, **cfg)
    return raised.value


# ---------------------------------------------------------------- slurm.* keys


def test_help_text_is_read_as_option_names() -> None:
    names = help_options(SBATCH_HELP)
    assert {"--account", "-A", "--exclusive", "--signal", "-B", "--extra-node-info", "--reservation"} <= names
    assert "--cpu-bind" in help_options(SRUN_HELP, SRUN_USAGE) and "-N" in help_options("", SRUN_USAGE)
    assert "--container-image" in help_options(SRUN_HELP + PYXIS_HELP)
    assert not {"--deadline", "-min"} & names  # not from description lines


def test_an_unknown_slurm_capability_is_refused_with_a_guess_and_its_place(img) -> None:
    app = specs.AppDef("t", roles=[role(img, name="a"), role(img, name="b", capabilities={
        "slurm.gress": "gpu:1", "slurm.constrain": "a100", "kubernetes.gpu_resource": "amd.com/gpu"})])
    e = refusal(app)
    assert "role 'b': resource capability 'slurm.gress' is not one the slurm scheduler knows: did you mean" \
           " 'slurm.gres'?" in str(e)
    assert [(path, "did you mean 'slurm.constraint'?" in m) for path, m in e.problems] == [
        (("roles", 1, "resource", "capabilities", "slurm.gress"), False),
        (("roles", 1, "resource", "capabilities", "slurm.constrain"), True)]
    # role metadata: slurm reads none of its own
    e = refusal(specs.AppDef("t", roles=[role(img, metadata={"slurm.partition": "gpu", "team": "x"})]))
    assert e.problems[0][0] == ("roles", 0, "metadata", "slurm.partition")


def test_lint_dryrun_and_submit_refuse_the_typo_at_its_line(tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(textwrap.dedent("""\
        name: typo
        roles:
          - name: trainer
            image: .
            entrypoint: echo
            resource:
              cpu: 1
              capabilities:
                slurm.gress: gpu:1
        """))
    result = lint_paths([str(spec)], LintOptions(scheduler="slurm"))
    [d] = result.diagnostics
    assert (d.code, d.line, d.path) == ("TS601", 9, "roles[0].resource.capabilities.slurm.gress")
    assert "did you mean 'slurm.gres'?" in d.message
    for command in ("dryrun", "submit"):
        out = subprocess.run([sys.executable, "-m", "torchspec", command, "-s", "slurm", str(spec)],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert out.returncode == 2, out.stderr
        assert "'slurm.gress' is not one the slurm scheduler knows: did you mean 'slurm.gres'?" in out.stderr


def test_exclusive_from_the_run_option_or_the_capability(img) -> None:
    assert "#SBATCH --exclusive" not in script(specs.AppDef("t", roles=[role(img)]))
    two = specs.AppDef("t", roles=[role(img, name="a"), role(img, name="b")])
    assert sbatch_lines(script(two, exclusive=True)).count("#SBATCH --exclusive") == 2  # every component
    one = specs.AppDef("t", roles=[role(img, name="a", capabilities={"slurm.exclusive": True}),
                                   role(img, name="b", capabilities={"slurm.exclusive": "user"})])
    text = script(one, exclusive=True)
    assert "#SBATCH --exclusive\n" in text and "#SBATCH --exclusive=user\n" in text
    assert sbatch_lines(text).count("#SBATCH --exclusive") == 1
    assert "--exclusive" not in script(specs.AppDef("t", roles=[role(img, capabilities={"slurm.exclusive": False})]))
    assert "true, false, user" in str(refusal(specs.AppDef("t", roles=[role(img, capabilities={
        "slurm.exclusive": "yes please"})])))


@pytest.mark.parametrize("value, line", [
    ("USR1@120", "--signal=USR1@120"), ("SIGUSR2", "--signal=USR2"), ("10@60", "--signal=10@60"),
    ("R:TERM@30", "--signal=R:TERM@30"), ("usr1", "--signal=USR1")])
def test_a_valid_signal(img, value: str, line: str) -> None:
    assert f"#SBATCH {line}\n" in script(specs.AppDef("t", roles=[role(img)]), signal=value)


@pytest.mark.parametrize("value, words", [
    ("USR3@10", "is not a signal Slurm knows; did you mean 'USR"), ("0", "not a signal Slurm knows"),
    ("99@1", "not a signal Slurm knows"), ("USR1@soon", "is not a signal"), ("USR1@99999", "at most 65535"),
    ("B:USR1@60", "'B:' signals only the batch script"), ("USR1\n#SBATCH --uid=0", "is not a signal"),
    ("USR1 @60", "is not a signal")])
def test_an_invalid_signal_is_refused(img, value: str, words: str) -> None:
    assert words in str(refusal(specs.AppDef("t", roles=[role(img)]), signal=value))


def test_licenses_and_comment(img) -> None:
    text = script(specs.AppDef("t", roles=[role(img)]), licenses="matlab:2,fluent", comment="run 7")
    assert "#SBATCH --licenses=matlab:2,fluent\n" in text and "run 7'" in text


# ---------------------------------------------------------------- sbatch_args, srun_args


def test_pass_through_flags_go_where_they_belong(img) -> None:
    app = specs.AppDef("t", roles=[role(img, name="a"), role(img, name="b")])
    text = script(app, cluster(), sbatch_args=["--reservation=maint", "-A acc", "--mail-type END", "FAIL"],
                  srun_args=["--cpu-bind=cores", "--mem-bind local"])
    lines = sbatch_lines(text)
    for line in ("#SBATCH --reservation=maint", "#SBATCH -Aacc", "#SBATCH --mail-type=END,FAIL"):
        assert lines.count(line) == 2, line  # each component
    assert text.count("readonly -a TS_SRUN_OPTS=(--cpus-per-task=1 --mem=512M --cpu-bind=cores --mem-bind=local)") == 2
    assert "not checked" not in text


def test_pass_through_flags_unchecked_without_the_clients_say_so(img) -> None:
    text = script(specs.AppDef("t", roles=[role(img)]), sbatch_args=["--reservation=maint"])
    assert "#SBATCH --reservation=maint" in text
    assert "# torchspec: sbatch_args not checked against `sbatch --help` (not asked)" in text


def test_dryrun_without_slurm_installed_notes_it(img, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    scheduler = SlurmScheduler("s")
    help_ = scheduler.client_help("sbatch")
    assert help_.options is None and help_.why_unknown == "sbatch is not installed here"


@pytest.mark.parametrize("key, flag, words", [
    ("sbatch_args", "--exclusiv", "--exclusiv is not an option of this cluster's sbatch (`sbatch --help` does not"
                                  " list it); did you mean --exclusive?"),
    ("sbatch_args", "--resrvation=maint", "did you mean --reservation?"),
    ("srun_args", "--cpu-bnd=cores", "not an option of this cluster's srun"),
    ("sbatch_args", "--output=/tmp/x", "torchspec sets --output itself"),
    ("sbatch_args", "-J name", "torchspec sets --job-name itself: use the run option job_name_prefix"),
    ("sbatch_args", "--comment=x", "use the run option comment"),
    ("srun_args", "--het-group=1", "torchspec sets --het-group itself"),
    ("srun_args", "--container-image=x", "set the role's image"),
    ("sbatch_args", "reservation=maint", "is not a flag"),
])
def test_a_wrong_pass_through_flag_is_refused(img, key: str, flag: str, words: str) -> None:
    assert words in str(refusal(specs.AppDef("t", roles=[role(img)]), cluster(), **{key: [flag]}))


@pytest.mark.parametrize("item", [
    "--reservation=x\n#SBATCH --uid=0", "--reservation=x\nrm -rf ~", "--reservation=x y", "--reservation='x'",
    '--reservation="x"', "--reservation=x#y", "--reservation=a\\b", "--reservation=hetjob", "--reservation=x\rz",
    "--reservation=$(touch /tmp/pwned)", "--reservation=`id`"])
@pytest.mark.parametrize("key", ["sbatch_args", "srun_args"])
def test_injection_through_pass_through_flags_is_refused_or_quoted(img, tmp_path, key: str, item: str) -> None:
    """Every item either is refused or stays one word of one #SBATCH line / one quoted word of srun's options."""
    app = specs.AppDef("t", roles=[role(img)])
    flag = item if key == "sbatch_args" else item.replace("--reservation", "--cpu-bind")
    try:
        text = script(app, cluster(), log_dir=str(tmp_path / "logs"), **{key: [flag]})
    except AppRefusedError:
        return
    lines = text.splitlines()
    head = lines[:lines.index("set -uo pipefail")]
    assert all(line.startswith("#") or not line for line in head), head
    if key == "sbatch_args":
        assert head.count(f"#SBATCH {flag}") == 1
    else:
        [opts] = [line for line in lines if "TS_SRUN_OPTS=(" in line]
        assert shlex.split(opts.split("=(", 1)[1].rstrip(")"))[-1] == flag
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


# ---------------------------------------------------------------- container images (pyxis)


@pytest.mark.parametrize("image, pyxis", [
    ("docker://nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io#nvidia/pytorch:24.01-py3"),
    ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io#nvidia/pytorch:24.01-py3"),
    ("nvcr.io#nvidia/pytorch:24.01-py3", "nvcr.io#nvidia/pytorch:24.01-py3"),
    ("docker://ubuntu", "ubuntu"), ("ubuntu:22.04", "ubuntu:22.04"), ("pytorch/pytorch:2.3.0", "pytorch/pytorch:2.3.0"),
    ("localhost:5000/team/img", "localhost:5000#team/img"),
    ("ghcr.io/a/b@sha256:" + "0" * 64, "ghcr.io#a/b@sha256:" + "0" * 64),
    (".", None), ("/shared/img", None), ("./img", None), ("~/img", None), ("img", None), ("team/img", None),
])
def test_which_images_are_container_images(image: str, pyxis: Optional[str]) -> None:
    assert container_image(image, folder_exists=False) == pyxis


def test_an_existing_folder_stays_a_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "ubuntu:22.04").mkdir()
    assert container_image("ubuntu:22.04", folder_exists=True) is None
    text = script(specs.AppDef("t", roles=[role(str(tmp_path / "ubuntu:22.04"), entrypoint="/bin/true")]))
    assert "--container-image" not in text


def test_a_container_image_runs_under_pyxis(img, tmp_path) -> None:
    logs = str(tmp_path / "logs")
    app = specs.AppDef("t", roles=[role(img, name="a"),
                                   role("nvcr.io/nvidia/pytorch:24.01-py3", name="b", entrypoint="python",
                                        args=["-c", "print(1)", "${img_root}"])])
    text = script(app, cluster(pyxis=True), log_dir=logs)
    assert "# het group 1: role b, 1 replica(s), in the container image nvcr.io#nvidia/pytorch:24.01-py3 (pyxis)" \
           in text
    [opts_a, opts_b] = [line.strip() for line in text.splitlines() if "TS_SRUN_OPTS=(" in line]
    assert "--container" not in opts_a
    assert opts_b == (f"readonly -a TS_SRUN_OPTS=(--cpus-per-task=1 --mem=512M"
                      f" '--container-image=nvcr.io#nvidia/pytorch:24.01-py3' --container-mounts={logs}:{logs})")
    # the entrypoint is the image's (not looked for here), ${img_root} is empty, the step starts in the log root
    assert f"run_replica b 0 1 \"${{TS_NODES_1[0]}}\" 0 {logs} env" in text
    assert "        python -c 'print(1)' ''" in text
    assert "not checked" not in text


def test_without_pyxis_a_container_image_is_refused_naming_pyxis(img) -> None:
    app = specs.AppDef("t", roles=[role(img, name="a"), role("docker://ubuntu:22.04", name="b", entrypoint="true")])
    e = refusal(app, cluster(pyxis=False))
    assert "role 'b': image 'docker://ubuntu:22.04' is a container image, and this cluster's srun cannot run one:" \
           " it has no pyxis" in str(e)
    assert e.path == ("roles", 1, "image") and "pyxis" in (e.hint or "")


def test_a_container_image_with_srun_unknown_is_written_and_noted(tmp_path) -> None:
    text = script(specs.AppDef("t", roles=[role("ubuntu:22.04", entrypoint="true")]), log_dir=str(tmp_path))
    assert "--container-image=ubuntu:22.04" in text
    assert "# torchspec: role trainer runs in a container image, which needs pyxis on the cluster: not checked" in text


def test_the_scheduler_asks_srun_only_when_needed(img, tmp_path, monkeypatch) -> None:
    asked = []
    scheduler = SlurmScheduler("s")
    monkeypatch.setattr(scheduler, "client_help", lambda command: asked.append(command) or cluster(True)[command])
    cfg = slurm_run_opts().resolve({"log_dir": str(tmp_path)})
    scheduler.submit_dryrun(specs.AppDef("t", roles=[role(img)]), cfg)
    assert asked == []
    info = scheduler.submit_dryrun(specs.AppDef("t", roles=[role("docker://ubuntu", entrypoint="true")]), cfg)
    assert asked == ["srun"] and "--container-image=ubuntu" in str(info)
