"""The Runner against a scheduler plug-in registered through a factory dict (the public plug-in API).

Ported in spirit from TorchX's ``runner/test/api_test.py``: validation,
job-id injection, handles, dry runs, unknown apps and schedulers; plus what
torchspec adds: components from spec files and built-in names, and defaults
from the config files.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Dict

import pytest
from memory_scheduler import Factory, MemoryRequest

from torchspec.config import Config, load_config
from torchspec.errors import ParamError, UsageError
from torchspec.components import ComponentNotFoundError
from torchspec.runner import ENV_TORCHSPEC_JOB_ID, ENV_TORCHSPEC_PARENT_RUN_ID, Runner, parse_component_args
from torchspec.specs import (
    AppDef,
    AppState,
    InvalidRunConfigException,
    MalformedAppHandleException,
    Resource,
    Role,
    UnknownAppException,
    UnknownSchedulerException,
    parse_app_handle,
)

SESSION = "test_session"
SMALL = Resource(cpu=1, gpu=0, memMB=1024)


pytestmark = pytest.mark.usefixtures("clean_env")


def app(name: str = "hello", **role: Any) -> AppDef:
    fields: Dict[str, Any] = dict(name="greeter", image="img", entrypoint="echo", args=["hi"], resource=SMALL)
    fields.update(role)
    return AppDef(name, roles=[Role(**fields)])


# ---------------------------------------------------------------- validation (TorchX's messages)


def test_no_roles(runner: Runner) -> None:
    with pytest.raises(ValueError, match=r"^No roles for app: empty\. Did you forget to add roles to AppDef\?$"):
        runner.run(AppDef("empty"), "memory")


def test_missing_entrypoint(runner: Runner) -> None:
    role = Role(name="r", image="img", resource=SMALL)  # entrypoint defaults to MISSING
    with pytest.raises(ValueError, match=r"^No entrypoint for role: r\. Did you forget to call role\.runs"):
        runner.dryrun(AppDef("a", roles=[role]), "memory")


@pytest.mark.parametrize("replicas", [0, -1])
def test_non_positive_replicas(runner: Runner, replicas: int) -> None:
    with pytest.raises(ValueError, match=r"^Non-positive replicas for role: greeter\. Did you forget to set role"):
        runner.run(app(num_replicas=replicas), "memory")


def test_scheduler_validation_runs_too(runner: Runner) -> None:
    """The default Scheduler._validate refuses roles without a resource."""
    with pytest.raises(ValueError, match="role 'r' has no resource"):
        runner.dryrun(AppDef("a", roles=[Role(name="r", image="img", entrypoint="echo")]), "memory")


def test_bad_cfg_is_refused_by_the_runopts(runner: Runner) -> None:
    with pytest.raises(InvalidRunConfigException, match="priority"):
        runner.dryrun(app(), "memory", cfg={"priority": "high"})


# ---------------------------------------------------------------- submitting, handles, job id


def test_run_returns_a_handle_and_injects_the_job_id(runner: Runner, factory: Factory) -> None:
    handle = runner.run(app(num_replicas=2), "memory")
    assert handle == "memory://test_session/hello-1"
    backend, session, app_id = parse_app_handle(handle)
    assert (backend, session, app_id) == ("memory", SESSION, "hello-1")
    replicas = factory.scheduler.apps[app_id]["greeter"]
    # every replica sees the handle, with the app id filled in by the scheduler at schedule time
    assert [r.env[ENV_TORCHSPEC_JOB_ID] for r in replicas] == [handle, handle]
    assert ENV_TORCHSPEC_PARENT_RUN_ID not in replicas[0].env


def test_dryrun_leaves_the_app_id_to_the_scheduler(runner: Runner, factory: Factory) -> None:
    a = app()
    info = runner.dryrun(a, "memory", cfg={"queue": "fast"})
    assert isinstance(info.request, MemoryRequest)
    assert info.request.app.roles[0].env[ENV_TORCHSPEC_JOB_ID] == "memory://test_session/${app_id}"
    assert dict(info.cfg) == {"queue": "fast", "priority": 0, "tags": None}  # defaults filled in
    assert info._scheduler == "memory" and info.app is a
    assert str(info) == "MemoryRequest(app=hello, cfg={'queue': 'fast', 'priority': 0, 'tags': None})"
    assert factory.scheduler.apps == {}  # nothing submitted
    # schedule() submits the (possibly edited) request
    info.request.cfg["queue"] = "edited"
    handle = runner.schedule(info)
    assert factory.scheduler.cfgs[parse_app_handle(handle).app_id]["queue"] == "edited"


def test_parent_run_id_from_argument_or_environment(runner: Runner, factory: Factory,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    handle = runner.run(app(), "memory", parent_run_id="parent-1")
    assert factory.scheduler.apps[parse_app_handle(handle).app_id]["greeter"][0].env[
        ENV_TORCHSPEC_PARENT_RUN_ID] == "parent-1"
    monkeypatch.setenv(ENV_TORCHSPEC_PARENT_RUN_ID, "from-env")
    info = runner.dryrun(app(), "memory", parent_run_id="ignored")
    assert info.request.app.roles[0].env[ENV_TORCHSPEC_PARENT_RUN_ID] == "from-env"


def test_schedule_needs_a_dryrun_from_a_runner(runner: Runner) -> None:
    from torchspec.specs import AppDryRunInfo

    with pytest.raises(ValueError, match="did not come from Runner.dryrun"):
        runner.schedule(AppDryRunInfo("request", str))


# ---------------------------------------------------------------- acting on apps


def test_status_wait_describe_cancel(runner: Runner, factory: Factory) -> None:
    a = app()
    handle = runner.run(a, "memory")
    status = runner.status(handle)
    assert status is not None and status.state == AppState.RUNNING
    assert status.ui_url == "memory://ui/hello-1"
    assert runner.describe(handle) is a  # the app as submitted, from this runner's cache

    runner.cancel(handle)
    assert factory.scheduler.cancelled == ["hello-1"]
    final = runner.wait(handle, wait_interval=0)
    assert final is not None and final.state == AppState.CANCELLED
    runner.cancel(handle)  # terminal: nothing more to do
    assert factory.scheduler.cancelled == ["hello-1"]


def test_describe_an_app_another_session_started(factory: Factory) -> None:
    with Runner("first", {"memory": factory}) as first:
        handle = first.run(app(), "memory")
    with Runner("second", {"memory": lambda session, **kw: factory.built[0]}) as second:
        described = second.describe(handle)
        assert described is not None and described.name == "hello-1"
        assert [r.name for r in described.roles] == ["greeter"]


def test_unknown_app(runner: Runner) -> None:
    handle = "memory://test_session/nope"
    assert runner.status(handle) is None
    assert runner.wait(handle, wait_interval=0) is None
    assert runner.describe(handle) is None
    assert runner.cancel(handle) is None
    with pytest.raises(UnknownAppException, match="Unknown app = memory://test_session/nope"):
        runner.log_lines(handle, "greeter")


def test_stop_is_cancel_with_a_warning(runner: Runner, factory: Factory) -> None:
    handle = runner.run(app(), "memory")
    with pytest.warns(PendingDeprecationWarning):
        runner.stop(handle)
    assert factory.scheduler.cancelled == ["hello-1"]


def test_malformed_handle(runner: Runner) -> None:
    with pytest.raises(MalformedAppHandleException):
        runner.status("not-a-handle")


def test_a_bare_app_id_is_the_handle_of_an_app_this_runner_submitted(runner: Runner) -> None:
    """The memory scheduler knows nothing without asking (no app_ids_here): the runner's own record counts."""
    handle = runner.run(app(), "memory")
    assert runner.resolve_handle(parse_app_handle(handle).app_id) == handle
    assert runner.resolve_handle(handle) == handle
    assert runner.resolve_handle("memory://other/x") == "memory://other/x"  # a handle is taken as written
    with pytest.raises(MalformedAppHandleException) as raised:
        runner.resolve_handle("hello-2")
    assert raised.value.hint == f"did you mean {handle}?"
    assert raised.value.message == "malformed app handle 'hello-2': no app on this machine has that id"


