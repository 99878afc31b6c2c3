"""App, role and replica statuses (ported from TorchX's AppDefStatusTest, plus edge cases)."""

from __future__ import annotations

import json
import time
from typing import Iterator

import pytest

from torchspec.specs.api import (
    _TERMINAL_STATES,
    AppState,
    AppStatus,
    AppStatusError,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    is_started,
    is_terminal,
)

NESTED_ERROR = '{"message":{"message":"error","errorCode":-1,"extraInfo":{"timestamp":1293182}}}'


@pytest.fixture
def london_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Timestamps in formatted statuses are local time; pin the zone so expectations are fixed."""
    monkeypatch.setenv("TZ", "Europe/London")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_state_values_and_text() -> None:
    assert [(s.name, s.value) for s in AppState] == [
        ("UNSUBMITTED", 0),
        ("SUBMITTED", 1),
        ("PENDING", 2),
        ("RUNNING", 3),
        ("SUCCEEDED", 4),
        ("FAILED", 5),
        ("CANCELLED", 6),
        ("UNKNOWN", 7),
    ]
    assert str(AppState.RUNNING) == "RUNNING"
    assert f"{AppState.RUNNING}" == "RUNNING"
    assert repr(AppState.FAILED) == "FAILED (5)"
    assert AppState(3) is AppState.RUNNING
    assert ReplicaState is AppState


def test_terminal_and_started() -> None:
    for state in AppState:
        assert AppStatus(state=state).is_terminal() == (state in _TERMINAL_STATES)
        assert is_terminal(state) == (state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED))
        assert is_started(state) == (state in _TERMINAL_STATES or state == AppState.RUNNING)


def test_serialize() -> None:
    assert repr(AppStatus(AppState.FAILED)) == (
        "AppStatus:\n"
        "  msg: ''\n"
        "  num_restarts: 0\n"
        "  roles: []\n"
        "  state: FAILED (5)\n"
        "  structured_error_msg: <NONE>\n"
        "  ui_url: null\n"
    )


def test_serialize_embeds_json_error() -> None:
    status = AppStatus(AppState.FAILED, structured_error_msg='{"message": "test error"}')
    assert repr(status) == (
        "AppStatus:\n"
        "  msg: ''\n"
        "  num_restarts: 0\n"
        "  roles: []\n"
        "  state: FAILED (5)\n"
        "  structured_error_msg:\n"
        "    message: test error\n"
        "  ui_url: null\n"
    )


def test_serialize_keeps_non_json_error_as_text() -> None:
    status = AppStatus(AppState.FAILED, structured_error_msg="worker terminated by SIGKILL")
    assert "structured_error_msg: worker terminated by SIGKILL" in repr(status)
    with pytest.raises(AppStatusError, match=r"(?s)job did not succeed:.*FAILED.*"):
        status.raise_for_status()


def test_raise_for_status() -> None:
    AppStatus(state=AppState.SUCCEEDED).raise_for_status()
    for state in (AppState.FAILED, AppState.CANCELLED, AppState.RUNNING):
        status = AppStatus(state=state)
        with pytest.raises(AppStatusError, match=rf"(?s)job did not succeed:.*{state.name}.*") as raised:
            status.raise_for_status()
        assert raised.value.status is status


def test_format_error_message_keeps_the_rpc_part_and_wraps() -> None:
    rpc_error_message = """RuntimeError('On WorkerInfo(id=1, name=trainer:0:0):
RuntimeError(ShardingError('Table of size 715.26GB cannot be added to any rank'))
Traceback (most recent call last):
..
')
Traceback (most recent call last):
  File "/dev/shm/uid-0/360e3568-seed-nspid4026541870-ns-4026541866/torch/distributed/rpc/internal.py", line 190
"""
    expected = """RuntimeError('On WorkerInfo(id=1, name=trainer:0:0):
RuntimeError(ShardingError('Table
 of size 715.26GB cannot be added to any rank'))
Traceback (most recent call last):
..
')"""
    status = AppStatus(state=AppState.FAILED)
    assert status._format_error_message(rpc_error_message, header="", width=80) == expected


def test_format_error_message_header_indents_continuation_lines() -> None:
    status = AppStatus(state=AppState.FAILED)
    assert status._format_error_message("aaaa bbbb cccc", header="E: ", width=4) == "E: aaaa\n    bbbb\n    cccc"
    assert status._format_error_message("", header="E: ") == "E: "


def test_format_error_message_drops_nested_exception_context() -> None:
    status = AppStatus(state=AppState.FAILED)
    msg = "c10::Error: CUDA error: an illegal memory access\nException raised from create_event_internal"
    assert status._format_error_message(msg, header="") == "c10::Error: CUDA error: an illegal memory access"


def _status_with(error_msg: str, state: AppState = AppState.FAILED) -> AppStatus:
    replica = ReplicaStatus(id=0, state=state, role="worker", hostname="localhost", structured_error_msg=error_msg)
    return AppStatus(state=AppState.RUNNING, roles=[RoleStatus(role="worker", replicas=[replica])])


def _two_replica_status() -> AppStatus:
    failed = ReplicaStatus(
        id=0, state=AppState.FAILED, role="worker", hostname="localhost", structured_error_msg=NESTED_ERROR
    )
    running = ReplicaStatus(id=1, state=AppState.RUNNING, role="worker", hostname="localhost")
    # listed out of order on purpose: format sorts replicas by id
    return AppStatus(state=AppState.RUNNING, roles=[RoleStatus(role="worker", replicas=[running, failed])])


def test_format_app_status(london_time: None) -> None:
    expected = """AppStatus:
    State: RUNNING
    Num Restarts: 0
    Roles:
 *worker[0]:FAILED (exitcode: -1)
        timestamp: 1970-01-16 00:13:02
        hostname: localhost
        error_msg: error
  worker[1]:RUNNING
    Msg:
    Structured Error Msg: <NONE>
    UI URL: None
    """
    actual = _two_replica_status().format()
    assert actual.split() == expected.split()
    assert " *worker[0]:FAILED (exitcode: -1)\n        timestamp: 1970-01-16 00:13:02\n" in actual


def test_format_flat_error_schema(london_time: None) -> None:
    status = _status_with(
        '{"message": "InjectedFailure: Injected failure exception", "timestamp": 1293182,'
        ' "errorService": "Mast", "errorCode": 1}'
    )
    formatted = status.format()
    assert "FAILED (exitcode: 1)" in formatted
    assert "timestamp: 1970-01-16 00:13:02" in formatted
    assert "error_msg: InjectedFailure: Injected failure exception" in formatted


@pytest.mark.parametrize(
    "error_msg, text",
    [
        ('{"message": "InjectedFailure: boom"}', "InjectedFailure: boom"),
        ('{"message":{"message":"test error"}}', "test error"),
        ('{"message":{"message":"zero","errorCode":0,"extraInfo":{}}}', "zero"),
    ],
)
def test_format_missing_fields_show_not_available(error_msg: str, text: str) -> None:
    formatted = _status_with(error_msg).format()
    assert "FAILED (exitcode: <N/A>)" in formatted
    assert "timestamp: <N/A>" in formatted
    assert f"error_msg: {text}" in formatted


@pytest.mark.parametrize(
    "error_msg",
    [
        '["not", "a", "dict"]',
        '{"error": "no message key"}',
        '{"message": {"message": 5}}',
        '{"message": null}',
        '"just a quoted string"',
        "not json at all",
    ],
)
def test_format_unrecognised_error_is_shown_verbatim(error_msg: str) -> None:
    assert error_msg in _status_with(error_msg).format()


def test_format_marks_failures_without_reply_file() -> None:
    replicas = [
        ReplicaStatus(id=1, state=AppState.CANCELLED, role="ps", hostname="h1"),
        ReplicaStatus(id=0, state=AppState.FAILED, role="ps", hostname="h0"),
    ]
    formatted = AppStatus(AppState.FAILED, roles=[RoleStatus("ps", replicas)]).format()
    assert "\n *ps[0]:FAILED (no reply file)\n  ps[1]:CANCELLED (no reply file)\n" in formatted


def test_format_filters_roles() -> None:
    roles = [
        RoleStatus("trainer", [ReplicaStatus(0, AppState.RUNNING, "trainer", "h")]),
        RoleStatus("reader", [ReplicaStatus(0, AppState.PENDING, "reader", "h")]),
    ]
    status = AppStatus(AppState.RUNNING, num_restarts=2, msg="hi", ui_url="http://ui", roles=roles)
    formatted = status.format(filter_roles=["reader"])
    assert "reader[0]:PENDING" in formatted and "trainer" not in formatted
    assert "Num Restarts: 2" in formatted and "Msg: hi" in formatted and "UI URL: http://ui" in formatted
    assert "trainer[0]:RUNNING" in status.format()


def test_to_json() -> None:
    result = _two_replica_status().to_json()
    assert result == {
        "state": "RUNNING",
        "num_restarts": 0,
        "roles": [
            {
                "role": "worker",
                "replicas": [
                    {
                        "id": 1,
                        "state": 3,
                        "role": "worker",
                        "hostname": "localhost",
                        "structured_error_msg": "<NONE>",
                        "hostaddr": "localhost",
                    },
                    {
                        "id": 0,
                        "state": 5,
                        "role": "worker",
                        "hostname": "localhost",
                        "structured_error_msg": NESTED_ERROR,
                        "hostaddr": "localhost",
                    },
                ],
            }
        ],
        "msg": "",
        "structured_error_msg": "<NONE>",
        "url": None,
    }
    assert _two_replica_status().to_json(filter_roles=["other"])["roles"] == []


def test_hostaddr_defaults_to_the_hostname() -> None:
    assert ReplicaStatus(id=0, state=AppState.RUNNING, role="w", hostname="node-0").hostaddr == "node-0"
    explicit = ReplicaStatus(id=0, state=AppState.RUNNING, role="w", hostname="node-0", hostaddr="10.0.0.7")
    assert (explicit.hostname, explicit.hostaddr) == ("node-0", "10.0.0.7")


def test_to_json_is_plain_json() -> None:
    result = _two_replica_status().to_json()
    states = [replica["state"] for replica in result["roles"][0]["replicas"]]
    assert states == [3, 5] and all(type(state) is int for state in states)
    assert json.loads(json.dumps(result)) == result
