"""`status --json` reports each replica's exit code and restart count from the local supervisor."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

EXE = pathlib.Path(sys.executable).with_name("torchspec")


def test_replica_exit_codes_and_restarts(tmp_path) -> None:
    (tmp_path / "fail.yaml").write_text(
        "name: failer\nroles:\n  - name: w\n    image: .\n    entrypoint: sh\n"
        "    args: ['-c', 'exit $((3 * (1 - ${replica_id})))']\n    num_replicas: 2\n    max_retries: 1\n"
        "    retry_policy: REPLICA\n")
    env = dict(os.environ, TORCHSPEC_HOME=str(tmp_path / "home"), NO_COLOR="1")
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]
    submitted = subprocess.run(command + ["submit", "fail.yaml", "--wait"], capture_output=True, text=True,
                               cwd=tmp_path, env=env, timeout=120)
    assert submitted.returncode == 4, submitted.stderr
    handle = submitted.stdout.strip()
    status = json.loads(subprocess.run(command + ["status", "--json", handle], capture_output=True, text=True,
                                       env=env, timeout=60).stdout)
    replicas = status["roles"][0]["replicas"]
    # replica 0 fails, is restarted once and fails again; replica 1 succeeds at once
    assert [(r["exit_code"], r["num_restarts"]) for r in replicas] == [(3, 1), (0, 0)]
