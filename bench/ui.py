#!/usr/bin/env python3
"""Benchmark the dashboard (`torchspec ui`): the app list with 1,000 apps, log latency, memory on a big log.

    python bench/ui.py                 # needs the ui extra: pip install -e '.[ui]'

1. The list: a registered fake scheduler returns 1,000 ListAppResponses (1,000 real local apps would measure
   the local scheduler, not the page); the dashboard runs under uvicorn in a thread of this process and `/`
   (the whole page, server-rendered) and `/api/apps` (what the page polls) are fetched over HTTP, 11 times
   each, median.  The floor is a GET of `/states.css` on the same server (a request's own cost).  Target: the
   page in <= 300 ms.
2. Latency: `torchspec ui` runs as a user starts it (a subprocess); a local replica prints its clock every
   0.5 s; this process reads the SSE stream with blocking reads (no polling) and takes, per line, arrival
   minus printed time.  The floor is the library following the same log in this process
   (`Runner.log_lines(should_tail=True)` in a thread).  Target: median <= 100 ms.
3. Memory: a replica writes 10 MB (100,000 lines of 100 bytes), then a line per 0.5 s; the stream is opened
   with follow on and read until 5 new lines came.  The server's RSS before, and its peak while serving: the
   kernel's own high-water mark (VmHWM, reset first through /proc/PID/clear_refs, so no spike between samples
   is missed), else, where that reset is not allowed, RSS sampled every 0.2 s by a sleeping thread.  Target:
   growth < 20 MB.

Prints the figures and PASS or MISS per target; exit 0 whatever the timings (1 on a MISS with
--fail-on-miss).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, List, Tuple
from urllib.parse import quote

from common import median

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIST_TARGET, LATENCY_TARGET, RSS_TARGET_MB = 0.300, 0.100, 20.0


class FakeScheduler:
    """1,000 apps, as a backend that answers at once would list them."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        from torchspec.schedulers.api import ListAppResponse
        from torchspec.specs import AppState

        states = list(AppState)
        self.apps = [(f"job-{i:04d}", states[i % len(states)]) for i in range(1000)]
        self._make = ListAppResponse

    def list(self) -> List[Any]:
        return [self._make(app_id, state) for app_id, state in self.apps]

    def close(self) -> None:
        pass


def get(port: int, path: str, cookie: str) -> Tuple[float, int, bytes]:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Cookie": cookie})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return time.perf_counter() - start, r.status, body


def bench_list(rounds: int) -> Tuple[float, float, float]:
    import uvicorn

    from torchspec.runner import Runner
    from torchspec.ui import create_app

    app = create_app(lambda: Runner("torchspec", {"fake": FakeScheduler}), ["fake"], "tok")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    cookie = "torchspec_ui_token=tok; torchspec_ui_session=s"
    _, status, body = get(port, "/", cookie)
    assert status == 200 and body.count(b"<tr data-state") == 1000, (status, body[:300])
    page, api, floor = [], [], []
    for _ in range(rounds):
        page.append(get(port, "/", cookie)[0])
        api.append(get(port, "/api/apps", cookie)[0])
        floor.append(get(port, "/states.css", cookie)[0])
    server.should_exit = True
    thread.join(10)
    return median(page), median(api), median(floor)


