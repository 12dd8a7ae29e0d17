"""A pass over a target with a ``prediction``, through the reconciler and its ports, and the
forecast history read at start: the model is usable on the first pass and, when acting,
scales up ahead of the load that reactive scaling would wait for.

The ports are the in-memory doubles of ``test_observe_budget``; the history port plays a
Prometheus that holds three seasons of a queue whose depth rises every ten minutes."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from autoscaler.algorithm import ExternalMetricValues, Milli
from autoscaler.config import ScaleTargetRef, TargetConfig, parse_config
from autoscaler.errors import TransientError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.backfill import HistoryBackfill
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from tests.runtime.test_observe_budget import FixedScale, NoPods, Quiet

SEASON, STEP = 600.0, 60.0
START = math.floor(time.time() / SEASON) * SEASON + 90  # a minute and a half into a season
LOW, HIGH = 60.0, 200.0
"""The queue's depth: LOW, and HIGH from the third to the seventh minute of each season."""


def depth_at(at: float) -> float:
    return HIGH if 2 <= (at % SEASON) // STEP <= 6 else LOW


def target(forecast_only: bool) -> TargetConfig:
    return parse_config(f"""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "worker" }}
maxReplicas = 30

[[autoscaler.metrics]]
type = "External"
external = {{ metric = {{ name = "depth" }}, target = {{ type = "AverageValue", averageValue = "10" }}, query = "sum(depth)" }}
prediction = {{ model = "seasonalNaive", season = "10m", step = "1m", horizon = "2m", forecastOnly = {str(forecast_only).lower()} }}
""").targets[0]


@dataclass
class Cluster:
    replicas: int = 6
    writes: list[int] = field(default_factory=list)

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> FixedScale:
        return FixedScale(spec_replicas=self.replicas, status_replicas=self.replicas)

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> FixedScale:
        return self.cached_scale(namespace, ref)

    async def update_scale(self, namespace: str, ref: ScaleTargetRef, replicas: int,
                           resource_version: str) -> FixedScale:
        self.replicas = replicas
        self.writes.append(replicas)
        return self.cached_scale(namespace, ref)


class LiveDepth:
    """The queue as the pass reads it: LOW now (the rise has not come yet)."""

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        return FetchedMetrics(values={w.target.key: (ExternalMetricValues(
            values=(Milli(round(LOW * 1000)),)),) for w in wanted}, pods={})


@dataclass
class PastDepth:
    """The history port: ``depth_at`` every step of the range asked; ``failures`` first."""

    failures: int = 0
    asked: list[tuple[str, int, float, float, float]] = field(default_factory=list)

    async def metric_history(self, target: TargetConfig, index: int, *, start: float,
                             end: float, step: float) -> Sequence[tuple[float, float]]:
        self.asked.append((target.key, index, start, end, step))
        await asyncio.sleep(0)
        if self.failures:
            self.failures -= 1
            raise TransientError("cannot connect to http://127.0.0.1:9")
        return [(at, depth_at(at)) for at in range(int(start), int(end) + 1, int(step))]


def rig(cluster: Cluster, history: PastDepth) -> tuple[Reconciler, HistoryBackfill]:
    reconciler = Reconciler(
        scales=cluster, pods=NoPods(), metrics=LiveDepth(), events=Quiet(), owners=Quiet(),
        options=ReconcileOptions(), telemetry=DaemonMetrics(), clock=lambda: START)
    return reconciler, HistoryBackfill(history, reconciler.state, clock=lambda: START)


async def first_pass(forecast_only: bool, *, backfill: bool = True) -> tuple[
        Cluster, Reconciler]:
    cluster, web = Cluster(), target(forecast_only)
    reconciler, filler = rig(cluster, PastDepth())
    if backfill:
        filler.want([web])
        await filler.settle()
    await reconciler.run_pass([web], deadline=time.monotonic() + 5)
    return cluster, reconciler


async def test_acting_on_the_forecast_scales_up_before_the_rise() -> None:
    """With history read at start, the first pass forecasts the rise two minutes ahead and
    scales for it (6 live, 20 forecast; at most double in one step), where reactive holds."""
    cluster, reconciler = await first_pass(forecast_only=False)
    report = reconciler.states[target(False).key].last_decision
    assert report is not None
    assert report.forecast is not None
    assert report.forecast.metrics[0] is not None
    assert report.forecast.metrics[0].used
    assert report.forecast.reactive_replicas == 6
    assert report.forecast.predictive_replicas == 12
    assert cluster.writes == [12]


async def test_forecast_only_shows_the_forecast_and_leaves_the_count() -> None:
    """forecastOnly: the same forecast is in /status, with what it would have done; no write."""
    cluster, reconciler = await first_pass(forecast_only=True)
    shown = reconciler.states[target(True).key].to_json()["forecast"]
    assert cluster.writes == []
    assert shown["acting"] is False
    assert shown["reactiveReplicas"] == 6
    assert shown["predictiveReplicas"] == 12
    assert shown["metrics"][0]["used"] is True


async def test_without_history_the_first_pass_is_reactive() -> None:
    """The same start without the history read: the model is still learning, nothing moves."""
    cluster, reconciler = await first_pass(forecast_only=False, backfill=False)
    report = reconciler.states[target(False).key].last_decision
    assert report is not None
    assert report.forecast is not None
    assert report.forecast.metrics[0] is not None
    assert not report.forecast.metrics[0].used
    assert cluster.writes == []


@pytest.mark.parametrize("forecast_only", [False, True], ids=["acting", "forecast-only"])
async def test_the_forecast_series_is_kept_for_the_store(forecast_only: bool) -> None:
    """What was read from Prometheus is in the target's series, saved with its history."""
    _, reconciler = await first_pass(forecast_only)
    (series,) = reconciler.states[target(forecast_only).key].forecasts.values()
    assert sum(v is not None for v in series.values) == 30  # three seasons of one-minute steps
