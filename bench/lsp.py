#!/usr/bin/env python3
"""Benchmark the language server: how soon a change to a 5,000-line spec is linted again.

    python bench/lsp.py                       # 5,000 lines, 31 timed edits
    python bench/lsp.py --lines 10000 --repeat 41 --debounce-ms 150

`torchspec lsp` runs as editors run it (a subprocess over stdio, here driven
by pygls' client).  The spec is opened, then each round sends one edit of one
line in its middle (as an editor's incremental didChange does: a value
changed, a typo that lint reports, the typo fixed) and times it from the
didChange sent to the publishDiagnostics received for that version, minus the
debounce the server was started with (the quiet time it waits on purpose).
The floor is `torchspec.lint.lint_text` of the same text in this process after
each edit (interleaved with the edits): the library's own time, without the
protocol.

It prints the medians and PASS or MISS against the target (100 ms); exit 0
whatever the timings, or 1 on a MISS with --fail-on-miss.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

from common import median

#: didChange -> publishDiagnostics, minus the debounce, median (seconds)
TARGET = 0.100


def big_spec(lines: int) -> str:
    """A spec of about ``lines`` lines: params, and roles with templates, macros, resources and ports."""
    out = ["name: big-{{ nnodes }}", "params:", "  nnodes: {type: integer, default: 2, min: 1, help: number of nodes}",
           "  lr: {type: number, default: 0.1, help: learning rate}", "roles:"]
    i = 0
    while len(out) < lines - 19:
        out += [f"  - name: worker{i}", "    image: ghcr.io/acme/trainer:1.4", "    entrypoint: bash",
                '    num_replicas: "{{ nnodes }}"', "    args:", "      - -c",
                f'      - "python train.py --lr={{{{ lr }}}} --id={i} --app ${{app_id}}"', "      - --flag",
                "    env:", "      LOGLEVEL: INFO", f'      WORKER: "w{i}"', "    resource:", "      cpu: 4",
                "      gpu: 0", "      memMB: 4096", "    port_map:", f"      p{i}: {1000 + i % 60000}",
                "    max_retries: 1", "    retry_policy: APPLICATION"]
        i += 1
    return "\n".join(out) + "\n"


class Round:
    """One edit: the server's wall-clock latency and CPU time, and the library's own lint of the text."""

    def __init__(self, latency: float, server_cpu: float, floor: float, floor_cpu: float) -> None:
        self.latency, self.server_cpu, self.floor, self.floor_cpu = latency, server_cpu, floor, floor_cpu


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of process ``pid`` so far (Linux schedstat, nanoseconds; 0 elsewhere)."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except OSError:
        return 0.0
    return total / 1e9


async def measure(text: str, path: Path, repeat: int, debounce_ms: int) -> list[Round]:
    """Per round: the server's latency for one edit, then the library's own lint of the edited text."""
    from lsprotocol import types as T
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("torchspec-bench", "1")
    arrived: dict[int, float] = {}
    published = asyncio.Event()

    @client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: T.PublishDiagnosticsParams) -> None:
        arrived[params.version or 0] = time.perf_counter()
        published.set()

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    await client.start_io(sys.executable, "-m", "torchspec", "lsp", cwd=str(path.parent), env=env)
    await client.initialize_async(T.InitializeParams(capabilities=T.ClientCapabilities(), root_uri=path.parent.as_uri(),
                                                     initialization_options={"debounce_ms": debounce_ms}))
    client.initialized(T.InitializedParams())
    uri = path.as_uri()
    client.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(uri, "yaml", 1, text)))
    await asyncio.wait_for(published.wait(), 60)
    lines = text.split("\n")
    target = next(n for n in range(len(lines) // 2, len(lines)) if lines[n].startswith("    retry_policy:"))
    values = ["REPLICA", "APPLICATON", "APPLICATION"]  # a change, a typo lint reports (TS204), the fix
    rounds = []
    pid = client._server.pid  # the server process pygls started
    for version in range(2, repeat + 3):  # the first edit warms caches and is not counted
        line = lines[target]
        new = f"    retry_policy: {values[version % 3]}"
        change = T.TextDocumentContentChangePartial(
            range=T.Range(start=T.Position(target, 0), end=T.Position(target, len(line))), text=new)
        lines[target] = new
        cpu = cpu_seconds(pid)
        sent = time.perf_counter()
        client.text_document_did_change(T.DidChangeTextDocumentParams(
            T.VersionedTextDocumentIdentifier(version=version, uri=uri), [change]))
        while version not in arrived:
            published.clear()
            await asyncio.wait_for(published.wait(), 60)
        server_cpu = cpu_seconds(pid) - cpu
        floor, floor_cpu = lint_seconds("\n".join(lines), path)  # interleaved: drift in speed hits both
        if version > 2:
            rounds.append(Round(arrived[version] - sent - debounce_ms / 1000, server_cpu, floor, floor_cpu))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return rounds


def lint_seconds(text: str, path: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``lint_text`` here."""
    from torchspec.lint import lint_text

    start, cpu = time.perf_counter(), time.process_time()
    lint_text(text, str(path))
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=5000, help="lines of the spec (default 5000)")
    ap.add_argument("--repeat", type=int, default=31, help="timed edits; the median is reported (default 31)")
    ap.add_argument("--debounce-ms", type=int, default=150, help="the server's debounce, subtracted (default 150)")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when the target is missed")
    args = ap.parse_args()
    try:
        import pygls  # noqa: F401
    except ImportError:
        print("the language server needs pygls: pip install -e '.[lsp]'", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="torchspec-bench-lsp-") as work:
        path = Path(work) / "big.yaml"
        text = big_spec(args.lines)
        path.write_text(text)
        gc.freeze()  # the server's collector settings (torchspec.lsp.server.serve), for a floor that compares
        gc.set_threshold(50_000, 20, 20)
        rounds = asyncio.run(measure(text, path, args.repeat, args.debounce_ms))
    latencies = [r.latency for r in rounds]
    value = median(latencies)
    print(f"{text.count(chr(10))}-line spec, {args.repeat} edits, debounce {args.debounce_ms} ms subtracted (medians; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    server_cpu = median([r.server_cpu for r in rounds])
    print(f"  didChange -> publishDiagnostics  {value * 1000:8.1f} ms  (min {min(latencies) * 1000:.1f}, "
          f"max {max(latencies) * 1000:.1f}); the server's CPU time {server_cpu * 1000:.1f} ms")
    print(f"  lint_text in-process (floor)     {median([r.floor for r in rounds]) * 1000:8.1f} ms  "
          f"(CPU time {median([r.floor_cpu for r in rounds]) * 1000:.1f} ms)")
    ok = value <= TARGET
    print(f"\n{'what':<32} {'value':>8} {'target':>8}  verdict")
    print(f"{'re-lint after a change (ms)':<32} {value * 1000:8.1f} {'<= ' + str(int(TARGET * 1000)):>8}  "
          f"{'PASS' if ok else 'MISS'}")
    return 1 if not ok and args.fail_on_miss else 0


if __name__ == "__main__":
    sys.exit(main())
