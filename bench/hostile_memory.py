"""The daemon's RSS while Prometheus answers only hostile things, over minutes (issue 40).

    .venv/bin/python bench/hostile_memory.py [--targets 3] [--rest 30] [--minutes 10]

Runs the real daemon (``python -m autoscaler run``, sync period 1 s) against the simulated
API server and a scripted Prometheus (``tests/e2e/hostile_answers.py``): good answers for
``--rest`` seconds (the RSS at rest), then for ``--minutes`` every query answered by a random
draw of the hostile corpus (45-200 MB chunked answers cut at maxResponseBytes, 45-200 MB
announced by Content-Length, a 200 MB gzip bomb, 16 MB of garbage, 99,000 series of other
pods, a body dripping past the timeout). Prints the RSS every 30 s (the highest sample of
each interval, sampled 4 times a second), then the rest, the peak (VmHWM included) and the
peak over the rest. The goal: within 100 MB. ``tests/e2e/test_hostile_answers.py`` is the
same run in 15 s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.harness import daemon, eventually
from tests.e2e.hostile_answers import (
    ScriptedPrometheus,
    hostile_stream,
    targets_config,
)
from tests.procfs import memory_kib
from tests.sim.kube import PodTiming, run_apiserver

NAMES = ["web", "api", "jobs", "mail", "search", "auth", "cart", "feed"]


async def measure(targets: int, rest_seconds: float, minutes: float, workdir: Path) -> int:
    names = NAMES[:targets]
    timing = PodTiming(start_delay=0.2, ready_delay=0.3, termination_delay=0.2)
    async with run_apiserver(timing=timing) as api:
        for name in names:
            api.create_deployment("default", name, replicas=2, labels={"app": name})
        with ScriptedPrometheus(per_pod=100) as prometheus:
            text = targets_config(prometheus_url=prometheus.url, kubeconfig=api.kubeconfig,
                                  state_file=str(workdir / "state"), names=names)
            with daemon(text, workdir) as proc:
                assert proc.process is not None
                pid = proc.process.pid
                await eventually(lambda: all(
                    proc.target(f"default/Deployment/{name}").get("lastOutcome") == "ok"
                    for name in names), timeout=60, what="a good pass over every target")
                await asyncio.sleep(rest_seconds)
                rest = memory_kib(pid)
                print(f"{targets} targets; RSS at rest {rest / 1024:.0f} MiB; hostile answers "
                      f"for {minutes:g} min", flush=True)
                print(f"{'seconds':>7} {'RSS max':>8} {'over rest':>9} {'answers':>7}")
                prometheus.hostile = hostile_stream(seed=40)
                started = time.monotonic()
                peak = interval_peak = rest
                mark = started + 30
                while (now := time.monotonic()) < started + minutes * 60:
                    await asyncio.sleep(0.25)
                    interval_peak = max(interval_peak, memory_kib(pid))
                    if time.monotonic() >= mark:
                        print(f"{now - started:7.0f} {interval_peak / 1024:7.0f}M "
                              f"{(interval_peak - rest) / 1024:8.0f}M "
                              f"{prometheus.answered.get('hostile', 0):7d}", flush=True)
                        peak, interval_peak, mark = max(peak, interval_peak), rest, mark + 30
                peak = max(peak, interval_peak, memory_kib(pid, "VmHWM"))
                alive = proc.process.poll() is None
    print(f"rest {rest / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB (VmHWM included), "
          f"over rest {(peak - rest) / 1024:.0f} MiB; daemon alive: {alive}")
    return 0 if alive and peak - rest < 100 * 1024 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=3, choices=range(1, len(NAMES) + 1))
    parser.add_argument("--rest", type=float, default=30.0, help="seconds of good answers")
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of hostile ones")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostile-memory-") as workdir:
        return asyncio.run(measure(args.targets, args.rest, args.minutes, Path(workdir)))


if __name__ == "__main__":
    sys.exit(main())
