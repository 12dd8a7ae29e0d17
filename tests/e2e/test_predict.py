"""Predictive scaling end to end: the real daemon, a real Prometheus holding three seasons
of the web pods' load (written with promtool: pods of an earlier rollout), the simulated API
server. Each season the load rises from 150 to 800 req/s for five minutes; the test starts
just before a rise, with the live load at 150 (2 pods at 100 per pod).

- forecastOnly: the history is read at start, so the model is usable on the daemon's first
  pass; /status shows the forecast and what it would do (8 pods), and the count stays at 2.
- acting: the daemon scales up ahead of the rise, while the live load, all that reactive
  scaling sees, still asks for 2."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Rig
from tests.e2e.harness import LoadModel, daemon, daemon_config, eventually
from tests.sim.kube import PodTiming, run_apiserver
from tests.sim.prometheus import MetricsExporter, backfill, start_prometheus

SEASON, STEP = 600, 10
LOW, HIGH = 150.0, 800.0
OLD_PODS = ("web-7c9d8b6f5-q2xkz", "web-7c9d8b6f5-m4tnp")
"""The load's history is on the pods of an earlier rollout: only the widened selector
(every pod of the Deployment, by name) finds it."""
PREDICTION = ('prediction = {{ model = "seasonalNaive", season = "10m", step = "10s", '
              'horizon = "60s", maxErrorPercent = 50, forecastOnly = {} }}')


def rising_soon(now: float) -> float:
    """Where in the season the rise starts: 20 s from now (so it is within the horizon at
    the daemon's first pass, and the five minutes of it outlast the test)."""
    return (now + 20) % SEASON


def history_text(now: float) -> str:
    """Three seasons and a bit, a point every step, ending just before ``now``."""
    rise = rising_soon(now)
    lines = ["# TYPE app_load gauge"]
    first = (math.floor(now / STEP) - 3 * SEASON // STEP - 6) * STEP
    for at in range(first, math.floor(now) - 1, STEP):
        high = (at - rise) % SEASON < 300
        each = (HIGH if high else LOW) / len(OLD_PODS)
        lines += [f'app_load{{namespace="default",pod="{pod}"}} {each} {at}' for pod in OLD_PODS]
    return "\n".join(lines)


@pytest.fixture
def history_rig_prometheus(tmp_path: Path) -> Iterator[tuple[MetricsExporter, Any, float]]:
    now = time.time()
    data = tmp_path / "tsdb"
    backfill(data, history_text(now))
    with MetricsExporter() as exporter, start_prometheus(
            scrape_targets=[exporter.target], scrape_interval=1.0, data_dir=data) as prometheus:
        yield exporter, prometheus, now


@pytest.fixture
async def rig(history_rig_prometheus: tuple[MetricsExporter, Any, float]) -> AsyncIterator[Rig]:
    exporter, prometheus, _ = history_rig_prometheus
    timing = PodTiming(start_delay=0.2, ready_delay=0.3, termination_delay=0.2)
    stack = contextlib.AsyncExitStack()
    api = await stack.enter_async_context(run_apiserver(timing=timing))
    api.create_deployment("default", "web", replicas=2, labels={"app": "web"},
                          requests={"cpu": "500m"})
    load = LoadModel(api=api, exporter=exporter, demand=LOW)
    task = asyncio.create_task(load.run())
    try:
        yield Rig(api=api, load=load, prometheus=prometheus)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        try:
            await asyncio.wait_for(stack.aclose(), timeout=15)
        except TimeoutError:
            warnings.warn("the simulated API server took over 15 s to stop", stacklevel=1)


def config(rig: Rig, tmp_path: Path, *, forecast_only: bool) -> str:
    text = daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port=0, state_file=tmp_path / "state", downscale="300s")
    return text.replace('listenAddress = "127.0.0.1:0"', 'listenAddress = "127.0.0.1:__PORT__"') \
        + PREDICTION.format(str(forecast_only).lower()) + "\n"


async def live_load_scraped(rig: Rig) -> None:
    """Prometheus has the live load of every Ready pod: the first pass has a valid metric."""
    def scraped() -> bool:
        pods = rig.load.ready_pods()
        found = rig.prometheus.query(
            f'app_load{{pod=~"{"|".join(pods)}"}}') if pods else []
        return len(pods) == 2 and len(found) == 2
    await eventually(scraped, timeout=20, what="the live load scraped")


def replicas(rig: Rig) -> int:
    obj = rig.api.get("apps/v1", "Deployment", "default", "web")
    assert obj is not None
    return int(obj["spec"]["replicas"])


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions", []) if c["type"] == kind)


@pytest.mark.timeout(120)
async def test_forecast_only_is_usable_on_the_first_pass_and_changes_nothing(
        rig: Rig, tmp_path: Path) -> None:
    """The history read at start makes the model usable on the first pass (its condition
    has been True since the pass that made ScalingActive True); /status shows the forecast
    of the rise and the 8 pods it would want (4 in this step); the count stays at 2."""
    await live_load_scraped(rig)
    with daemon(config(rig, tmp_path, forecast_only=True), tmp_path) as process:
        await eventually(lambda: "forecast" in process.target(), timeout=40,
                         what="a decision with a forecast")
        await asyncio.sleep(3)
        status = process.target()
        shown = status["forecast"]
        predictive = condition(status, "PredictiveScaling")
        assert shown["acting"] is False
        assert shown["metrics"][0]["used"] is True
        assert shown["metrics"][0]["forecast"] == pytest.approx(HIGH)
        assert shown["reactiveReplicas"] == 2
        assert shown["metrics"][0]["proposal"] == 8
        assert shown["predictiveReplicas"] == 4  # the first step's limit: double, at least 4
        assert predictive["status"] == "True"
        assert predictive["lastTransitionTime"] == condition(
            status, "ScalingActive")["lastTransitionTime"]
        assert replicas(rig) == 2
        logs = [e for e in process.logs() if e.get("event") == "forecast history read from "
                "Prometheus"]
        assert logs[0]["buckets"] >= 3 * SEASON // STEP - 2


@pytest.mark.timeout(120)
async def test_acting_scales_up_before_the_load_rises(rig: Rig, tmp_path: Path) -> None:
    """Acting on the forecast, the daemon scales up ahead of the rise (2 -> 4 -> 8 within
    the step limits) while the live load, all reactive scaling sees, still asks for 2."""
    await live_load_scraped(rig)
    with daemon(config(rig, tmp_path, forecast_only=False), tmp_path) as process:
        await eventually(lambda: replicas(rig) >= 4, timeout=40, what="a scale-up")
        shown = process.target()["forecast"]
        assert rig.load.demand == LOW
        assert shown["acting"] is True
        assert shown["reactiveReplicas"] == 2
        assert shown["predictiveReplicas"] >= 4
        scaled = [e for e in process.logs() if e.get("event") == "scaled"]
        assert "(forecast 60s ahead)" in scaled[0]["reason"]


@pytest.mark.timeout(120)
async def test_plan_reads_the_history_and_shows_the_forecast(rig: Rig, tmp_path: Path) -> None:
    """``autoscaler plan`` reads the history as the daemon does at start: its one pass shows
    the model usable, the forecast of the rise and what acting on it would do."""
    await live_load_scraped(rig)
    path = tmp_path / "plan.toml"
    path.write_text(config(rig, tmp_path, forecast_only=True).replace("__PORT__", "9"))
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "autoscaler", "plan", "--config", str(path),
                         "-o", "json"],
        capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    (shown,) = json.loads(done.stdout)["targets"]
    assert shown["forecast"]["metrics"][0]["used"] is True
    assert shown["forecast"]["metrics"][0]["proposal"] == 8
    assert replicas(rig) == 2
