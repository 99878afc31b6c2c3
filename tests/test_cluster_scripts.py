"""The test clusters' scripts (scripts/k8s-cluster, scripts/slurm-cluster): they refuse a machine that lacks
what they need before they start anything, naming the Debian packages, and no ``die`` of theirs can be lost
in a subshell (tests/script_support.py).

The refusals are run for real, on this machine, with what they look for hidden: the CNI plug-ins' search
pointed at an empty folder (TORCHSPEC_K8S_CNI_DIRS), programs left out of a PATH of links to this machine's
own. A refusal must come within seconds and leave no folder, cache or process behind.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from typing import Dict, Iterable, List

import pytest

import script_support
from k8s_support import cluster_or_skip

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
#: what the cluster scripts source: its functions are theirs too
LIBRARY = SCRIPTS / "prereqs.bash"
BASH = shutil.which("bash") or "/bin/bash"


# ----------------------------------------------------------------------------
# No die reachable inside a command substitution, a process substitution or a heredoc
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["k8s-cluster", "slurm-cluster", "test"])
def test_no_die_or_exit_is_reachable_inside_a_substitution(name: str) -> None:
    """Each script's substitutions, with the shared library's functions in view (appended: the script's
    own line numbers stay right)."""
    text = (SCRIPTS / name).read_text() + "\n" + LIBRARY.read_text()
    assert script_support.dying_substitutions(text) == []


# The shape of the bug this guards against (issue 40): a check that dies, run inside containerd's
# configuration's heredoc, so that `up` went on with bin_dir = "".
LOST_DIE = '''
die() { echo "error: $*" >&2; exit 1; }
cni_bin_dir() {
    [[ -x /usr/lib/cni/bridge ]] && { echo /usr/lib/cni; return; }
    die "apt-get install containernetworking-plugins"  # a comment: die
}
start_containerd() {
    cat >config.toml <<EOF
[plugins.cni]
  bin_dir = "$(cni_bin_dir)"
EOF
}
'''


def test_the_scan_finds_a_die_inside_a_heredoc_substitution() -> None:
    assert script_support.dying_substitutions(LOST_DIE) == ["line 10: $(cni_bin_dir) reaches cni_bin_dir"]


@pytest.mark.parametrize("code, reached", [
    ('x=$(die oops)', "die"),
    ('x="$(exit 3)"', "exit"),
    ('outer() { inner; }\ninner() { die no; }\nwhile read -r l; do :; done < <(outer)', "outer"),
    ('f() { usage; }\nusage() { exit 2; }\necho `f`', "f"),
    ('f() { die no; }\ng() { echo "$(f)"; }', "f"),
    ('f() { die no; }\ncat <<-EOF\n\tvalue: ${X:-$(f)}\n\tEOF', "f"),
])
def test_the_scan_follows_calls_quotes_and_nesting(code: str, reached: str) -> None:
    problems = script_support.dying_substitutions(code)
    assert len(problems) == 1 and problems[0].endswith(f"reaches {reached}"), problems


@pytest.mark.parametrize("code", [
    'f() { echo x; }\ny=$(f) || die "f failed"',
    'x=$(printf "%s" "die exit")',
    "x=$(sed -n 's/exit/die/p' file)",
    "python3 - <<'PY'\nimport sys\nsys.exit(1)\nx = '$(die)'\nPY\necho done",
    'x=$((1 + 2)); exit 0',
    'x=$(date)  # die in a comment: $(die)',
    'x=$(ls)\n# $(die) in a comment',
    'f() { echo "can die: not a call"; }\nx=$(f)',
])
def test_the_scan_leaves_text_and_code_outside_substitutions_alone(code: str) -> None:
    assert script_support.dying_substitutions(code) == []


# ----------------------------------------------------------------------------
# Refusals before anything starts
# ----------------------------------------------------------------------------


def path_without(folder: pathlib.Path, hidden: Iterable[str]) -> str:
    """A PATH of one folder of links to every program of this machine's PATH but ``hidden``."""
    folder.mkdir()
    hide = set(hidden)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = folder / entry.name
            if entry.name in hide or target.exists() or not os.access(entry.path, os.X_OK):
                continue
            target.symlink_to(entry.path)
    return str(folder)


def run_script(name: str, *args: str, env: Dict[str, str]) -> "tuple[subprocess.CompletedProcess[str], float]":
    started = time.monotonic()
    done = subprocess.run([BASH, str(SCRIPTS / name), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})
    return done, time.monotonic() - started


