"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, driven by Selenium):
live state without a reload, log lines as they are printed, cancel with a confirmation, the token refused.

``torchspec ui`` runs as a subprocess, as a user starts it, on a free port; its state is in tmp_path.  With
TORCHSPEC_UI_SCREENSHOTS=1 the test writes docs/images/ui-apps.png and ui-app.png.  Without a browser the
tests skip, except under TORCHSPEC_REQUIRE_BROWSER=1 (scripts/test sets it in CI), where they fail.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from typing import Iterator
from urllib.parse import quote

import pytest

import skips
import ui_support as support

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def _need_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        skips.skip_or_fail("BROWSER", f"no headless browser: {', '.join(missing)} missing "
                                      "(apt-get install chromium chromium-driver)")


@pytest.fixture
def home(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "home"


@pytest.fixture
def server(home: pathlib.Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """``torchspec ui --no-browser --port 0 --allow-actions``: the URL it prints; every app cancelled after."""
    _need_browser()
    proc = subprocess.Popen([sys.executable, "-m", "torchspec", "ui", "--no-browser", "--port", "0",
                             "--allow-actions", "-s", "local"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=support.cli_env(home))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url, proc.stderr.read() if proc.stderr else url
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        from torchspec.runner import get_runner

        old = os.environ.get("TORCHSPEC_HOME")
        os.environ["TORCHSPEC_HOME"] = str(home)
        try:
            with get_runner() as runner:
                for app in runner.list("local"):
                    runner.cancel(app.app_handle)
        finally:
            if old is None:
                os.environ.pop("TORCHSPEC_HOME")
            else:
                os.environ["TORCHSPEC_HOME"] = old


@pytest.fixture
def browser() -> Iterator[object]:
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(condition, timeout: float = 30, what: str = ""):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = condition()
        except Exception:  # noqa: BLE001 - an element not there yet
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _shot(driver: object, name: str) -> None:
    if os.environ.get("TORCHSPEC_UI_SCREENSHOTS") == "1":
        target = support.ROOT / "docs" / "images" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(target))  # type: ignore[attr-defined]


def test_live_state_logs_and_cancel(server: str, browser: object, home: pathlib.Path,
                                    tmp_path: pathlib.Path) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    base = server.split("/?")[0]
    d.get(base + "/")  # type: ignore[attr-defined]
    assert "needs its token" in d.find_element(By.TAG_NAME, "h1").text  # type: ignore[attr-defined]
    d.get(server)  # type: ignore[attr-defined]
    wait_for(lambda: "apps" in d.find_element(By.ID, "count").text, what="the list")  # type: ignore[attr-defined]
    # each app runs until the test lets it go (a file appears): the page is checked while it runs, never
    # within a window of the app's own timing
    def gated(name: str) -> str:
        """Prints tick 1-4, waits for the file ``name``.go, prints tick 5-8 and ends."""
        return (f"for i in 1 2 3 4; do echo tick $i; done; while [ ! -e {tmp_path / name}.go ]; do sleep 0.1; "
                f"done; for i in 5 6 7 8; do echo tick $i; done")

    ticking = support.submit(support.write_spec(tmp_path, "ticking", gated("ticking")), home)
    sleeper = support.submit(support.write_spec(tmp_path, "sleeper", "echo waiting; sleep 120"), home)

    def state_of(handle: str) -> str:
        for row in d.find_elements(By.CSS_SELECTOR, "#apps tr"):  # type: ignore[attr-defined]
            if row.find_element(By.TAG_NAME, "a").text == handle:
                return str(row.find_elements(By.TAG_NAME, "td")[3].text)
        return ""

    wait_for(lambda: state_of(ticking) == "RUNNING", what="RUNNING without a reload")
    _shot(d, "ui-apps.png")
    (tmp_path / "ticking.go").touch()
    wait_for(lambda: state_of(ticking) == "SUCCEEDED", what="SUCCEEDED without a reload")

    # the log of a running replica, read as it is printed: lines 5-8 come after the page is up
    follower = support.submit(support.write_spec(tmp_path, "follower", gated("follower")), home)
    d.get(f"{base}/app/{quote(follower, safe='')}")  # type: ignore[attr-defined]
    log = d.find_element(By.ID, "log")  # type: ignore[attr-defined]
    wait_for(lambda: "tick 4" in log.text and d.find_element(By.ID, "app-state").text == "RUNNING",
             what="the first lines while it runs")
    assert "tick 5" not in log.text
    (tmp_path / "follower.go").touch()
    wait_for(lambda: "tick 5" in log.text, what="later lines, as they are printed")
    _shot(d, "ui-app.png")
    wait_for(lambda: "tick 8" in log.text and d.find_element(By.ID, "app-state").text == "SUCCEEDED",
             what="the end")

    # cancel, confirmed
    d.get(f"{base}/app/{quote(sleeper, safe='')}")  # type: ignore[attr-defined]
    wait_for(lambda: d.find_element(By.ID, "app-state").text == "RUNNING", what="the sleeper running")
    d.find_element(By.ID, "cancel").click()  # type: ignore[attr-defined]
    alert = d.switch_to.alert  # type: ignore[attr-defined]
    assert "Cancel" in alert.text
    alert.accept()
    wait_for(lambda: d.find_element(By.ID, "app-state").text == "CANCELLED",
             what=f"CANCELLED: {d.find_element(By.TAG_NAME, 'main').text[:300]}")  # type: ignore[attr-defined]


def test_a_click_on_a_sweep_shows_its_apps_alone(server: str, browser: object, home: pathlib.Path,
                                                  tmp_path: pathlib.Path) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    sweep, handles = support.submit_sweep(tmp_path, home, "1,2", "echo x={{ x }}")
    other = support.submit(support.write_spec(tmp_path, "other", "echo other"), home)
    d.get(server)  # type: ignore[attr-defined]

    def shown() -> list:
        return [row.find_element(By.TAG_NAME, "a").text
                for row in d.find_elements(By.CSS_SELECTOR, "#apps tr")]  # type: ignore[attr-defined]

    wait_for(lambda: set(handles + [other]) <= set(shown()), what="every app listed")
    line = f'#sweeps button[data-sweep="{sweep}"]'
    button = wait_for(lambda: d.find_element(By.CSS_SELECTOR, line), what="the sweep's line")  # type: ignore[attr-defined]
    assert f"sweep {sweep}: 2 apps" in button.text
    button.click()
    wait_for(lambda: sorted(shown()) == sorted(handles), what="the sweep's apps alone")
    assert d.find_element(By.ID, "filter").get_attribute("value") == sweep  # type: ignore[attr-defined]