def test_log_lines(runner: Runner) -> None:
    handle = runner.run(app(args=["one", "two", "three"], num_replicas=2), "memory")
    assert list(runner.log_lines(handle, "greeter", k=1)) == ["one\n", "two\n", "three\n"]
    assert list(runner.log_lines(handle, "greeter", regex="^t")) == ["two\n", "three\n"]


def test_list_fills_in_handles(runner: Runner) -> None:
    runner.run(app("a"), "memory")
    runner.run(app("b"), "memory")
    listed = runner.list("memory")
    assert [(x.app_id, x.app_handle, x.state) for x in listed] == [
        ("a-1", "memory://test_session/a-1", AppState.RUNNING),
        ("b-2", "memory://test_session/b-2", AppState.RUNNING),
    ]


# ---------------------------------------------------------------- schedulers


def test_unknown_scheduler_guesses_the_name(runner: Runner) -> None:
    with pytest.raises(UnknownSchedulerException, match=r"Unknown scheduler: 'memroy'\. Did you mean 'memory'\?"):
        runner.run(app(), "memroy")
    with pytest.raises(UnknownSchedulerException, match="Registered schedulers: memory"):
        runner.status("kubernetes://s/app")


def test_schedulers_are_built_lazily_once_and_closed(factory: Factory) -> None:
    other = Factory()
    with Runner(SESSION, {"memory": factory, "other": other}) as runner:
        assert runner.scheduler_backends() == ["memory", "other"]
        assert factory.built == [] and other.built == []
        runner.run(app(), "memory")
        runner.run(app(), "memory")
        assert len(factory.built) == 1 and other.built == []
        assert [name for name, _ in runner.scheduler_run_opts("memory")] == ["queue", "priority", "tags"]
    assert factory.scheduler.closed == 1
    assert factory.scheduler.session_name == SESSION


