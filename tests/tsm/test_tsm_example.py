"""TSM's own example (docs/guides/tsm-migration.md, its import line changed and nothing else): run on the
local scheduler with small scripts in its image folders (the trainer under torchrun: 4 nodes x 2 workers),
and dry-run on every other scheduler.

The example's images are ``/home/$USER/pytorch_trainer`` and ``/home/$USER/pytorch_reader``: the test
points them at its own folders through the user name ``getpass.getuser()`` reads first (``LOGNAME``,
a relative path out of /home).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Dict

import pytest
from torch_support import free_port, torch_or_skip

import torchspec.tsm as tsm
from torchspec.specs import Resource

torch_or_skip()

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "tsm-migration.md"
#: Generous, for a loaded 2-core machine: four torchrun agents import torch.
RUN_S = 600

TRAIN = """\
import os, sys
# one write: the node's two workers share its log, and print() writes a line in pieces
os.write(1, f"trainer rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} {sys.argv[1:]} {os.environ['MY_ENV_VAR']}\\n"
         .encode())
"""
PS = """\
#!/bin/sh
echo "ps $TORCHSPEC_REPLICA_ID"
"""
READER = """\
#!/bin/sh
echo "reader $*"
"""


def example() -> str:
    return PAGE.read_text().split("```python\n", 1)[1].split("```", 1)[0]


def images(tmp: pathlib.Path) -> pathlib.Path:
    """The user's folder that /home/$USER stands for, holding both images; executable scripts where the
    entrypoint is run as a command."""
    user = tmp / "user"
    files: Dict[str, str] = {"pytorch_trainer/train_main.py": TRAIN, "pytorch_trainer/ps_main.py": PS,
                             "pytorch_reader/reader/reader_main.py": READER}
    for name, text in files.items():
        path = user / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    return user


def env_for(tmp: pathlib.Path, user: pathlib.Path) -> Dict[str, str]:
    return {**os.environ, "LOGNAME": os.path.relpath(user, "/home"), "TORCHSPEC_HOME": str(tmp / "home"),
            "XDG_CONFIG_HOME": str(tmp / "xdg"), "NO_COLOR": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def cli(env: Dict[str, str], cwd: pathlib.Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchspec", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def test_the_example_runs_on_the_local_scheduler(tmp_path: pathlib.Path) -> None:
    user = images(tmp_path)
    env = env_for(tmp_path, user)
    (tmp_path / "example.py").write_text(example())
    # the example as written, its rendezvous port moved off 29500 (other tests' torchrun may be there)
    runner = (f"import torchspec.tsm.api as api; api.RDZV_PORT = {free_port()}; ns = {{}};"
              " exec(compile(open('example.py').read(), 'example.py', 'exec'), ns); print(ns['app_id'])")
    done = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=RUN_S)
    assert done.returncode == 0, done.stderr
    handle = done.stdout.strip().splitlines()[-1]
    assert handle.startswith("local://my_session/my_train_job-"), done.stdout
    status = cli(env, tmp_path, "status", handle)
    assert "SUCCEEDED" in status.stdout.splitlines()[1], status.stdout
    trainer = cli(env, tmp_path, "logs", handle, "trainer/0").stdout
    ranks = sorted(line.split("trainer rank ", 1)[1].split(" of ")[0] for line in trainer.splitlines()
                   if "trainer rank" in line)
    assert len(ranks) == 2 and all("of 8 ['--epochs', '50'] foobar" in line for line in trainer.splitlines()
                                   if "trainer rank" in line), trainer
    every = "".join(cli(env, tmp_path, "logs", handle, f"trainer/{k}").stdout for k in range(4))
    assert sorted(int(line.split("trainer rank ", 1)[1].split()[0]) for line in every.splitlines()
                  if "trainer rank" in line) == list(range(8)), every
    ps = cli(env, tmp_path, "logs", handle, "parameter_server/9").stdout
    assert "ps 9" in ps, ps
    assert "reader --buffer_size 1024" in cli(env, tmp_path, "logs", handle, "reader/0").stdout


@pytest.mark.parametrize("scheduler", ["docker", "kubernetes", "slurm", "ray"])
def test_the_example_dry_runs_on_every_other_scheduler(scheduler: str, tmp_path: pathlib.Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    user = images(tmp_path)
    for key, value in env_for(tmp_path, user).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    code = example().replace('app_id = session.run(app, scheduler="local")\nsession.wait(app_id)\n', "")
    namespace: Dict[str, object] = {}
    exec(compile(code, "example.py", "exec"), namespace)
    app = namespace["app"]
    assert isinstance(app, tsm.Application)
    if scheduler != "slurm":  # a container image there; Slurm runs the folders the nodes share, as local
        for role in app.roles:
            role.container.image = f"registry.example/{role.container.image.rsplit('/', 1)[-1]}:1"
    for role in app.roles:  # Ray sizes its actors from the resource: one for Ray only, as a Container allows
        role.container.require(Resource(cpu=1, gpu=0, memMB=256), "ray")
    session = namespace["session"]
    assert isinstance(session, tsm.StandaloneSession)
    text = str(session.dryrun(app, scheduler=scheduler))
    assert "torchrun" in text and "ps_main.py" in text and "reader_main.py" in text, text
