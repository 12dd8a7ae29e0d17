"""The daemon's own Prometheus metrics, on a registry of its own (no process-global state).

Per target: current and desired replicas, each metric's value and target, last reconcile time
and outcome, scale events and drift. Per daemon: reconcile, pass and query durations, errors
by reason, leadership. Label sets of a removed target are dropped (``forget``) so a reload
does not leave stale series behind.
"""

from __future__ import annotations

import contextlib
from typing import Any, Self

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_NS = "autoscaler"
_FAST_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class _FastLabels:
    """``labels()`` that finds an existing child with one dict lookup.

    prometheus_client validates the names and takes a lock on every call, ~10 us; a pass
    calls it about ten times per target. Its own child dict is read, so ``remove`` stays the
    one place a series is dropped (a GIL-safe read; a miss falls back to the library)."""

    _labelnames: tuple[str, ...]

    def labels(self, *values: Any, **named: Any) -> Self:
        children = getattr(self, "_metrics", None)
        if isinstance(children, dict):
            key = tuple(str(v) for v in values) if values else tuple(
                str(named[name]) for name in self._labelnames if name in named)
            child = children.get(key)
            if child is not None:
                return child  # type: ignore[no-any-return]
        return super().labels(*values, **named)  # type: ignore[misc,no-any-return]


class _Gauge(_FastLabels, Gauge):
    pass


class _Counter(_FastLabels, Counter):
    pass


class DaemonMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.current_replicas = _Gauge(
            f"{_NS}_current_replicas", "Replicas of the target's /scale at the last pass.",
            ["target"], registry=r)
        self.desired_replicas = _Gauge(
            f"{_NS}_desired_replicas", "Replicas the last pass decided on.", ["target"],
            registry=r)
        self.metric_value = _Gauge(
            f"{_NS}_metric_value", "A metric's current value (utilization in percent, values "
            "in base units).", ["target", "metric"], registry=r)
        self.metric_target = _Gauge(
            f"{_NS}_metric_target", "A metric's target (same units as autoscaler_metric_value).",
            ["target", "metric"], registry=r)
        self.metric_valid = _Gauge(
            f"{_NS}_metric_valid", "1 if the metric could be computed at the last pass.",
            ["target", "metric"], registry=r)
        self.last_reconcile = _Gauge(
            f"{_NS}_last_reconcile_timestamp_seconds", "When the target was last reconciled.",
            ["target"], registry=r)
        self.reconciles = _Counter(
            f"{_NS}_reconciles_total", "Passes over a target by outcome.",
            ["target", "outcome"], registry=r)
        self.scale_events = _Counter(
            f"{_NS}_scale_events_total", "Scale writes by direction (or would-be, in dry-run).",
            ["target", "direction"], registry=r)
        self.drift = _Counter(
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
        self.errors = _Counter(
            f"{_NS}_errors_total", "Errors by reason.", ["reason"], registry=r)
        self.leader = Gauge(
            f"{_NS}_leader", "1 while this instance holds the lease (or runs unelected).",
            registry=r)
        self.targets = Gauge(f"{_NS}_targets", "Targets in the loaded config.", registry=r)
        self.config_reloads = _Counter(
            f"{_NS}_config_reloads_total", "Config reloads by result.", ["result"], registry=r)

    _PER_TARGET = ("current_replicas", "desired_replicas", "last_reconcile")

    def forget(self, target: str, metrics: tuple[str, ...] = ()) -> None:
        """Drop every series of a target that left the config."""
        for name in self._PER_TARGET:
            _remove(getattr(self, name), target)
        for metric in metrics:
            for gauge in (self.metric_value, self.metric_target, self.metric_valid):
                _remove(gauge, target, metric)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _remove(collector: Gauge | Counter, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        collector.remove(*labels)
