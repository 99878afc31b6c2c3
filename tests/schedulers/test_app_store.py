"""AppStore: what a backend keeps per app on this machine, found again from the app id alone."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
from typing import Any, Dict, List, Mapping

import pytest

from torchspec import specs
from torchspec.errors import StateError
from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from torchspec.schedulers.app_store import AppStore


def test_a_record_is_found_again_by_its_app_id(tmp_path: pathlib.Path) -> None:
    store = AppStore("queue", str(tmp_path))
    assert store.get("a-1") is None and store.app_ids() == []
    store.put("a-1", {"queue_dir": "/q", "replicas": [1, 2], "ok": True})
    # ids that are no file name: a namespace, a slash, a leading dot, '..', a percent sign
    odd = ["ns:app-2", "host:8265-sid/x", ".hidden", "..", "50%"]
    for app_id in odd:
        store.put(app_id, {"id": app_id})
    assert AppStore("queue", str(tmp_path)).get("a-1") == {"queue_dir": "/q", "replicas": [1, 2], "ok": True}
    assert sorted(store.app_ids()) == sorted(["a-1", *odd])
    assert all(store.get(i) == {"id": i} for i in odd)
    files = os.listdir(store.folder)
    assert all(os.sep not in f and not f.startswith("..") for f in files)
    assert not any(f.endswith(".tmp") for f in files)
    assert AppStore("other", str(tmp_path)).app_ids() == []  # one folder per backend
    store.remove("ns:app-2")
    store.remove("never-kept")
    assert store.get("ns:app-2") is None and "ns:app-2" not in store.app_ids()


def test_only_json_is_kept_and_a_bad_record_is_refused_by_name(tmp_path: pathlib.Path) -> None:
    store = AppStore("queue", str(tmp_path))
    with pytest.raises(TypeError, match="must be JSON"):
        store.put("a", {"when": object()})
    with pytest.raises(TypeError, match="must be JSON"):
        store.put("a", {"x": float("nan")})
    assert store.get("a") is None and os.listdir(store.folder) == [".lock"]  # nothing half-written
    store.put("b", {"x": 1})
    pathlib.Path(store.folder, "b.json").write_text('{"x": ')
    with pytest.raises(StateError, match="cannot read what the queue scheduler kept of app 'b'"):
        store.get("b")


def _add_one(root: str, n: int) -> None:
    store = AppStore("queue", root)
    for _ in range(n):
        store.update("app", lambda r: {**r, "count": r.get("count", 0) + 1})


def test_updates_from_many_processes_lose_nothing(tmp_path: pathlib.Path) -> None:
    """read-change-write under the lock: 4 processes adding 25 each make 100, never fewer."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_one, args=(str(tmp_path), 25)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    assert AppStore("queue", str(tmp_path)).get("app") == {"count": 100}


def test_update_edits_in_place_or_replaces(tmp_path: pathlib.Path) -> None:
    store = AppStore("queue", str(tmp_path))
    assert store.update("a", lambda r: r.update(pids=[1])) == {"pids": [1]}
    assert store.update("a", lambda r: {"pids": r["pids"] + [2]}) == {"pids": [1, 2]}
    assert json.loads(pathlib.Path(store.folder, "a.json").read_text()) == {"pids": [1, 2]}


class Queue(Scheduler[Dict[str, Any]]):
    """A third party's backend whose run option ``queue_dir`` later calls must find: kept in the store."""

    def __init__(self, session_name: str = "t") -> None:
        super().__init__("queue", session_name)

    def _run_opts(self) -> specs.runopts:
        opts = specs.runopts()
        opts.add("queue_dir", type_=str, default="/default", help="where the queue is")
        return opts

    def _submit_dryrun(self, app: specs.AppDef, cfg: Mapping[str, Any]) -> specs.AppDryRunInfo[Dict[str, Any]]:
        return specs.AppDryRunInfo({"name": app.name, "queue_dir": cfg["queue_dir"]}, repr)

    def schedule(self, dryrun_info: specs.AppDryRunInfo[Any]) -> str:
        app_id = f"{dryrun_info.request['name']}-1"
        self.store.put(app_id, {"queue_dir": dryrun_info.request["queue_dir"], "name": dryrun_info.request["name"]})
        return app_id

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        record = self.store.get(app_id)
        if record is None:
            return None
        return DescribeAppResponse(app_id=app_id, state=specs.AppState.RUNNING, name=record["name"],
                                   metadata={"queue_dir": record["queue_dir"]})

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=i, state=specs.AppState.RUNNING) for i in self.store.app_ids()]

    def _cancel_existing(self, app_id: str) -> None:
        self.store.remove(app_id)


def test_a_backend_finds_its_run_options_from_the_handle_alone(tmp_path: pathlib.Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process (here: another runner and scheduler object) knows only the handle."""
    from torchspec.runner import Runner

    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path))
    app = specs.AppDef("job", [specs.Role("r", "img", entrypoint="echo", resource=specs.Resource(1, 0, 64))])
    with Runner("t", {"queue": lambda session, **kw: Queue(session)}) as runner:
        handle = runner.run(app, "queue", {"queue_dir": "/srv/q7"})
    assert pathlib.Path(tmp_path, "store", "queue", "job-1.json").is_file()
    with Runner("t", {"queue": lambda session, **kw: Queue(session)}) as later:
        status = later.status(handle)
        assert status is not None and str(status.state) == "RUNNING"
        described = later.describe(handle)
        assert described is not None and described.name == "job"  # its name, not its id
        assert later.resolve_handle("job-1") == handle  # a bare id the store knows (app_ids_here)
        later.cancel(handle)
        assert later.status(handle) is None
