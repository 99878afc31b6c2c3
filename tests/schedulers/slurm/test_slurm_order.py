"""The slurm scheduler and roles that find each other or wait for each other: every replica's
``TORCHSPEC_HOSTS_<ROLE>`` (computed by the batch script once Slurm has allocated the nodes; the bash tried here),
and the refusal of ``depends_on`` (one het job starts every role at once: no Capability.ROLE_ORDER), at its
place."""

from __future__ import annotations

import re
import subprocess

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.api import Capability
from torchspec.schedulers.slurm.scheduler import SlurmScheduler
from torchspec.schedulers.slurm.options import slurm_run_opts
from torchspec.schedulers.slurm.translate import _FUNCTIONS, app_to_request


@pytest.fixture
def img(tmp_path) -> str:
    folder = tmp_path / "img"
    folder.mkdir()
    (folder / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "run.sh").chmod(0o755)
    return str(folder)


def role(img: str, name: str, n: int = 1, *deps: specs.RoleDependency) -> specs.Role:
    return specs.Role(name=name, image=img, entrypoint="run.sh", args=["${hosts_env:parameter-server}"],
                      num_replicas=n, resource=specs.Resource(cpu=1, gpu=0, memMB=64), depends_on=list(deps))


def script(app: specs.AppDef, **cfg: object) -> str:
    return str(app_to_request(app, slurm_run_opts().resolve(cfg), "/work"))  # type: ignore[arg-type]


def test_every_replica_gets_every_roles_hosts_once_the_job_runs(img) -> None:
    app = specs.AppDef("tpr", [role(img, "trainer", 2), role(img, "parameter-server", 3)])
    text = script(app)
    assert 'readonly TS_HOSTS_0="$(hosts_of 2 "${TS_NODES_0[@]}")"' in text  # one per replica, on its node
    assert 'readonly TS_HOSTS_1="$(hosts_of 3 "${TS_NODES_1[@]}")"' in text
    assert text.count('        TORCHSPEC_HOSTS_TRAINER="$TS_HOSTS_0" \\\n') == 5  # in all 5 replicas' env
    assert text.count('        TORCHSPEC_HOSTS_PARAMETER_SERVER="$TS_HOSTS_1" \\\n') == 5
    assert f"{img}/run.sh TORCHSPEC_HOSTS_PARAMETER_SERVER" in text  # the macro names the variable
    packed = script(app, one_node_per_replica=False)  # replicas share the component's nodes: all of them
    assert 'readonly TS_HOSTS_1="$(hosts_of 0 "${TS_NODES_1[@]}")"' in packed


@pytest.mark.parametrize(("n", "nodes", "hosts"), [("2", ["a", "b", "c"], "host-a,host-b"),
                                                   ("0", ["a", "b", "c"], "host-a,host-b,host-c"),
                                                   ("1", ["a"], "host-a")])
def test_hosts_of_names_the_first_nodes_hosts(n: str, nodes: list, hosts: str) -> None:
    functions = re.search(r"(?ms)^node_host\(\).*?^}\n.*?^hosts_of\(\).*?^}$", _FUNCTIONS)
    assert functions
    stub = 'scontrol() { echo "NodeName=$3 NodeHostName=host-$3 State=IDLE"; }\n'  # what `scontrol show node N -o` says
    done = subprocess.run(["bash", "-c", stub + functions.group(0) + '\nhosts_of "$@"', "bash", n, *nodes],
                          capture_output=True, text=True, timeout=10)
    assert done.stdout == hosts + "\n", done.stderr


def test_depends_on_is_refused_at_its_place_with_the_way_around() -> None:
    app = specs.AppDef("ordered", [role("/img", "download"),
                                   role("/img", "trainer", 1, specs.RoleDependency("download"))])
    sched = SlurmScheduler("test")
    assert not sched.supports(Capability.ROLE_ORDER)
    with pytest.raises(AppRefusedError) as raised:
        sched.submit_dryrun(app, {})
    assert raised.value.problems == ((("roles", 1, "depends_on"), "role 'trainer' has depends_on, but the slurm"
                                      " scheduler starts every role at once"),)
    assert "a het job: one allocation" in (raised.value.hint or "")
    assert "--dependency=afterok:JOBID" in (raised.value.hint or "")
