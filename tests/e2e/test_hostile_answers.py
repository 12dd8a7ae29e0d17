"""The daemon's memory under a Prometheus that answers only hostile things, end to end: the
real daemon, the simulated API server, a scripted Prometheus (``hostile_answers.py``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.e2e.harness import daemon, eventually
from tests.e2e.hostile_answers import (
    ScriptedPrometheus,
    hostile_stream,
    targets_config,
)
from tests.procfs import memory_kib
from tests.sim.kube import PodTiming, run_apiserver

NAMES = ["web", "api", "jobs"]
BUDGET_MIB = 100
"""What hostile answers may add to the daemon's RSS at rest (issue 40's goal)."""


async def test_hostile_answers_keep_the_daemon_within_100_mb_of_its_rss_at_rest(
    tmp_path: Path,
) -> None:
    """Three targets, 15 s of answers of every hostile kind (45-200 MB cut at
    maxResponseBytes, lying lengths, gzip bombs, garbage, near maxSeries, drips) after a
    rest with good ones: the peak RSS stays within 100 MB of the rest's, nothing is scaled,
    and good answers are used again at once. (Before issue 40: ~16 MB more a pass.)"""
    timing = PodTiming(start_delay=0.2, ready_delay=0.3, termination_delay=0.2)
    async with run_apiserver(timing=timing) as api:
        for name in NAMES:
            api.create_deployment("default", name, replicas=2, labels={"app": name})
        with ScriptedPrometheus(per_pod=100) as prometheus:  # at its target: hold at 2
            text = targets_config(prometheus_url=prometheus.url, kubeconfig=api.kubeconfig,
                                  state_file=str(tmp_path / "state"), names=NAMES)
            with daemon(text, tmp_path) as proc:
                assert proc.process is not None
                pid = proc.process.pid
                await eventually(lambda: all(
                    proc.target(f"default/Deployment/{name}").get("lastOutcome") == "ok"
                    for name in NAMES), timeout=30, what="a good pass over every target")
                await asyncio.sleep(3)  # a few passes at rest
                rest = memory_kib(pid)
                prometheus.hostile = hostile_stream(seed=40)
                peak = rest
                until = time.monotonic() + 15
                while time.monotonic() < until:
                    await asyncio.sleep(0.25)
                    peak = max(peak, memory_kib(pid))
                peak = max(peak, memory_kib(pid, "VmHWM"))
                hostile_answers = prometheus.answered.get("hostile", 0)
                prometheus.hostile = None
                await eventually(lambda: all(
                    proc.target(f"default/Deployment/{name}").get("lastOutcome") == "ok"
                    for name in NAMES), timeout=15, what="good answers used again")
    print(f"RSS at rest {rest / 1024:.0f} MiB, peak under {hostile_answers} hostile answers "
          f"{peak / 1024:.0f} MiB")
    assert hostile_answers >= 20
    assert (peak - rest) / 1024 < BUDGET_MIB, (
        f"RSS {rest / 1024:.0f} -> {peak / 1024:.0f} MiB under hostile answers")
    for name in NAMES:
        assert api.get("apps/v1", "Deployment", "default", name)["spec"]["replicas"] == 2
