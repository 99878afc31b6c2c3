"""A job on the real Slurm cluster records to the file tracker (a folder every node sees), and the CLI and the
dashboard's app page read back what it recorded."""

from __future__ import annotations

import json
import pathlib
import sys

import tracker_support

JOB = """\
import pathlib, sys
from torchspec.tracker import app_run_from_env
run = app_run_from_env()
run.add_metadata(lr=0.1, nodes=2)
run.add_artifact("model", sys.argv[1], {"format": "torchscript"})
print("recorded", run.job_id())
"""


def test_a_slurm_job_records_and_the_cli_and_dashboard_read_it_back(slurm_jobs, tmp_path: pathlib.Path) -> None:
    (tmp_path / "record.py").write_text(JOB)
    (tmp_path / ".torchspec.toml").write_text(f'[tracker.file]\nconfig = "{tmp_path / "runs"}"\n')
    spec = {"name": "tracked", "roles": [{
        "name": "r", "image": str(tmp_path), "entrypoint": sys.executable,
        "args": [str(tmp_path / "record.py"), str(tmp_path / "model.pt")], "resource": {"cpu": 1, "memMB": 64}}]}
    (tmp_path / "job.json").write_text(json.dumps(spec))
    cli = tracker_support.cli_in(tmp_path, timeout=240)

    done = cli("submit", "-s", "slurm", "--wait", "job.json")
    handle = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    if handle:
        slurm_jobs.append(handle.rsplit("/", 1)[1])
    assert done.returncode == 0, done.stderr
    assert handle.startswith("slurm://"), done.stdout
    assert cli("tracker", "list", "jobs").stdout.split() == [handle]
    assert cli("tracker", "list", "metadata", handle).stdout.splitlines() == ["lr = 0.1", "nodes = 2"]
    artifacts = json.loads(cli("tracker", "list", "artifacts", "-o", "json", handle).stdout)
    assert artifacts == {"model": {"path": str(tmp_path / "model.pt"), "metadata": {"format": "torchscript"}}}
    tracked = tracker_support.tracked_section(handle, tmp_path, tmp_path / "home", "slurm")
    for text in ("<h3>file</h3>", "<td>lr</td><td>0.1</td>", "<td>nodes</td><td>2</td>", "<td>model</td>"):
        assert text in tracked, tracked