def assert_refused_at_once(done: "subprocess.CompletedProcess[str]", seconds: float, started: List[pathlib.Path],
                           names: Iterable[str]) -> None:
    """Refused within seconds, in one message that names each of ``names``, with nothing made or printed."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert seconds < 10, f"the refusal took {seconds:.1f} s"
    assert done.stdout == "", done.stdout  # no export line for an eval
    assert done.stderr.count("error:") == 1, done.stderr
    for name in names:
        assert name in done.stderr, (name, done.stderr)
    for path in started:
        assert not path.exists(), f"{path} was made: {done.stderr}"


def test_k8s_up_refuses_at_once_without_the_cni_plugins(tmp_path: pathlib.Path) -> None:
    """What issue 40 found: without containernetworking-plugins `up` built and started everything, said the
    cluster was up, and every pod stayed in ContainerCreating."""
    empty = tmp_path / "no-plugins"
    empty.mkdir()
    cluster, cache = tmp_path / "cluster", tmp_path / "cache"
    done, seconds = run_script("k8s-cluster", "up", str(cluster),
                               env={"TORCHSPEC_K8S_CNI_DIRS": str(empty), "TORCHSPEC_K8S_CACHE": str(cache)})
    assert_refused_at_once(done, seconds, [cluster, cache], ["containernetworking-plugins", "apt-get install",
                                                             "--install-deps"])


def test_k8s_up_names_every_missing_prerequisite_in_one_refusal(tmp_path: pathlib.Path) -> None:
    cluster, cache = tmp_path / "cluster", tmp_path / "cache"
    path = path_without(tmp_path / "bin", ["curl", "openssl", "runc", "go", "pgrep"])
    done, seconds = run_script("k8s-cluster", "up", "--fresh", str(cluster),
                               env={"PATH": path, "TORCHSPEC_K8S_CNI_DIRS": "", "TORCHSPEC_K8S_CACHE": str(cache)})
    assert_refused_at_once(done, seconds, [cluster, cache], ["curl", "openssl", "runc", "procps",
                                                             "containernetworking-plugins", "Go >= 1."])


def test_k8s_up_install_deps_without_apt_get_says_so_and_starts_nothing(tmp_path: pathlib.Path) -> None:
    cluster, cache = tmp_path / "cluster", tmp_path / "cache"
    path = path_without(tmp_path / "bin", ["runc", "apt-get"])
    done, seconds = run_script("k8s-cluster", "up", "--install-deps", str(cluster),
                               env={"PATH": path, "TORCHSPEC_K8S_CACHE": str(cache)})
    assert_refused_at_once(done, seconds, [cluster, cache], ["could not install runc"])
    assert "no apt-get here" in done.stderr or "only root may install" in done.stderr, done.stderr


def test_k8s_restart_refuses_a_component_it_does_not_have(tmp_path: pathlib.Path) -> None:
    (tmp_path / "cluster").mkdir()
    done, seconds = run_script("k8s-cluster", "restart", "kube-nothing", str(tmp_path / "cluster"), env={})
    assert_refused_at_once(done, seconds, [], ["no component kube-nothing", "kube-apiserver"])


def test_slurm_start_refuses_at_once_without_slurm_naming_the_packages(tmp_path: pathlib.Path) -> None:
    cluster = tmp_path / "cluster"
    path = path_without(tmp_path / "bin", ["slurmctld", "slurmd", "sinfo", "sbatch", "scontrol", "munged", "munge",
                                           "unmunge", "apt-get"])
    done, seconds = run_script("slurm-cluster", "start", "--nodes", "2", str(cluster), env={"PATH": path})
    assert_refused_at_once(done, seconds, [cluster], ["slurm-wlm", "munge"])


# ----------------------------------------------------------------------------
# The real cluster: `restart` runs the binaries the cache holds now
# ----------------------------------------------------------------------------


def test_k8s_restart_relinks_a_component_to_the_binary_built_last(tmp_path: pathlib.Path) -> None:
    """A rebuild puts a component's binary in a new cache folder; `restart` links it, as `up` does, instead of
    running the old one again. Here the link points elsewhere (a copy's link) before the restart: the
    scheduler, which only delays scheduling while it restarts."""
    cluster = cluster_or_skip()
    link = pathlib.Path(cluster.dir) / "bin" / "kube-scheduler"
    built = link.resolve()
    elsewhere = tmp_path / "kube-scheduler"
    elsewhere.symlink_to(built)
    link.unlink()
    link.symlink_to(elsewhere)
    try:
        cluster.script("restart", "kube-scheduler")
    finally:
        if os.readlink(link) != str(built):
            link.unlink()
            link.symlink_to(built)
    assert os.readlink(link) == str(built)
