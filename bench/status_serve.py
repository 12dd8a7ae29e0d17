"""What a GET /status costs the daemon at N targets: its event loop and its memory.

Serves /status through the daemon's own handler (``observability.http``) over loopback,
with N targets whose states hold one pass's real decisions (``status_retention.one_pass``: 5
pods, 2 per-pod metrics each) rendered by ``runtime.status.target_status``, as
``App._status`` gives them. A client thread reads the whole answer, compact (a program's
User-Agent) and pretty (curl's). Printed per variant: the answer's size, the time to serve
it, the longest the event loop went without running another task (a ticker every 5 ms; a
Lease renewal or a pass waits that long), and the most memory the request held at once
(tracemalloc, a run of its own).

Where ``autoscaler.observability.status_json`` is missing (code before it), the document is
built whole, as it was then; so the same file measures the code before::

    .venv/bin/python bench/status_serve.py [--targets 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
import tracemalloc
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.observability.http import Probes, bound_port, build_app, serve  # noqa: E402
from autoscaler.observability.metrics import DaemonMetrics  # noqa: E402
from autoscaler.runtime.conditions import merge_conditions  # noqa: E402
from autoscaler.runtime.status import TargetState, target_status  # noqa: E402
from bench.status_retention import NOW, SPEC, one_pass  # noqa: E402

try:
    from autoscaler.observability.status_json import Entries
except ImportError:  # the code before: the document built whole
    Entries = None  # type: ignore[assignment,misc]

AGENTS = {"compact": "Python-urllib/3", "pretty": "curl/8.5.0"}


def states(count: int) -> dict[str, TargetState]:
    found = {}
    for n, decision in enumerate(one_pass(count)):
        key = f"ns-{n % 50}/Deployment/web-{n}"
        state = found[key] = TargetState(key=key, last_reconcile=NOW, last_outcome="ok")
        state.decided(decision, decision.desired_replicas)  # as a pass keeps it
        state.conditions = merge_conditions([], decision.conditions, NOW)
        state.settle("1d259fd0a8bb")
    return found


def document(kept: dict[str, TargetState]) -> dict[str, Any]:
    config = SimpleNamespace(generation="1d259fd0a8bb", spec=SPEC)

    def one(key: str) -> dict[str, Any]:
        return target_status(kept[key], config, planned=False)  # type: ignore[arg-type]

    targets: Any = (Entries(list(kept), one) if Entries is not None
                    else {key: one(key) for key in kept})
    return {"identity": "bench", "leader": True, "dryRun": False, "targets": targets,
            "ring": None}


def fetch(url: str, agent: str) -> tuple[int, float]:
    started = time.perf_counter()
    request = urllib.request.Request(url, headers={"User-Agent": agent})
    size = 0
    with urllib.request.urlopen(request, timeout=120) as answer:
        while chunk := answer.read(64 * 1024):  # read and dropped: the client is not measured
            size += len(chunk)
    return size, time.perf_counter() - started


async def measure(url: str, agent: str, *, traced: bool) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    stalls = [0.0]
    done = threading.Event()

    async def ticker() -> None:
        while not done.is_set():
            before = loop.time()
            await asyncio.sleep(0.005)
            stalls[0] = max(stalls[0], loop.time() - before - 0.005)

    if traced:
        tracemalloc.start()
    tick = loop.create_task(ticker())
    try:
        size, seconds = await asyncio.to_thread(fetch, url, agent)
    finally:
        done.set()
        await tick
    peak = 0.0
    if traced:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return {"mb": size / 2**20, "seconds": seconds, "stall": stalls[0], "peak_mb": peak}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=10_000)
    args = parser.parse_args()
    kept = states(args.targets)
    probes = Probes()
    probes.status = lambda: document(kept)
    runner = await serve(build_app(probes, DaemonMetrics()), "127.0.0.1:0")
    url = f"http://127.0.0.1:{bound_port(runner)}/status"
    code = "streamed" if Entries is not None else "built whole"
    try:
        for name, agent in AGENTS.items():
            timed = await measure(url, agent, traced=False)
            traced = await measure(url, agent, traced=True)
            print(f"{args.targets} targets, {code}, {name} ({agent}): {timed['mb']:.1f} MB "
                  f"in {timed['seconds']:.2f} s; longest loop stall {timed['stall'] * 1000:.0f} "
                  f"ms; peak {traced['peak_mb']:.1f} MB held by the request", flush=True)
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
