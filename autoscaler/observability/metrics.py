"""The daemon's own Prometheus metrics, on a registry of its own (no process-global state).

Per target: current and desired replicas, each metric's value and target, last reconcile time
and outcome, scale events and drift. Per daemon: reconcile, pass and query durations, errors
by reason, leadership. Label sets of a removed target are dropped (``forget``) so a reload
does not leave stale series behind. The per-pass numbers of each target are plain values in
``per_target``, rendered at scrape time by a custom collector.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from autoscaler.algorithm.forecast import ForecastReport
from autoscaler.observability.forecast_metrics import ForecastCollector
from autoscaler.record import record

_NS = "autoscaler"
SCALE_DIRECTIONS = ("up", "down")
"""The ``direction`` label of ``autoscaler_scale_events_total``."""
_FAST_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


@record(kw_only=False)
class MetricReading:
    """One metric of a target at its last pass, in the units users read."""

    name: str
    valid: bool
    target: float | None
    value: float | None


@dataclass(slots=True)
class TargetSeries:
    """What ``/metrics`` shows of one target, as plain numbers rendered at scrape time.

    Not prometheus_client children: ten per target at ~600 bytes each (a lock, a value
    object, a label tuple) were 60 MB at 10,000 targets, and setting them cost ~25 us per
    target per pass (bench/daemon_scale.py)."""

    current: int | None = None
    desired: int | None = None
    last_reconcile: float | None = None
    metrics: tuple[MetricReading, ...] = ()
    reconciles: dict[str, int] = field(default_factory=dict)
    shadow: tuple[int, int | None] | None = None
    """Shadow mode: (our desired count, the owning HPA's), at the last pass."""
    forecast: ForecastReport | None = None
    """Predictive scaling's last report (``observability/forecast_metrics.py``)."""
    forecast_metrics: tuple[str, ...] = ()
    """The names of the target's metrics, aligned with ``forecast.metrics``."""


class _PerTargetCollector(Collector):
    def __init__(self, series: dict[str, TargetSeries]) -> None:
        self._series = series

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        current, desired, value, target, valid, last, reconciles = self._families()
        shadow = GaugeMetricFamily(
            f"{_NS}_shadow_agreement", "Shadow mode: 1 if our desired count equals the owning "
            "HPA's at the last pass, 0 if not (absent while no HPA reports one).",
            labels=["target"])
        for key, s in self._series.items():
            if s.shadow is not None and s.shadow[1] is not None:
                shadow.add_metric([key], 1.0 if s.shadow[0] == s.shadow[1] else 0.0)
            if s.current is not None:
                current.add_metric([key], s.current)
            if s.desired is not None:
                desired.add_metric([key], s.desired)
            if s.last_reconcile is not None:
                last.add_metric([key], s.last_reconcile)
            for reading in s.metrics:
                valid.add_metric([key, reading.name], 1.0 if reading.valid else 0.0)
                if reading.target is not None:
                    target.add_metric([key, reading.name], reading.target)
                if reading.value is not None:
                    value.add_metric([key, reading.name], reading.value)
            for outcome, count in s.reconciles.items():
                reconciles.add_metric([key, outcome], count)
        yield from (current, desired, value, target, valid, last, reconciles, shadow)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily,
                             GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily,
                             CounterMetricFamily]:
        t, tm = ["target"], ["target", "metric"]
        return (
            GaugeMetricFamily(f"{_NS}_current_replicas",
                              "Replicas of the target's /scale at the last pass.", labels=t),
            GaugeMetricFamily(f"{_NS}_desired_replicas",
                              "Replicas the last pass decided on.", labels=t),
            GaugeMetricFamily(f"{_NS}_metric_value",
                              "A metric's current value (utilization in percent, values in "
                              "base units).", labels=tm),
            GaugeMetricFamily(f"{_NS}_metric_target",
                              "A metric's target (same units as autoscaler_metric_value).",
                              labels=tm),
            GaugeMetricFamily(f"{_NS}_metric_valid",
                              "1 if the metric could be computed at the last pass.", labels=tm),
            GaugeMetricFamily(f"{_NS}_last_reconcile_timestamp_seconds",
                              "When the target was last reconciled.", labels=t),
            CounterMetricFamily(f"{_NS}_reconciles", "Passes over a target by outcome.",
                                labels=["target", "outcome"]),
        )


class DaemonMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.per_target: dict[str, TargetSeries] = {}
        r.register(_PerTargetCollector(self.per_target))
        r.register(ForecastCollector(self.per_target))
        self.scale_events = Counter(
            f"{_NS}_scale_events_total", "Scale writes by direction (or would-be, in dry-run).",
            ["target", "direction"], registry=r)
        self.drift = Counter(
            f"{_NS}_drift_total", "Replica changes made by someone else between passes.",
            ["target"], registry=r)
        self.reconcile_duration = Histogram(
            f"{_NS}_reconcile_duration_seconds", "Time to reconcile one target.",
            buckets=_FAST_BUCKETS, registry=r)
        self.pass_duration = Histogram(
            f"{_NS}_pass_duration_seconds", "Time of one pass over every due target.",
            buckets=_FAST_BUCKETS, registry=r)
        self.query_duration = Histogram(
            f"{_NS}_metrics_fetch_duration_seconds", "Time to fetch one pass's metrics.",
            buckets=_FAST_BUCKETS, registry=r)
        self.queries = Counter(
            f"{_NS}_prometheus_queries_total", "PromQL queries issued.", registry=r)
        self.errors = Counter(
            f"{_NS}_errors_total", "Errors by reason.", ["reason"], registry=r)
        self.leader = Gauge(
            f"{_NS}_leader", "1 while this instance holds the lease (or runs unelected).",
            registry=r)
        self.targets = Gauge(f"{_NS}_targets", "Targets in the loaded config.", registry=r)
        self.config_reloads = Counter(
            f"{_NS}_config_reloads_total", "Config reloads by result.", ["result"], registry=r)

    def target(self, key: str) -> TargetSeries:
        """The target's series (created on first use)."""
        series = self.per_target.get(key)
        if series is None:
            series = self.per_target[key] = TargetSeries()
        return series

    def forget(self, target: str) -> None:
        """Drop every series of a target that left the config."""
        self.per_target.pop(target, None)
        for direction in SCALE_DIRECTIONS:
            _remove(self.scale_events, target, direction)
        _remove(self.drift, target)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _remove(collector: Gauge | Counter, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        collector.remove(*labels)
