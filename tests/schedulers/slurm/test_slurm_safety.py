"""What the slurm scheduler must never do, whatever a spec or a run option holds. No cluster.

- no value may add a line to the sbatch script (bash would run it) or split the job (hetjob/packjob);
- no app id but a Slurm job id may reach a path (``delete slurm://s/..`` must not remove TORCHSPEC_HOME);
- a role's environment reaches its replicas only, never the batch script (``LOG_DIR``, ``PATH``...);
- the script runs on a log root that does not exist yet, keeping its folders 0700 and files 0600.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from torchspec import specs
from torchspec.schedulers.slurm.options import default_log_root, slurm_run_opts
from torchspec.schedulers.slurm.scheduler import SlurmScheduler
from torchspec.schedulers.slurm.translate import app_to_request


@pytest.fixture
def img(tmp_path):
    folder = tmp_path / "img"
    folder.mkdir()
    script = folder / "run.sh"
    script.write_text('#!/bin/bash\necho "LOG_DIR=$LOG_DIR PATH=$PATH TS=${TS_LOG_DIR:-} app=$TORCHSPEC_APP_ID"\n')
    script.chmod(0o755)
    return str(folder)


def role(img: str, **kw: object) -> specs.Role:
    base: dict = dict(name="t", image=img, entrypoint="run.sh", resource=specs.Resource(cpu=1, gpu=0, memMB=0))
    base.update(kw)
    return specs.Role(**base)  # type: ignore[arg-type]


def script(app: specs.AppDef, **cfg: object) -> str:
    return str(app_to_request(app, slurm_run_opts().resolve(cfg), "/work"))  # type: ignore[arg-type]


def header(text: str) -> list:
    """The lines sbatch reads options from: every line up to the first command."""
    lines = text.splitlines()
    return lines[:lines.index("set -uo pipefail")]


def test_app_name_is_made_a_safe_job_name(img) -> None:
    text = script(specs.AppDef("x'\nrm -rf ~\n'", roles=[role(img)]))
    assert all(line.startswith("#") or not line for line in header(text)), header(text)
    assert "\nrm -rf ~" not in text
    assert "#SBATCH --job-name=x--rm--rf----\n" in text
    het = script(specs.AppDef("my-HetJob-packjob", roles=[role(img)]), job_name_prefix="ts:")
    assert "#SBATCH --job-name=ts-my-Het-Job-pack-job\n" in het
    sbatch_lines = [line for line in header(het) if line.startswith("#SBATCH")]
    assert [line for line in sbatch_lines if "hetjob" in line.lower() or "packjob" in line.lower()] == []


@pytest.mark.parametrize("key", ["partition", "time", "account", "qos", "constraint", "nodelist", "exclude",
                                 "comment", "mail_user", "mail_type", "job_name_prefix"])
@pytest.mark.parametrize("value", ["x\ntouch /tmp/pwned", "x\ry", "a#b", "my-hetjob", "PACKJOB", "x'y", "x\\y"])
def test_run_options_that_could_break_an_sbatch_line_are_refused(img, key, value) -> None:
    cfg = {key: value, "mail_user": "me@x.org"} if key == "mail_type" else {key: value}
    with pytest.raises(ValueError, match=f"run option {key} "):
        script(specs.AppDef("a", roles=[role(img)]), **cfg)


def test_whitespace_only_where_the_option_takes_it(img) -> None:
    app = specs.AppDef("a", roles=[role(img)])
    for key in ("partition", "time", "nodelist", "job_name_prefix", "mail_user"):
        with pytest.raises(ValueError, match=f"run option {key} .*whitespace"):
            script(app, **{key: "a b"})
    text = script(app, comment="my run 3", log_dir="/logs")
    assert "#SBATCH --comment='torchspec:/logs my run 3'\n" in text  # list reads torchspec:LOG_ROOT, then text


def test_spec_capabilities_log_dir_env_names_and_nul_are_checked(img, tmp_path) -> None:
    def bad(match: str, app_role: specs.Role, **cfg: object) -> None:
        with pytest.raises(ValueError, match=match):
            script(specs.AppDef("a", roles=[app_role]), **cfg)

    gres = specs.Resource(cpu=1, gpu=0, memMB=0, capabilities={"slurm.gres": "gpu:1\ntouch /tmp/x"})
    bad("slurm.gres", role(img, resource=gres))
    feature = specs.Resource(cpu=1, gpu=0, memMB=0, capabilities={"slurm.constraint": "a&hetjob"})
    bad("slurm.constraint", role(img, resource=feature))
    bad("log_dir", role(img), log_dir=str(tmp_path / "a\nb"))
    bad("log_dir", role(img), log_dir=str(tmp_path / "a#b"))
    bad("log_dir .*'%'", role(img), log_dir=str(tmp_path / "%u"))
    bad("not a valid environment variable name", role(img), env={"A-B": "1"})
    bad("not a valid environment variable name", role(img, env={"X;rm": "1"}))
    bad("NUL", role(img, args=["a\x00b"]))
    bad("role name", role(img, name=".."))


def test_the_role_env_reaches_the_replica_only_and_the_script_makes_its_folders(img, tmp_path) -> None:
    """Run the script with bash, srun and scontrol faked: logs land in the log root, whatever the env says."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text('#!/bin/bash\n# drop the options, then run the command in --chdir\n'
                               'while [[ $1 == -* ]]; do [[ $1 == --chdir=* ]] && cd "${1#--chdir=}"; shift; done\n'
                               'exec "$@"\n')
    (fake / "scontrol").write_text('#!/bin/bash\n[[ $2 == hostnames ]] && echo n1 || exit 1\n')
    for f in ("srun", "scontrol"):
        (fake / f).chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    env = {"LOG_DIR": str(elsewhere), "TS_LOG_DIR": str(elsewhere), "HETJOB": "1", "PATH": "/nonexistent",
           "SLURM_JOB_ID": "666", "TS_MAX_RETRIES": "9"}
    log_root = tmp_path / "new" / "logs"  # does not exist: as for `sbatch job.sbatch` on a fresh log root
    text = script(specs.AppDef("a", roles=[role(img, env=env)]), log_dir=str(log_root))
    assert "export " not in text
    (tmp_path / "job.sbatch").write_text(text)
    run_env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1", "HOME": str(tmp_path)}
    result = subprocess.run(["bash", str(tmp_path / "job.sbatch")], env=run_env, capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    replica = log_root / "5" / "t" / "0"
    assert (replica / "exitcode").read_text().strip() == "0"
    out = (replica / "stdout.log").read_text()
    assert f"LOG_DIR={elsewhere} PATH=/nonexistent TS={elsewhere} app=5" in out
    assert not elsewhere.exists()
    assert stat.S_IMODE(os.stat(log_root / "5").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(replica).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(replica / "stdout.log").st_mode) == 0o600


@pytest.fixture
def offline(monkeypatch) -> SlurmScheduler:
    """A scheduler that must not ask Slurm about anything but job ids, and that finds no job in Slurm."""
    sched = SlurmScheduler("t")

    def read_job(app_id: str) -> list:
        assert app_id.isascii() and app_id.isdigit(), f"asked Slurm about {app_id!r}"
        return []

    monkeypatch.setattr(sched, "read_job", read_job)
    monkeypatch.setattr(sched, "_run", lambda *a, **kw: pytest.fail(f"ran {a}"))
    return sched


@pytest.mark.parametrize("app_id", ["..", ".", "", "12/..", "../slurm", "/", "1 2", "\u0661\u0662", "12\n", "-1"])
def test_only_job_ids_name_a_folder(offline, app_id) -> None:
    home = os.environ["TORCHSPEC_HOME"]
    root = default_log_root()
    os.makedirs(os.path.join(root, "12"))
    open(os.path.join(home, "keep"), "w").close()
    assert offline.describe(app_id) is None
    assert offline.exists(app_id) is False
    offline.delete(app_id)
    offline.cancel(app_id)
    with pytest.raises(ValueError, match="unknown app"):
        list(offline.log_iter(app_id, "t"))
    assert os.path.exists(os.path.join(home, "keep")) and os.path.isdir(os.path.join(root, "12"))


def test_delete_removes_only_the_job_folder_a_link_leads_to(offline, tmp_path) -> None:
    root = default_log_root()
    os.makedirs(root)
    other = tmp_path / "other" / "not-a-job"
    other.mkdir(parents=True)
    os.symlink(other, os.path.join(root, "30"))  # a link to a folder that is not job 30's
    assert offline.describe("30") is None
    offline.delete("30")
    assert other.is_dir()
    custom = tmp_path / "custom"
    (custom / "31").mkdir(parents=True)
    (custom / "31.batch.log").write_text("x")
    os.symlink(custom / "31", os.path.join(root, "31"))  # what schedule() leaves for a job with its own log_dir
    assert offline.exists("31")
    offline.delete("31")
    assert not (custom / "31").exists() and not (custom / "31.batch.log").exists()
    assert not os.path.lexists(os.path.join(root, "31")) and custom.is_dir()
    with pytest.raises(ValueError, match="no replica"):
        os.makedirs(os.path.join(root, "32"))
        list(offline.log_iter("32", "../../x"))