def start_ui(home: pathlib.Path) -> Tuple[subprocess.Popen, int, str]:
    env = {**os.environ, "TORCHSPEC_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "torchspec", "ui", "--no-browser", "-s", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    url = proc.stdout.readline().strip()  # type: ignore[union-attr]
    port = int(url.split(":")[2].split("/")[0])
    return proc, port, "torchspec_ui_token=" + url.split("token=")[1] + "; torchspec_ui_session=s"


def submit(home: pathlib.Path, folder: pathlib.Path, name: str, code: str) -> str:
    spec = folder / f"{name}.yaml"
    spec.write_text(f"name: {name}\nroles:\n  - name: main\n    image: {folder}\n    entrypoint: {sys.executable}\n"
                    f"    args: [\"-c\", {json.dumps(code)}]\n")
    env = {**os.environ, "TORCHSPEC_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "torchspec", "submit", str(spec), "-s", "local"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


def sse_lines(port: int, path: str, cookie: str, on_line: Callable[[str], bool]) -> None:
    """Read the stream (blocking reads) and hand each log line to ``on_line`` until it returns True."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", path, headers={"Cookie": cookie})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    while True:
        raw = r.fp.readline()
        if not raw:
            return
        if raw.startswith(b"data: "):
            data = json.loads(raw[6:])
            for line in data.get("lines", []):
                if on_line(line):
                    conn.close()
                    return


TICKER = "import time\nfor i in range({n}):\n    print(repr(time.time()), flush=True)\n    time.sleep(0.5)\n"


def bench_latency(home: pathlib.Path, folder: pathlib.Path, port: int, cookie: str) -> Tuple[float, float]:
    from torchspec.runner import get_runner

    os.environ["TORCHSPEC_HOME"] = str(home)
    handle = submit(home, folder, "ticker", TICKER.format(n=24))
    served: List[float] = []
    library: List[float] = []

    def follow_in_process() -> None:
        with get_runner() as runner:
            for line in runner.log_lines(handle, "main", 0, should_tail=True):
                library.append(time.time() - float(line))

    thread = threading.Thread(target=follow_in_process, daemon=True)
    thread.start()

    def take(line: str) -> bool:
        served.append(time.time() - float(line))
        return len(served) >= 20

    sse_lines(port, f"/app/{quote(handle, safe='')}/logs/main/0", cookie, take)
    thread.join(30)
    # the first lines were printed before the stream opened (sent as the tail): only lines sent live count
    return median(served[4:]), median(library[4:])


BIG = ("import sys, time\nline = 'x' * 99 + '\\n'\nsys.stdout.write(line * 100000)\nsys.stdout.flush()\n"
       "for i in range(60):\n    print('tick', i, flush=True)\n    time.sleep(0.5)\n")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM to its current RSS (Linux 4.0+); False where that is not allowed."""
    try:
        pathlib.Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def bench_memory(home: pathlib.Path, folder: pathlib.Path, proc: subprocess.Popen, port: int,
                 cookie: str) -> Tuple[float, float, float]:
    handle = submit(home, folder, "big", BIG)
    time.sleep(2)  # the 10 MB are written
    get(port, "/", cookie)
    get(port, f"/app/{quote(handle, safe='')}", cookie)
    before = rss_mb(proc.pid)
    exact = reset_peak(proc.pid)
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak.append(rss_mb(proc.pid))

    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    first: List[float] = []
    ticks: List[str] = []

    def take(line: str) -> bool:
        if not first:
            first.append(time.perf_counter() - start)
        if line.startswith("tick"):
            ticks.append(line)
        return len(ticks) >= 5

    sse_lines(port, f"/app/{quote(handle, safe='')}/logs/main/0", cookie, take)
    stop.set()
    if exact:
        peak.append(rss_mb(proc.pid, "VmHWM"))
    return before, max(peak), first[0]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--fail-on-miss", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    page, api, floor = bench_list(args.rounds)
    print(f"list of 1,000 apps: page {page * 1000:.1f} ms, /api/apps {api * 1000:.1f} ms; floor (a GET of "
          f"/states.css) {floor * 1000:.1f} ms; page/floor {page / floor:.1f}x  "
          f"{verdict(page <= LIST_TARGET)} (<= {LIST_TARGET * 1000:.0f} ms)")
    with tempfile.TemporaryDirectory(prefix="torchspec-bench-ui-") as tmp:
        home, folder = pathlib.Path(tmp) / "home", pathlib.Path(tmp)
        proc, port, cookie = start_ui(home)
        try:
            served, library = bench_latency(home, folder, port, cookie)
            print(f"log line -> SSE stream: median {served * 1000:.1f} ms; floor (Runner.log_lines following, in "
                  f"process) {library * 1000:.1f} ms  {verdict(served <= LATENCY_TARGET)} "
                  f"(<= {LATENCY_TARGET * 1000:.0f} ms)")
            before, peak, first = bench_memory(home, folder, proc, port, cookie)
            print(f"following a 10 MB log: server RSS {before:.1f} MB -> peak {peak:.1f} MB (+{peak - before:.1f} MB), "
                  f"first lines after {first * 1000:.0f} ms  {verdict(peak - before < RSS_TARGET_MB)} "
                  f"(< {RSS_TARGET_MB:.0f} MB)")
        finally:
            proc.terminate()
            proc.wait(10)
            subprocess.run([sys.executable, "-c", "from torchspec.runner import get_runner\n"
                            "with get_runner() as r:\n    [r.cancel(a.app_handle) for a in r.list('local')]"],
                           env={**os.environ, "TORCHSPEC_HOME": str(home), "PYTHONPATH": str(ROOT)}, check=False)
    missed = page > LIST_TARGET or served > LATENCY_TARGET or peak - before >= RSS_TARGET_MB
    return 1 if missed and args.fail_on_miss else 0


if __name__ == "__main__":
    sys.exit(main())
