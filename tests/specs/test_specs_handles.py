"""App handles: ``scheduler://session/app_id`` (ported from TorchX's AppHandleTest, plus edge cases)."""

from __future__ import annotations

import pytest

from torchspec.specs.api import (
    MalformedAppHandleException,
    ParsedAppHandle,
    UnknownAppException,
    UnknownSchedulerException,
    make_app_handle,
    parse_app_handle,
)


@pytest.mark.parametrize(
    "handle",
    [
        "my_session/my_application_id",  # missing scheduler backend
        "local://my_session/",  # missing app_id
        "local://my_application_id",  # missing session segment
        "",
        "local:/my_session/app",  # one slash only
        "://session/app",  # empty scheduler backend
    ],
)
def test_malformed_handles_raise(handle: str) -> None:
    with pytest.raises(MalformedAppHandleException) as raised:
        parse_app_handle(handle)
    assert str(raised.value) == f"{handle} is not of the form: <scheduler_backend>://<session_name>/<app_id>"


def test_parse() -> None:
    scheduler_backend, session_name, app_id = parse_app_handle("local://my_session/my_app_id_1234")
    assert (scheduler_backend, session_name, app_id) == ("local", "my_session", "my_app_id_1234")


def test_parse_returns_named_fields() -> None:
    parsed = parse_app_handle("k8s://default/foo_bar")
    assert parsed == ParsedAppHandle(scheduler_backend="k8s", session_name="default", app_id="foo_bar")
    assert parsed.app_id == "foo_bar"


def test_empty_session_name_is_allowed() -> None:
    handle = parse_app_handle("local:///my_application_id")
    assert handle.scheduler_backend == "local"
    assert handle.session_name == ""
    assert handle.app_id == "my_application_id"


def test_last_slash_separates_the_app_id() -> None:
    assert parse_app_handle("k8s://ns/sub/app") == ("k8s", "ns/sub", "app")


def test_make() -> None:
    handle = make_app_handle(scheduler_backend="local", session_name="my_session", app_id="my_app_id_1234")
    assert handle == "local://my_session/my_app_id_1234"


@pytest.mark.parametrize("parts", [("local", "s", "a"), ("kubernetes", "", "job-123"), ("slurm", "x.y", "9")])
def test_make_then_parse_round_trips(parts: tuple[str, str, str]) -> None:
    assert parse_app_handle(make_app_handle(*parts)) == parts


def test_exception_messages() -> None:
    assert str(UnknownSchedulerException("foo")) == (
        "Scheduler backend: foo does not exist. Use session.scheduler_backends() to see all supported schedulers"
    )
    assert str(UnknownAppException("local://s/a")) == (
        "Unknown app = local://s/a. Did you forget to call session.run()?"
        " Otherwise, the app may have already finished and purged by the scheduler"
    )


def test_no_scheduler_at_all_says_torchspec_was_never_installed() -> None:
    """Run from a checkout that pip never installed, not even the built-ins register (entry points)."""
    e = UnknownSchedulerException("local", [])
    assert e.hint is not None and "there are no registered schedulers" in e.hint and "pip install -e ." in e.hint
    assert "pip install" not in (UnknownSchedulerException("lcoal", ["local"]).hint or "")
