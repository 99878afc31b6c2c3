"""The dashboard over HTTP (Starlette's TestClient): the token, CSRF, actions off by default, clear errors for
tampered requests, a scheduler that cannot be reached, links, and no value env() read in any response."""

from __future__ import annotations

import pathlib
import time
import warnings
from typing import Any, Iterator
from urllib.parse import quote

import pytest

with warnings.catch_warnings():  # Starlette 1.x would rather have httpx2; httpx works
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402

import ui_support as support  # noqa: E402
from torchspec.ui import create_app  # noqa: E402

SECRET = "s3cr3t-Xy9Qz"  # 12 characters


@pytest.fixture
def home(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def client(allow_actions: bool = False, **schedulers: Any) -> TestClient:
    app = create_app(support.runner_factory(**schedulers), ["local", *schedulers], support.TOKEN, allow_actions)
    return TestClient(app, base_url="http://127.0.0.1:8123")


def logged_in(c: TestClient) -> TestClient:
    assert c.get(f"/?token={support.TOKEN}").status_code == 200
    return c


@pytest.fixture
def done_app(home: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[str]:
    """A local app that printed two lines and SUCCEEDED (checked: a test of an ended app needs one)."""
    spec = support.write_spec(tmp_path, "hello", "echo first; echo second")
    handle = support.submit(spec, home)
    from torchspec.runner import get_runner

    with get_runner() as runner:
        status = runner.wait(handle, wait_interval=0.1, timeout=120)
    assert status is not None and str(status.state) == "SUCCEEDED", status
    yield handle


def test_the_token_is_required_then_a_cookie_carries_it(home: pathlib.Path) -> None:
    with client() as c:
        for path in ("/", "/api/apps", "/static/ui.js", "/app/x"):
            r = c.get(path)
            assert r.status_code == 403, path
        assert "torchspec ui" in c.get("/").text and "?token=" in c.get("/").text
        assert c.get("/api/apps").json()["error"].startswith("this dashboard needs its token")
        assert c.get("/?token=wrong").status_code == 403
        r = c.get(f"/?token={support.TOKEN}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers.get_list("set-cookie")[0]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        c.cookies.update(r.cookies)
        assert c.get("/api/apps").status_code == 200
        assert c.get("/static/ui.js").status_code == 200
    with client() as other:
        other.cookies.set("torchspec_ui_token", "forged")
        assert other.get("/api/apps").status_code == 403


def test_actions_are_off_by_default(done_app: str) -> None:
    with client() as c:
        logged_in(c)
        page = c.get(f"/app/{quote(done_app, safe='')}").text
        assert "/cancel" not in page and "/rerun" not in page
        r = c.post(f"/app/{quote(done_app, safe='')}/cancel", headers={"origin": "http://127.0.0.1:8123"})
        assert r.status_code == 403 and "--allow-actions" in r.text


def test_a_post_from_another_site_or_without_the_csrf_token_is_refused(done_app: str) -> None:
    with client(allow_actions=True) as c:
        logged_in(c)
        url = f"/app/{quote(done_app, safe='')}/rerun"
        page = c.get(f"/app/{quote(done_app, safe='')}").text
        csrf = page.split('name="csrf" value="')[1].split('"')[0]
        for headers, form in (({"origin": "http://evil.example"}, {"csrf": csrf}),
                              ({}, {"csrf": csrf}),  # no Origin, no Referer
                              ({"origin": "http://127.0.0.1:8123"}, {"csrf": "0" * 64}),
                              ({"origin": "http://127.0.0.1:8123"}, {}),
                              ({"origin": "http://evil.example:8123", "host": "evil.example:8123"}, {"csrf": csrf})):
            r = c.post(url, data=form, headers=headers, follow_redirects=False)
            assert r.status_code == 403, (headers, form, r.text)
            assert "refused" in r.text


def test_cancel_with_the_csrf_token_cancels(home: pathlib.Path, tmp_path: pathlib.Path) -> None:
    handle = support.submit(support.write_spec(tmp_path, "sleeper", "sleep 60"), home)
    try:
        with client(allow_actions=True) as c:
            logged_in(c)
            page = c.get(f"/app/{quote(handle, safe='')}").text
            csrf = page.split('name="csrf" value="')[1].split('"')[0]
            r = c.post(f"/app/{quote(handle, safe='')}/cancel", data={"csrf": csrf},
                       headers={"origin": "http://127.0.0.1:8123"}, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"] == f"/app/{quote(handle, safe='')}"
            deadline = time.monotonic() + 30
            while c.get(f"/api/app/{quote(handle, safe='')}").json()["state"] != "CANCELLED":
                assert time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        support.cancel(handle, home)


@pytest.mark.parametrize("path, code, words", [
    ("/app/not-a-handle", 400, "malformed app handle"),
    ("/api/app/local%3A%2F%2Ftorchspec%2Fnope-aaaaaa", 404, "unknown app"),
    ("/app/{h}/logs/nosuchrole/0", 404, "has no role 'nosuchrole'"),
    ("/app/{h}/logs/main/7", 404, "has no replica 7"),
    ("/app/{h}/logs/main/0?regex=(unclosed", 400, "not a regular expression"),
    ("/app/{h}/logs/main/0?since=5", 400, "has no unit"),
    ("/app/{h}/logs/main/0?since=yesterday-ish", 400, "cannot read"),
    ("/api/app/{h}/logs/main/0?before=many", 400, "before"),
    ("/app/{h}/logs/main/x", 404, ""),
])
def test_tampered_requests_get_clear_errors(done_app: str, path: str, code: int, words: str) -> None:
    with client() as c:
        logged_in(c)
        url = path.replace("{h}", quote(done_app, safe=""))
        r = c.get(url, headers={"accept": "application/json"})
        assert r.status_code == code, r.text
        assert "Traceback" not in r.text and words in r.text
        page = c.get(url)  # the same as a page for people
        assert page.status_code == code and "Traceback" not in page.text
        assert c.get("/api/apps").status_code == 200  # and the server goes on


def test_logs_tail_search_and_load_more(done_app: str) -> None:
    with client() as c:
        logged_in(c)
        base = f"/app/{quote(done_app, safe='')}/logs/main/0"
        text = c.get(base).text
        assert '"lines": ["first", "second"]' in text and "event: end" in text
        assert '"lines": ["second"]' in c.get(base + "?regex=sec").text
        assert c.get(f"/api/app/{quote(done_app, safe='')}/logs/main/0?before=1").json() == \
            {"start": 0, "lines": ["first"]}


def test_an_unreachable_scheduler_shows_its_message_and_the_rest_works(done_app: str) -> None:
    with client(unreachable=support.UnreachableScheduler) as c:
        logged_in(c)
        page = c.get("/").text
        assert "unreachable: cannot reach the unreachable engine" in page
        assert done_app in page
        data = c.get("/api/apps").json()["schedulers"]
        by_name = {s["name"]: s for s in data}
        assert by_name["unreachable"]["error"].startswith("unreachable: cannot reach")
        assert [a["handle"] for a in by_name["local"]["apps"]] == [done_app]
        assert by_name["local"]["apps"][0]["state"] == "SUCCEEDED"


def test_only_http_links_are_made(home: pathlib.Path, tmp_path: pathlib.Path) -> None:
    metadata = ("metadata:\n  torchspec.dev/link.tensorboard: https://tb.example.com/run/1\n"
                "  docs: http://docs.example.com/x\n  evil: javascript:alert(1)\n  data: data:text/html,hi\n"
                "  torchspec.dev/link.ftp: ftp://files.example.com/\n  note: just text\n")
    handle = support.submit(support.write_spec(tmp_path, "linked", "true", metadata=metadata), home)
    with client() as c:
        logged_in(c)
        page = c.get(f"/app/{quote(handle, safe='')}").text
        links = page.split('<ul class="links">')[1].split("</ul>")[0]
        assert 'href="https://tb.example.com/run/1" rel="noopener noreferrer"' in links and ">tensorboard<" in links
        assert 'href="http://docs.example.com/x"' in links
        assert "javascript:" not in links and "data:" not in links and "ftp:" not in links


def test_no_value_env_read_is_ever_sent(home: pathlib.Path, tmp_path: pathlib.Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    env = '    env:\n      TOKEN: "{{ env(\'MY_SECRET\') }}"\n      OTHER: "x-{{ env(\'MY_SECRET\') }}"\n'
    spec = support.write_spec(tmp_path, "secretive", "echo running; sleep 30", env=env)
    handle = support.submit(spec, home, MY_SECRET=SECRET)
    monkeypatch.setenv("MY_SECRET", SECRET)  # as when the user who submitted it starts the dashboard
    try:
        with client(allow_actions=True) as c:
            logged_in(c)
            h = quote(handle, safe="")
            responses = [c.get(p) for p in ("/", "/api/apps", f"/app/{h}", f"/api/app/{h}",
                                            f"/api/app/{h}/logs/main/0?before=10", "/states.css")]
            responses.append(c.get(f"/app/{h}/logs/main/0?follow=0"))
            page = responses[2].text
            assert "&lt;value from env(MY_SECRET)&gt;" in page
            csrf = page.split('name="csrf" value="')[1].split('"')[0]
            rerun = c.post(f"/app/{h}/rerun", data={"csrf": csrf}, headers={"origin": "http://127.0.0.1:8123"},
                           follow_redirects=False)
            assert rerun.status_code == 303, rerun.text
            responses += [rerun, c.get(rerun.headers["location"]), c.get("/api/apps")]
            new = rerun.headers["location"].rsplit("/", 1)[1]
            responses.append(c.get(f"/api/app/{new}"))
            for r in responses:
                assert SECRET not in r.text and SECRET not in str(r.headers), r.url
            assert "torchspec.dev/provenance" not in page
    finally:
        from torchspec.runner import get_runner

        with get_runner() as runner:
            for app in runner.list("local"):
                runner.cancel(app.app_handle)


def test_a_sweep_is_one_line_and_its_id_filters_the_apps(home: pathlib.Path, tmp_path: pathlib.Path) -> None:
    sweep, handles = support.submit_sweep(tmp_path, home, "1,2,3", "echo x={{ x }}")
    alone = support.submit(support.write_spec(tmp_path, "alone", "echo alone"), home)
    from torchspec.runner import get_runner

    with get_runner() as runner:
        for handle in [*handles, alone]:
            runner.wait(handle, wait_interval=0.1, timeout=120)
    with logged_in(client()) as c:
        rows = {a["handle"]: a for s in c.get("/api/apps").json()["schedulers"] for a in s["apps"]}
        assert [rows[h]["sweep"] for h in handles] == [sweep] * 3 and rows[alone]["sweep"] == ""
        page = c.get("/").text
        assert f'data-sweep="{sweep}">sweep {sweep}: 3 apps (3 SUCCEEDED)</button>' in page, page
        assert f'value="{sweep}"' in c.get(f"/?sweep={sweep}").text  # a link to a sweep opens it filtered


def test_the_sweep_lines_count_each_sweeps_apps_by_state() -> None:
    from torchspec.ui.listing import sweeps

    rows = [{"sweep": "a", "state": "RUNNING"}, {"sweep": "", "state": "FAILED"}, {"sweep": "b", "state": "FAILED"},
            {"sweep": "a", "state": "SUCCEEDED"}, {"sweep": "a", "state": "RUNNING"}]
    assert sweeps(rows) == [{"id": "a", "count": 3, "states": "2 RUNNING, 1 SUCCEEDED"},
                            {"id": "b", "count": 1, "states": "1 FAILED"}]