def test_context_manager_reraises(factory: Factory) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with Runner(SESSION, {"memory": factory}) as runner:
            runner.run(app(), "memory")
            raise RuntimeError("boom")
    assert factory.scheduler.closed == 1


def test_scheduler_params_from_the_environment(factory: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSPEC_QUEUE_URL", "http://q")
    monkeypatch.setenv("TORCHSPEC_TIMEOUT", "from-env")
    monkeypatch.setenv("TORCHSPEC_JOB_ID", "memory://s/outer")  # set inside a job: not a scheduler param
    monkeypatch.setenv("TORCHSPEC_HOME", "/tmp/state")  # torchspec's own setting
    monkeypatch.setenv("TORCHSPEC_REPLICA_ID", "0")  # set by the local scheduler in every replica
    monkeypatch.setenv("TORCHSPEC_REQUIRE_BROWSER", "1")  # the test suite's switches: REQUIRE_*, SKIP_*
    monkeypatch.setenv("TORCHSPEC_SKIP_DOCKER", "1")
    with Runner(SESSION, {"memory": factory}, scheduler_params={"timeout": 5}) as runner:
        runner.run(app(), "memory")
    assert factory.scheduler.params == {"queue_url": "http://q", "timeout": 5}


def test_default_scheduler_is_the_first_unless_configured(factory: Factory) -> None:
    with Runner(SESSION, {"memory": factory, "other": Factory()}) as runner:
        assert runner.default_scheduler() == "memory"
        handle = runner.run(app(), None)
        assert handle.startswith("memory://")
    config = Config(data={"default_scheduler": "other"})
    with Runner(SESSION, {"memory": factory, "other": Factory()}, config=config) as runner:
        assert runner.default_scheduler() == "other"


# ---------------------------------------------------------------- components


SPEC = """\
name: "job-{{ size }}"
params:
  size: {type: integer, default: 1}
  word: {type: string, default: spec-default}
  extra: {type: list, default: []}
roles:
  - name: worker
    image: img
    entrypoint: echo
    args: "{{ [word] + extra }}"
    num_replicas: "{{ size }}"
    resource: {cpu: 1, gpu: 0, memMB: 128}
"""


@pytest.fixture
def spec(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "jobs" / "job.yaml"
    path.parent.mkdir()
    path.write_text(SPEC)
    return str(path)


def submitted(factory: Factory, handle: str) -> Any:
    return factory.scheduler.apps[parse_app_handle(handle).app_id]


def test_run_component_from_a_spec_path(runner: Runner, factory: Factory, spec: str) -> None:
    handle = runner.run_component(spec, {"size": 2, "word": "hi"}, "memory")
    assert handle == "memory://test_session/job-2-1"
    replicas = submitted(factory, handle)["worker"]
    assert len(replicas) == 2 and replicas[0].args == ["hi"]
    assert replicas[1].env[ENV_TORCHSPEC_JOB_ID] == handle


def test_run_component_builtin_by_name(runner: Runner, factory: Factory) -> None:
    handle = runner.run_component("utils.echo", ["msg=hello ${replica_id}", "num_replicas=2"], "memory")
    replicas = submitted(factory, handle)["echo"]
    assert [r.args for r in replicas] == [["hello 0"], ["hello 1"]]


def test_dryrun_component(runner: Runner, factory: Factory) -> None:
    info = runner.dryrun_component("dist.ddp", ["j=2x1", "script=train.py"], "memory", cfg={"queue": "gpu"})
    role = info.request.app.roles[0]
    assert role.num_replicas == 2 and role.args[1].startswith("torchrun ")
    assert info.cfg["queue"] == "gpu"
    assert factory.scheduler.apps == {}


def test_component_args_torchx_style(runner: Runner) -> None:
    info = runner.dryrun_component("utils.python", ["--m", "http.server", "--", "8080", "--bind", "::"], "memory")
    assert info.request.app.roles[0].args == ["-m", "http.server", "8080", "--bind", "::"]


def test_parse_component_args() -> None:
    assert parse_component_args(None) == {}
    assert parse_component_args({"n": 2, "b": True, "l": ["a"], "m": {"k": "v"}, "s": "x"}) == {
        "n": "2", "b": "true", "l": '["a"]', "m": '{"k": "v"}', "s": "x"}
    assert parse_component_args(["a=1", "--b=2", "-j", "2x4", "c=x=y", "--", "p", "--q"]) == {
        "a": "1", "b": "2", "j": "2x4", "c": "x=y", "args": '["p", "--q"]'}
    for bad in (["word"], ["--flag"], ["=v"]):
        with pytest.raises(UsageError):
            parse_component_args(bad)
    with pytest.raises(UsageError, match="not one string"):
        parse_component_args("a=1")  # type: ignore[arg-type]


def test_component_errors(runner: Runner, spec: str) -> None:
    with pytest.raises(ComponentNotFoundError, match="did you mean 'utils.echo'"):
        runner.dryrun_component("utils.ecko", {}, "memory")
    with pytest.raises(ParamError, match="unknown param 'sise'"):
        runner.dryrun_component(spec, {"sise": "2"}, "memory")


# ---------------------------------------------------------------- precedence with the config files


@pytest.fixture
def configured(tmp_path: pathlib.Path, spec: str) -> Config:
    """A user file and a project file that both set scheduler and component defaults."""
    user = tmp_path / "xdg" / "torchspec" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(
        "[scheduler.memory]\nqueue = \"user-queue\"\npriority = 1\ntags = \"u1;u2\"\n"
        '[component."utils.echo"]\nmsg = "from user"\nnum_replicas = 3\n'
    )
    (tmp_path / ".torchspec.toml").write_text(
        "[scheduler.memory]\npriority = \"5\"\n"
        '[component."jobs/job.yaml"]\nword = "from project"\nsize = 2\n'
    )
    return load_config(str(tmp_path / "jobs"))


def test_scheduler_cfg_precedence(factory: Factory, configured: Config) -> None:
    with Runner(SESSION, {"memory": factory}, config=configured) as runner:
        info = runner.dryrun(app(), "memory")
        # project beats user, typed by the scheduler's runopts; unset options get the runopt default
        assert dict(info.cfg) == {"queue": "user-queue", "priority": 5, "tags": ["u1", "u2"]}
        info = runner.dryrun(app(), "memory", cfg={"priority": 9, "queue": None})
        assert dict(info.cfg) == {"queue": "user-queue", "priority": 9, "tags": ["u1", "u2"]}


def test_component_param_precedence(factory: Factory, configured: Config, spec: str, tmp_path: pathlib.Path) -> None:
    with Runner(SESSION, {"memory": factory}, config=configured) as runner:
        # config defaults (a path key, relative to the project file) beat the spec's defaults
        role = runner.dryrun_component(spec, {}, "memory").request.app.roles[0]
        assert (role.args, role.num_replicas) == (["from project"], 2)
        # component args beat config defaults
        role = runner.dryrun_component(spec, ["word=given"], "memory").request.app.roles[0]
        assert (role.args, role.num_replicas) == (["given"], 2)
        # a params file beats config defaults too, and -p beats the params file
        values = tmp_path / "values.json"
        values.write_text(json.dumps({"word": "from file", "size": 4}))
        role = runner.dryrun_component(spec, {"size": 1}, "memory", params_file=str(values)).request.app.roles[0]
        assert (role.args, role.num_replicas) == (["from file"], 1)
        # built-in names work as keys
        role = runner.dryrun_component("utils.echo", {}, "memory").request.app.roles[0]
        assert (role.args, role.num_replicas) == (["from user"], 3)

    # the runner's own component_defaults beat the config files', by name or by path
    with Runner(SESSION, {"memory": factory}, {"utils.echo": {"msg": "runner"}, spec: {"size": "5"}},
                config=configured) as runner:
        role = runner.dryrun_component("utils.echo", {}, "memory").request.app.roles[0]
        assert (role.args, role.num_replicas) == (["runner"], 3)
        role = runner.dryrun_component(spec, {}, "memory").request.app.roles[0]
        assert (role.args, role.num_replicas) == (["from project"], 5)


def test_config_default_for_an_unknown_param_names_its_file(factory: Factory, tmp_path: pathlib.Path) -> None:
    (tmp_path / ".torchspec.toml").write_text('[component."utils.echo"]\nmesg = "typo"\n')
    with Runner(SESSION, {"memory": factory}, config=load_config(str(tmp_path))) as runner:
        with pytest.raises(UsageError) as raised:
            runner.dryrun_component("utils.echo", {}, "memory")
    assert str(tmp_path / ".torchspec.toml") in raised.value.message and "'mesg'" in raised.value.message
    assert raised.value.hint == "did you mean 'msg'?"


def test_runner_without_config_reads_no_files(factory: Factory, configured: Config) -> None:
    with Runner(SESSION, {"memory": factory}) as runner:
        assert dict(runner.dryrun(app(), "memory").cfg) == {"queue": "default", "priority": 0, "tags": None}


def test_run_options_report_every_problem_at_once() -> None:
    from torchspec.runner.options import RunOptionsError, resolve_run_options
    from torchspec.specs import runopts

    opts = runopts()
    opts.add("queue", str, "queue to run in", default="default")
    opts.add("priority", int, "higher runs first", default=0)
    opts.add("run_as", str, "user", required=True)
    with pytest.raises(RunOptionsError) as raised:
        resolve_run_options("memory", opts, "queu=a,priority=high,colour=blue", strict=True)
    problems = raised.value.problems
    assert len(problems) == 4 and "3 problems" not in raised.value.message
    assert "memory has no run option 'queu' (did you mean 'queue'?)" in problems
    assert "run option priority=high: expected a whole number" in problems and any("colour" in p for p in problems)
    assert any("run_as is required" in p for p in problems)
    assert raised.value.hint == "the run options of memory, with types: torchspec runopts memory"
    # the Python API keeps keys it does not know (one cfg may serve several schedulers), as TorchX does
    assert resolve_run_options("memory", opts, {"runAs": "me", "other": 1}, strict=False) == {
        "queue": "default", "priority": 0, "run_as": "me", "other": 1}


def test_a_plain_value_error_from_a_plugin_is_a_refusal_naming_it() -> None:
    """TorchX-style backends refuse with ValueError; the runner reports it as the scheduler's refusal
    (a usage error, exit 2 on the CLI), still catchable as ValueError."""
    from memory_scheduler import MemoryScheduler

    from torchspec.errors import AppRefusedError

    class Picky(MemoryScheduler):
        def _submit_dryrun(self, app: AppDef, cfg: Any) -> Any:
            raise ValueError("picky takes no apps today")

    with Runner(SESSION, {"picky": lambda session_name, **kw: Picky(session_name)}) as r:
        with pytest.raises(AppRefusedError) as raised:
            r.dryrun(app(), "picky")
    assert isinstance(raised.value, ValueError) and raised.value.scheduler == "picky"
    assert raised.value.message == "picky takes no apps today"
