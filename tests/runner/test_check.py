"""``torchspec lint --scheduler``: dry runs on a scheduler (TS601) and Kubernetes schema checks (TS602),
through the library and the CLI, without any backend; and the plain lint path stays free of schedulers."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

import pytest

from torchspec.errors import BackendError, UsageError
from torchspec.specs import runopts
from torchspec.lint import LintOptions
from torchspec.lint.result import LintResult
from torchspec.runner.check import lint_paths

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CRDS = ROOT / "torchspec" / "schedulers" / "kubernetes" / "crds"
CRD_FILES = {"jobset": (str(CRDS / "jobset.x-k8s.io_jobsets.yaml"),),
             "volcano": (str(CRDS / "batch.volcano.sh_jobs.yaml"),), "job": ()}
FLAVORS = ("job", "jobset", "volcano")
#: The examples written for local (their images are folders): docker and kubernetes refuse them (TS603).
LOCAL_EXAMPLES = ("hello.json", "hello.toml", "hello.yaml", "trainer_ps_reader.yaml", "resume/resume.yaml")
#: Examples whose required params (none today) must be passed to dry-run them.
EXAMPLE_PARAMS: dict[str, dict[str, str]] = {}


def lint(tmp_path: pathlib.Path, text: str, **options: Any) -> tuple[LintResult, str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(text))
    return lint_paths([str(spec)], LintOptions(**options)), str(spec)


def line_of(path: str, needle: str, after: str | None = None) -> int:
    """1-based line of the first line containing ``needle`` (after the first line containing ``after``)."""
    lines = pathlib.Path(path).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i, line in enumerate(lines) if i >= start and needle in line) + 1


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, "NO_COLOR": "1"})


# ---------------------------------------------------------------- the examples


def assert_only_folder_images(result: LintResult, scheduler: str) -> None:
    """The local examples (their images are folders) get one TS603 (the dry run stops at the first role), at
    the image; the others pass."""
    by_file: dict[str, list[Any]] = {}
    for d in result.diagnostics:
        by_file.setdefault(os.path.relpath(d.file, EXAMPLES), []).append(d)
    assert sorted(by_file) == sorted(LOCAL_EXAMPLES), result.diagnostics
    for name, found in by_file.items():
        assert {(d.code, d.path.split(".")[-1]) for d in found} == {("TS603", "image")}, found
        assert all(f"{scheduler} runs every role in a container image" in d.message and "-p image=" in d.hint
                   for d in found)
    assert all(len(found) == 1 for found in by_file.values())
    assert by_file["trainer_ps_reader.yaml"][0].path == "roles[0].image"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_every_example_passes_kubernetes(flavor: str) -> None:
    plain = [p for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".toml", ".json")
             and p.name not in EXAMPLE_PARAMS]
    result = lint_paths([str(p) for p in plain], LintOptions(
        scheduler="kubernetes", scheduler_cfg={"flavor": flavor}, crd_paths=CRD_FILES[flavor]))
    assert_only_folder_images(result, "kubernetes")
    assert result.notes == [], result.notes
    assert len(result.files) == len(plain) >= 8
    for name, params in EXAMPLE_PARAMS.items():
        result = lint_paths([str(p) for p in EXAMPLES.rglob(name)], LintOptions(
            scheduler="kubernetes", scheduler_cfg={"flavor": flavor}, crd_paths=CRD_FILES[flavor], params=params))
        assert result.diagnostics == [] and result.notes == []


@pytest.mark.parametrize("scheduler, cfg", [("docker", ""), ("local", "use_cwd=true")])
def test_every_example_passes_the_other_dry_runs(scheduler: str, cfg: str) -> None:
    result = lint_paths([str(EXAMPLES)], LintOptions(scheduler=scheduler, scheduler_cfg=cfg))
    if scheduler == "docker":
        assert_only_folder_images(result, "docker")
    else:
        assert result.diagnostics == []
    assert result.notes == []


@pytest.mark.parametrize("scheduler", ["local", "slurm"])
def test_folder_images_are_fine_where_images_are_folders(scheduler: str) -> None:
    result = lint_paths([str(EXAMPLES / "hello.yaml")], LintOptions(scheduler=scheduler))
    assert result.diagnostics == [] and result.notes == []


@pytest.mark.parametrize("scheduler", ["docker", "kubernetes"])
def test_the_components_default_image_is_ts603_on_container_schedulers(tmp_path, scheduler: str) -> None:
    """A spec without its own image (a component's `.`) is one TS603 at the image, with a hint how to set it."""
    result, path = lint(tmp_path, """\
        name: job
        roles:
          - name: trainer
            image: .
            entrypoint: python
          - name: reader
            image: ghcr.io/acme/reader:1
            entrypoint: python
        """, scheduler=scheduler)
    d, = result.diagnostics
    assert (d.code, d.path, d.line, d.severity) == ("TS603", "roles[0].image", line_of(path, "image: ."), "error")
    assert d.column == len("    image: ") + 1
    assert "role 'trainer': its image '.' is a folder" in d.message
    assert d.hint and "-p image=NAME" in d.hint and "image:" in d.hint
    r = run_cli("lint", "--scheduler", scheduler, "--select", "TS603", "-f", "json", path)
    assert r.returncode == 1 and json.loads(r.stdout)["diagnostics"][0]["code"] == "TS603", r.stdout + r.stderr
    r = run_cli("lint", "--scheduler", scheduler, "--ignore", "TS603", path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_local_refuses_images_that_are_not_folders() -> None:
    result = lint_paths([str(EXAMPLES / "hello.yaml"), str(EXAMPLES / "ddp.yaml")], LintOptions(scheduler="local"))
    d, = [d for d in result.diagnostics if d.file.endswith("ddp.yaml")]
    assert d.code == "TS601" and "not a folder" in d.message and d.path == "roles[0]"


def test_cli_examples_with_crds() -> None:
    r = run_cli("lint", "--scheduler", "kubernetes", "-c", "flavor=volcano", "--crd", CRD_FILES["volcano"][0],
                "--k8s-version", "1.25", "--k8s-version", "v1.37.2", "--ignore", "TS603", "examples/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passed" in r.stdout and "note:" not in r.stderr


# ---------------------------------------------------------------- TS602


GATES = """\
    name: gates
    roles:
      - name: trainer
        image: img
        entrypoint: python
      - name: worker
        image: img
        entrypoint: python
        metadata:
          kubernetes.pod_patch:
            spec:
              schedulingGates:
                - name: quota
    """


@pytest.mark.parametrize("flavor", FLAVORS)
def test_pod_patch_field_too_new_for_a_version_is_ts602_in_the_patch(tmp_path, flavor: str) -> None:
    result, path = lint(tmp_path, GATES, scheduler="kubernetes", scheduler_cfg=f"flavor={flavor},k8s_version=1.25",
                        crd_paths=CRD_FILES[flavor])
    d, = result.diagnostics
    assert (d.code, d.severity) == ("TS602", "error")
    # inside the worker role, at the key the patch wrote
    assert d.line == line_of(path, "schedulingGates:") > line_of(path, "name: worker")
    assert d.path == "roles[1].metadata.kubernetes.pod_patch.spec.schedulingGates"
    assert "Kubernetes 1.25 rejects" in d.message and "'worker'" in d.message
    assert "schedulingGates" in d.message and "spec" in d.message
    # newer clusters only: clean
    result, _ = lint(tmp_path, GATES, scheduler="kubernetes", scheduler_cfg={"flavor": flavor},
                     crd_paths=CRD_FILES[flavor], k8s_versions=("1.27", "1.37"))
    assert result.diagnostics == []


def test_manifest_problem_without_a_patch_is_at_the_roles_line(tmp_path) -> None:
    text = """\
    name: retries
    roles:
      - name: trainer
        image: img
        entrypoint: python
      - name: ps
        image: img
        entrypoint: python
        retry_policy: REPLICA
        max_retries: 2
    """
    # k8s_version=1.30 renders backoffLimitPerIndex (every Job's, to count its indexes' failures), which
    # Kubernetes 1.25 does not know: one problem per role, each at its role's line
    result, path = lint(tmp_path, text, scheduler="kubernetes", scheduler_cfg="k8s_version=1.30",
                        k8s_versions=("1.25", "1.37"))
    assert [(d.code, d.path, d.line) for d in result.diagnostics] == [
        ("TS602", "roles[0]", line_of(path, "name: trainer")), ("TS602", "roles[1]", line_of(path, "name: ps"))]
    d = result.diagnostics[1]
    assert d.message.startswith("Kubernetes 1.25 rejects the Job for role 'ps': spec: ")
    assert "backoffLimitPerIndex" in d.message
    # manifests are rendered for the oldest version checked (by default the newest bundled), which they then fit
    assert lint(tmp_path, text, scheduler="kubernetes")[0].diagnostics == []
    assert lint(tmp_path, text, scheduler="kubernetes", scheduler_cfg={"k8s_version": "1.30"},
                k8s_versions=("1.30", "1.37"))[0].diagnostics == []


@pytest.mark.parametrize("flavor, kind", [("jobset", "JobSet"), ("volcano", "Job")])
def test_object_level_crd_problem_is_at_the_top_of_the_document(tmp_path, flavor: str, kind: str) -> None:
    import yaml

    # a stricter copy of the CRD (a cluster's admission rules, say): ttlSecondsAfterFinished of at least 100
    crd = yaml.load(pathlib.Path(CRD_FILES[flavor][0]).read_text(), Loader=yaml.CSafeLoader)

    def stricter(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("ttlSecondsAfterFinished"), dict):
                node["ttlSecondsAfterFinished"]["minimum"] = 100
            for value in node.values():
                stricter(value)
        elif isinstance(node, list):
            for value in node:
                stricter(value)

    stricter(crd)
    strict_crd = tmp_path / "crd.yaml"
    strict_crd.write_text(yaml.safe_dump(crd))
    result, path = lint(tmp_path, "# a comment\nname: ttl\nroles: [{name: r, image: i, entrypoint: e}]\n",
                        scheduler="kubernetes", scheduler_cfg=f"flavor={flavor},ttl=5", crd_paths=(str(strict_crd),))
    d, = result.diagnostics
    assert (d.code, d.line, d.path) == ("TS602", 2, "")
    assert d.message == f"the CRD schema rejects the {kind}: spec.ttlSecondsAfterFinished: 5 is less than the minimum of 100"


def test_jobset_is_checked_against_the_bundled_crd_without_crd(tmp_path) -> None:
    result, _ = lint(tmp_path, GATES, scheduler="kubernetes", scheduler_cfg="flavor=jobset,k8s_version=1.25")
    assert [d.code for d in result.diagnostics] == ["TS602"]
    assert "JobSet" in result.diagnostics[0].message and "schedulingGates" in result.diagnostics[0].source_line
    assert not any("no CRD" in note for note in result.notes)


# ---------------------------------------------------------------- TS601


@pytest.mark.parametrize("patch, words", [
    ('{spec: {hostNetwork: "yes"}}', "hostNetwork"),
    ("{spec: {containers: [{name: x}]}}", "image"),
])
def test_pod_patch_the_scheduler_refuses_is_ts601(tmp_path, patch: str, words: str) -> None:
    text = f"""\
    name: patched
    roles:
      - name: first
        image: img
        entrypoint: python
      - name: trainer
        image: img
        entrypoint: python
        metadata:
          kubernetes.pod_patch: {patch}
    """
    result, path = lint(tmp_path, text, scheduler="kubernetes")
    d, = result.diagnostics
    assert d.code == "TS601" and "kubernetes" in d.message and words in d.message
    assert d.line == line_of(path, "kubernetes.pod_patch") and d.path == "roles[1].metadata.kubernetes.pod_patch"


def test_docker_refuses_roles_sharing_container_names(tmp_path) -> None:
    text = """\
    name: clash
    roles:
      - name: a_b
        image: img
        entrypoint: python
      - name: a__b
        image: img
        entrypoint: python
    """
    result, path = lint(tmp_path, text, scheduler="docker")
    d, = result.diagnostics
    assert (d.code, d.severity, d.path) == ("TS601", "error", "roles[1]")
    assert d.line == line_of(path, "name: a__b") and "docker" in d.message and "'a_b'" in d.message
    assert lint(tmp_path, text)[0].diagnostics == []  # only the scheduler check finds it


def test_docker_refuses_a_device_it_cannot_provide(tmp_path) -> None:
    text = """\
    name: first
    roles: [{name: ok, image: img, entrypoint: python}]
    ---
    name: devices
    roles:
      - name: ok
        image: img
        entrypoint: python
      - name: trainer
        image: img
        entrypoint: python
        resource: {cpu: 1, gpu: 0, memMB: 128, devices: {example.com/fpga: 1}}
    """
    result, path = lint(tmp_path, text, scheduler="docker")
    d, = result.diagnostics
    assert d.code == "TS601" and d.document == 1 and d.path == "roles[1]"
    assert d.line == line_of(path, "name: trainer") and "example.com/fpga" in d.message
    # kubernetes takes any extended resource
    assert lint(tmp_path, text, scheduler="kubernetes")[0].diagnostics == []


def test_refusal_naming_no_role_is_at_the_top_of_the_document(tmp_path) -> None:
    from torchspec.runner.check import SchedulerCheck
    from torchspec.loader import LoadOptions, load_file

    class Refuses:
        def run_opts(self) -> runopts:
            return runopts()

        def _validate(self, app: Any, name: str) -> None:
            raise ValueError("this backend takes no apps on Sundays")

    spec = tmp_path / "s.yaml"
    spec.write_text("# comment\nname: a\nroles: [{name: r, image: i, entrypoint: e}]\n")
    out: list = []
    check = SchedulerCheck("fake", Refuses(), {})  # type: ignore[arg-type]
    check.check_file(load_file(str(spec), LoadOptions(lint=True)), out)
    d, = out
    assert d.code == "TS601" and d.path == "" and d.line == 2 and "fake" in d.message and "Sundays" in d.message


def test_a_dry_run_needing_its_backend_is_skipped_with_a_note(tmp_path) -> None:
    from torchspec.runner.check import SchedulerCheck
    from torchspec.loader import LoadOptions, load_file

    class NeedsBackend:
        def run_opts(self) -> runopts:
            return runopts()

        def _validate(self, app: Any, name: str) -> None:
            pass

        def submit_dryrun(self, app: Any, cfg: Any) -> Any:
            raise BackendError("no engine at unix:///nowhere")

    spec = tmp_path / "s.yaml"
    spec.write_text("name: a\nroles: [{name: r, image: i, entrypoint: e}]\n")
    out: list = []
    check = SchedulerCheck("remote", NeedsBackend(), {})  # type: ignore[arg-type]
    loaded = load_file(str(spec), LoadOptions(lint=True))
    check.check_file(loaded, out)
    check.check_file(loaded, out)
    assert out == [] and check.disabled
    note, = check.notes
    assert "remote" in note and "no engine" in note and "skipped" in note


# ---------------------------------------------------------------- params, selection, secrets


NEEDS_PARAMS = """\
    name: p
    params: {n: {type: integer}}
    roles: [{name: a_b, image: i, entrypoint: e, num_replicas: "{{ n }}"},
            {name: a__b, image: i, entrypoint: e}]
    """


def test_documents_needing_params_are_skipped_unless_given(tmp_path) -> None:
    result, path = lint(tmp_path, NEEDS_PARAMS, scheduler="docker")
    assert result.diagnostics == []
    note, = result.notes
    assert path in note and "needs params n" in note
    result, _ = lint(tmp_path, NEEDS_PARAMS, scheduler="docker", params={"n": "2"})
    assert [d.code for d in result.diagnostics] == ["TS601"] and result.notes == []
    values = tmp_path / "values.yaml"
    values.write_text("n: 3\n")
    result, _ = lint(tmp_path, NEEDS_PARAMS, scheduler="docker", params_file=str(values))
    assert [d.code for d in result.diagnostics] == ["TS601"]


def test_files_with_errors_are_not_dry_run(tmp_path) -> None:
    result, _ = lint(tmp_path, "name: x\nroles: [{name: a_b, image: i, entrypoint: e, num_replica: 2},"
                               " {name: a__b, image: i, entrypoint: e}]\n", scheduler="docker")
    assert [d.code for d in result.diagnostics] == ["TS202"]


def test_select_and_ignore_apply(tmp_path) -> None:
    text = "name: x\nparams: {u: {type: string, default: a}}\n" \
           "roles: [{name: a_b, image: i, entrypoint: e}, {name: a__b, image: i, entrypoint: e}]\n"

    def codes(**options: Any) -> list[str]:
        return [d.code for d in lint(tmp_path, text, scheduler="docker", **options)[0].diagnostics]

    assert codes() == ["TS305", "TS601"]
    assert codes(select=["TS6"]) == ["TS601"]
    assert codes(select=["scheduler-refuses"]) == ["TS601"]
    assert codes(ignore=["TS601"]) == ["TS305"]
    assert codes(select=["TS602"]) == []


def test_secrets_read_by_env_are_redacted(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TS_SECRET_ROLE", "s3cr3t-role")
    text = "name: x\nroles: [{name: \"{{ env('TS_SECRET_ROLE') }}\", image: i, entrypoint: e,\n" \
           "  resource: {cpu: 1, gpu: 0, memMB: 9, devices: {bad.example/dev: 1}}}]\n"
    d, = lint(tmp_path, text, scheduler="docker")[0].diagnostics
    assert d.code == "TS601" and "s3cr3t-role" not in d.message and "<value from env(TS_SECRET_ROLE)>" in d.message


# ---------------------------------------------------------------- bad settings


def test_bad_settings_are_usage_errors(tmp_path, monkeypatch) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: a\nroles: [{name: r, image: i, entrypoint: e}]\n")

    def error(**options: Any) -> UsageError:
        with pytest.raises(UsageError) as info:
            lint_paths([str(spec)], LintOptions(**options))
        return info.value

    assert error(scheduler="kubernets").hint == "did you mean 'kubernetes'?"
    assert "flavour" in error(scheduler="kubernetes", scheduler_cfg="flavour=jobset").message
    assert "ttl" in error(scheduler="kubernetes", scheduler_cfg={"ttl": "soon"}).message
    assert "flavor must be one of" in error(scheduler="kubernetes", scheduler_cfg="flavor=pods").message
    assert "1.99" in error(scheduler="kubernetes", k8s_versions=("1.99",)).message
    assert "--crd" in error(scheduler="docker", crd_paths=CRD_FILES["jobset"]).message
    assert "CustomResourceDefinition" in error(scheduler="kubernetes", crd_paths=(str(spec),)).message
    monkeypatch.setitem(sys.modules, "kubernetes_validate", None)  # as if not installed
    missing = error(scheduler="kubernetes")
    assert "pip install kubernetes-validate" in f"{missing.message} {missing.hint}"
    # the extra a plain install lacks, named as this install takes it, and pyproject.toml declares it
    from torchspec.install import install_command

    assert missing.hint.startswith(install_command("kubernetes-validate")), missing.hint
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("kubernetes-validate") for r in extras["kubernetes-validate"])
    assert lint_paths([str(spec)], LintOptions(scheduler="docker")).diagnostics == []  # docker does not need it


def test_cli_usage_errors_exit_2() -> None:
    r = run_cli("lint", "--scheduler", "kubernets", "examples/hello.yaml")
    assert r.returncode == 2 and "unknown scheduler 'kubernets'" in r.stderr and "did you mean 'kubernetes'" in r.stderr
    r = run_cli("lint", "--scheduler", "docker", "-c", "pul=always", "examples/hello.yaml")
    assert r.returncode == 2 and "'pul'" in r.stderr and "did you mean 'pull'" in r.stderr
    r = run_cli("lint", "-c", "flavor=job", "examples/hello.yaml")
    assert r.returncode == 2 and "--scheduler" in r.stderr


# ---------------------------------------------------------------- the CLI's formats


@pytest.fixture
def clash(tmp_path) -> str:
    spec = tmp_path / "clash.yaml"
    spec.write_text("name: c\nroles:\n  - {name: a_b, image: i, entrypoint: e}\n  - {name: a__b, image: i, entrypoint: e}\n")
    return str(spec)


def test_cli_formats_carry_the_codes(clash: str) -> None:
    r = run_cli("lint", "--scheduler", "docker", clash)
    assert r.returncode == 1 and f"{clash}:4:5: error TS601" in r.stdout
    report = json.loads(run_cli("lint", "--scheduler", "docker", "-f", "json", clash).stdout)
    d, = report["diagnostics"]
    assert (d["code"], d["name"], d["line"], d["path"]) == ("TS601", "scheduler-refuses", 4, "roles[1]")
    assert "title=TS601 scheduler-refuses" in run_cli("lint", "--scheduler", "docker", "-f", "github", clash).stdout
    sarif = json.loads(run_cli("lint", "--scheduler", "docker", "-f", "sarif", clash).stdout)
    assert [rule["id"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]] == ["TS601"]
    assert run_cli("lint", "--scheduler", "docker", "--ignore", "TS6", clash).returncode == 0
    explained = run_cli("lint", "--explain", "TS601")
    assert explained.returncode == 0 and explained.stdout.startswith("TS601 (scheduler-refuses, error)")
    assert "TS602  kubernetes-schema" in run_cli("lint", "--explain", "all").stdout


def test_cli_prints_notes_on_stderr(tmp_path) -> None:
    spec = tmp_path / "p.yaml"
    spec.write_text(textwrap.dedent(NEEDS_PARAMS))
    r = run_cli("lint", "--scheduler", "docker", str(spec))
    assert r.returncode == 0 and "note:" in r.stderr and "needs params n" in r.stderr
    assert run_cli("lint", "--scheduler", "docker", "-p", "n=2", str(spec)).returncode == 1


# ---------------------------------------------------------------- start-up imports


def _imported(*lint_args: str) -> list[str]:
    watched = ("docker", "kubernetes", "kubernetes_validate", "rich", "jsonschema", "torchspec.schedulers",
               "torchspec.schedulers.kubernetes", "torchspec.schedulers.docker", "torchspec.runner.check")
    code = ("import sys\nfrom torchspec.cli.main import main\n"
            f"sys.argv = ['torchspec', 'lint', *{list(lint_args)!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {watched!r} if m in sys.modules))")
    # no cluster configured (CI has one: with it, lint asks the cluster's /version through the kubernetes package)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = tempfile.mkdtemp(prefix="no-kubeconfig-")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_plain_lint_imports_no_scheduler() -> None:
    assert _imported("examples/hello.yaml") == []


def test_scheduler_lint_imports_only_what_it_needs() -> None:
    k8s = _imported("--scheduler", "kubernetes", "examples/hello.yaml")
    assert "kubernetes_validate" in k8s and "torchspec.schedulers.kubernetes" in k8s
    assert "kubernetes" not in k8s and "docker" not in k8s  # the SDKs: only for talking to a backend
    docker = _imported("--scheduler", "docker", "examples/hello.yaml")
    assert "torchspec.schedulers.docker" in docker
    assert not {"docker", "kubernetes", "kubernetes_validate", "torchspec.schedulers.kubernetes"} & set(docker)


def test_lint_alone_knows_no_scheduler(tmp_path) -> None:
    """torchspec.lint cannot dry-run: asked to, it says where the scheduler check lives."""
    from torchspec import lint

    with pytest.raises(UsageError, match="torchspec.runner.check.lint_paths"):
        lint.lint_paths([str(EXAMPLES / "hello.yaml")], LintOptions(scheduler="local"))


# ---------------------------------------------------------------- what a Kubeflow flavor cannot carry


def test_every_field_a_kubeflow_flavor_cannot_carry_is_a_ts601_at_its_line() -> None:
    path = str(EXAMPLES / "trainer_ps_reader.yaml")
    result = lint_paths([path], LintOptions(scheduler="kubernetes", scheduler_cfg={"flavor": "pytorchjob"}))
    assert [(d.code, d.path, d.line) for d in result.diagnostics] == [
        ("TS601", "roles[1]", line_of(path, "- name: parameter_server")),
        ("TS601", "roles[2]", line_of(path, "- name: reader"))]
    assert "a PyTorchJob runs one role" in result.diagnostics[0].message
    assert "flavor=jobset" in (result.diagnostics[0].hint or "")
    result = lint_paths([path], LintOptions(scheduler="kubernetes", scheduler_cfg={"flavor": "trainjob"}))
    assert sorted((d.path, d.line) for d in result.diagnostics) == sorted([
        ("roles[1]", line_of(path, "- name: parameter_server")), ("roles[2]", line_of(path, "- name: reader")),
        ("roles[0].max_retries", line_of(path, "max_retries: 2")),
        ("roles[0].port_map.tensorboard", line_of(path, "tensorboard: 6006"))])
    assert all(d.code == "TS601" for d in result.diagnostics)


def test_a_kubeflow_flavor_lints_what_it_can_run_against_its_crd(tmp_path) -> None:
    text = """\
        name: ddp
        roles:
          - name: trainer
            image: ghcr.io/acme/train:1
            entrypoint: bash
            args:
              - -c
              - torchrun --nnodes 2 --nproc_per_node 4 --rdzv_endpoint $${${rank0_env}}:29500 train.py
            num_replicas: 2
            port_map: {c10d: 29500}
            metadata:
              kubernetes.pod_patch:
                spec:
                  hostNetwork: true
        """
    result, path = lint(tmp_path, text, scheduler="kubernetes", scheduler_cfg="flavor=pytorchjob,queue=team-a")
    assert result.diagnostics == [] and result.notes == []
    result, path = lint(tmp_path, text, scheduler="kubernetes", scheduler_cfg="flavor=trainjob")
    d, = result.diagnostics
    assert (d.code, d.path, d.line) == ("TS601", "roles[0].metadata.kubernetes.pod_patch.spec.hostNetwork",
                                        line_of(path, "hostNetwork"))
    assert "runtime patch cannot" in d.message


def test_cli_lint_reports_what_trainjob_cannot_carry_with_positions() -> None:
    r = run_cli("lint", "--scheduler", "kubernetes", "-c", "flavor=trainjob", "examples/trainer_ps_reader.yaml")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("TS601") == 4 and "trainer_ps_reader.yaml:68" in r.stdout


@pytest.mark.parametrize("flavor", ["pytorchjob", "trainjob"])
def test_every_example_passes_a_kubeflow_flavor_or_is_refused_at_its_lines(flavor: str) -> None:
    plain = [str(p) for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".toml", ".json")]
    result = lint_paths(plain, LintOptions(scheduler="kubernetes", scheduler_cfg={"flavor": flavor}))
    assert result.notes == []
    assert all(d.line and d.path.startswith("roles[") and (d.code == "TS601" or (
        d.code == "TS603" and d.path.endswith(".image"))) for d in result.diagnostics)  # TS603: a folder image
    assert len({d.file for d in result.diagnostics}) < len(result.files)  # some examples run as they are
