"""A real two-node PyTorch DDP job (gloo on CPU) trains through `torchspec submit dist.ddp` on the local scheduler."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

from torch_support import free_port, torch_or_skip

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXE = pathlib.Path(sys.executable).with_name("torchspec")

torch_or_skip()


def test_two_node_ddp_trains_to_a_low_loss(tmp_path) -> None:
    env = dict(os.environ, TORCHSPEC_HOME=str(tmp_path), NO_COLOR="1")
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]

    def torchspec(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command + list(args), capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)

    submitted = torchspec("submit", "dist.ddp", "-p", "j=2x1", "-p", "script=train.py",
                          "-p", "image=examples/ddp_train", "-p", f"rdzv_port={free_port()}",
                          "-p", "max_retries=2", "--wait")  # a rendezvous on a busy 2-core box may time out
    handle = submitted.stdout.strip().splitlines()[0]
    assert submitted.returncode == 0, submitted.stderr + torchspec("logs", handle).stdout
    logs = torchspec("logs", handle, "train/0").stdout
    assert "world_size 2 backend gloo" in logs
    loss = float(re.search(r"final loss ([0-9.]+)", logs).group(1))  # type: ignore[union-attr]
    assert loss < 0.05, logs
    status = torchspec("status", "--json", handle)
    assert '"SUCCEEDED"' in status.stdout
