"""The daemon's own Prometheus metrics, on a registry of its own (no process-global state).

Per target (``per_target``, rendered at scrape time): replicas, bounds, conditions, each
metric's value and target, outcomes and scale events, labelled ``namespace``, ``kind``,
``name``. Per daemon: build, leadership, reloads, pass and query durations against their
period, Prometheus query errors by server and reason, API requests by verb and code, errors
by reason. Counters whose label values are known in advance start at 0, so the first
increment is visible to ``rate()`` and ``increase()``. A target that leaves the config, or
every target when this instance stops leading, has its series dropped (``forget``), so
dashboards never add up a standby's stale view.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from autoscaler.errors import (
    AccessDeniedError,
    AutoscalerError,
    BadQueryError,
    ThrottledError,
    TimedOutError,
    TransientError,
)
from autoscaler.observability.per_target import (
    SCALE_DIRECTIONS,
    MetricReading,
    TargetSeries,
    render,
    target_labels,
)

__all__ = ["SCALE_DIRECTIONS", "DaemonMetrics", "MetricReading", "TargetSeries"]

_NS = "autoscaler"
_FAST_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
ERROR_REASONS = ("observe_timeout", "metrics_fetch", "reconcile", "update_scale", "state_save",
                 "state_set_aside")
"""The ``reason`` label of ``autoscaler_errors_total``."""
RELOAD_RESULTS = ("applied", "restart_required", "rejected", "failed")
CLOCK_STEP_SOURCES = ("machine", "history")
"""The ``source`` label of ``autoscaler_clock_steps_total``."""
QUERY_ERROR_REASONS = ("timeout", "unavailable", "throttled", "access_denied", "bad_query",
                       "bad_data")
"""The ``reason`` label of ``autoscaler_prometheus_query_errors_total``, by error kind."""


def query_error_reason(error: AutoscalerError) -> str:
    """One of ``QUERY_ERROR_REASONS`` (subclasses before their bases)."""
    for kind, reason in ((TimedOutError, "timeout"), (ThrottledError, "throttled"),
                         (TransientError, "unavailable"), (AccessDeniedError, "access_denied"),
                         (BadQueryError, "bad_query")):
        if isinstance(error, kind):
            return reason
    return "bad_data"


def version() -> str:
    try:
        return metadata.version("autoscaler")
    except metadata.PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"


def period_label(seconds: float) -> str:
    """A sync period as the ``period`` label shows it: "15s", "0.5s"."""
    return f"{seconds:g}s"


class DaemonMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # prometheus_client's *_created series (a gauge beside every counter and histogram)
        # double the daemon-wide series and no dashboard or rule reads them; the switch is
        # the library's, process-wide, and this is its only user in the process.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.per_target: dict[str, TargetSeries] = {}
        self.exports: Callable[[str], bool] = lambda _key: True
        """Whether this process exports a target's series now. A ring member exports only
        the targets whose bucket it holds: a pass still running when its bucket moved
        must not bring back the series the move took away (the new owner exports them)."""
        self.is_dry_run = False
        self._periods: set[str] = set()
        ProcessCollector(registry=r)
        Info(f"{_NS}_build", "The running build.", registry=r).info(
            {"version": version(), "python_version": platform.python_version()})
        self.dry_run = Gauge(f"{_NS}_dry_run", "1 when decisions are reported, never written.",
                             registry=r)
        self.reconcile_duration = Histogram(
            f"{_NS}_reconcile_duration_seconds", "Time to reconcile one target.",
            buckets=_FAST_BUCKETS, registry=r)
        self.pass_duration = Histogram(
            f"{_NS}_pass_duration_seconds",
            "Time of one pass over the targets of a sync period.", ["period"],
            buckets=_FAST_BUCKETS, registry=r)
        self.sync_period = Gauge(
            f"{_NS}_sync_period_seconds", "The sync period of the targets passed together.",
            ["period"], registry=r)
        self.query_duration = Histogram(
            f"{_NS}_metrics_fetch_duration_seconds", "Time to fetch one pass's metrics.",
            buckets=_FAST_BUCKETS, registry=r)
        self.prometheus_query_duration = Histogram(
            f"{_NS}_prometheus_query_duration_seconds",
            "Time of one PromQL query, retries included, answered or not.", ["server"],
            buckets=_FAST_BUCKETS, registry=r)
        self.prometheus_query_errors = Counter(
            f"{_NS}_prometheus_query_errors_total",
            "PromQL queries that failed (after their retries), by reason.",
            ["server", "reason"], registry=r)
        self.kube_requests = Counter(
            f"{_NS}_kube_api_requests_total",
            'Requests to the Kubernetes API server by verb and HTTP code ("<error>": no '
            "answer).", ["verb", "code"], registry=r)
        self.errors = Counter(f"{_NS}_errors_total", "Errors by reason.", ["reason"],
                              registry=r)
        self.leader = Gauge(
            f"{_NS}_leader", "1 while this instance holds the lease (or runs unelected).",
            ["lease"], registry=r)
        self.targets = Gauge(f"{_NS}_targets", "Targets in the loaded config.", registry=r)
        self.ring_member = Gauge(
            f"{_NS}_ring_member_valid",
            "1 while this ring member's Lease is renewed within its renew deadline (dynamic "
            "sharding).", ["ring", "member"], registry=r)
        self.ring_buckets = Gauge(
            f"{_NS}_ring_buckets", "Buckets of targets this ring member holds, by state.",
            ["ring", "state"], registry=r)
        self.ring_targets = Gauge(
            f"{_NS}_ring_targets", "Targets this ring member acts for.", ["ring"], registry=r)
        self.ring_unowned = Gauge(
            f"{_NS}_ring_unowned_buckets",
            "Buckets with targets that no ring member holds, in this member's view.",
            ["ring"], registry=r)
        self.ring_overdue = Gauge(
            f"{_NS}_ring_overdue_buckets",
            "Buckets with targets unowned longer than a lease duration plus two sync "
            "periods, in this member's view.", ["ring"], registry=r)
        self.ring_moves = Counter(
            f"{_NS}_ring_moves_total",
            'Buckets of targets that moved to or from this member: "gained" (claimed), '
            '"handed_over" (released to another), "lost" (taken while we could not renew).',
            ["ring", "reason"], registry=r)
        self.config_reloads = Counter(
            f"{_NS}_config_reloads_total", "Config reloads by result.", ["result"], registry=r)
        self.last_reload_successful = Gauge(
            f"{_NS}_config_last_reload_successful",
            "1 if the last config load or reload was applied.", registry=r)
        self.last_reload_success = Gauge(
            f"{_NS}_config_last_reload_success_timestamp_seconds",
            "When the config was last loaded or reloaded successfully.", registry=r)
        self.clock_skew = Gauge(
            f"{_NS}_clock_skew_seconds",
            "This daemon's clock minus the API server's (from its Date headers).", registry=r)
        self.clock_steps = Counter(
            f"{_NS}_clock_steps_total",
            "Clock steps detected and bounded: the machine's clock stepped while running "
            '(source="machine", ignored by windows and periods), or saved history was '
            'written on a clock off ours (source="history", moved onto ours).', ["source"],
            registry=r)
        for reason in ERROR_REASONS:
            self.errors.labels(reason=reason)
        for source in CLOCK_STEP_SOURCES:
            self.clock_steps.labels(source=source)
        for result in RELOAD_RESULTS:
            self.config_reloads.labels(result=result)

    # --- per target -----------------------------------------------------------------------

    def target(self, key: str) -> TargetSeries:
        """The target's series (created on first use; not kept, so not exported, for a
        target this process does not export)."""
        series = self.per_target.get(key)
        if series is None:
            series = TargetSeries(labels=target_labels(key))
            if self.exports(key):
                self.per_target[key] = series
        return series

    def forget(self, target: str) -> None:
        """Drop every series of a target that left the config."""
        self.per_target.pop(target, None)

    def forget_targets(self) -> None:
        """Drop every target's series: this instance no longer decides for them."""
        self.per_target.clear()

    # --- per daemon -----------------------------------------------------------------------

    def observe_pass(self, *, period: float, seconds: float) -> None:
        label = period_label(period)
        self.pass_duration.labels(period=label).observe(seconds)
        if label not in self._periods:
            self._periods.add(label)
            self.sync_period.labels(period=label).set(period)

    def set_periods(self, periods: Iterable[float]) -> None:
        """The sync periods of the loaded config: a period no target has any more goes."""
        wanted = {period_label(p): p for p in periods}
        for label in self._periods - wanted.keys():
            self.sync_period.remove(label)
        for label, period in wanted.items():
            self.sync_period.labels(period=label).set(period)
        self._periods = set(wanted)

    def set_dry_run(self, dry_run: bool) -> None:
        self.is_dry_run = dry_run
        self.dry_run.set(1 if dry_run else 0)

    def set_leader(self, lease: str, leading: bool) -> None:
        self.leader.labels(lease=lease).set(1 if leading else 0)

    def config_loaded(self, result: str | None, *, at: float | None = None) -> None:
        """The config was loaded (``result`` None: at start) or a reload ended in ``result``."""
        if result is not None:
            self.config_reloads.labels(result=result).inc()
        applied = result not in ("rejected", "failed")
        self.last_reload_successful.set(1 if applied else 0)
        if applied:
            self.last_reload_success.set(time.time() if at is None else at)

    def prometheus_servers(self, names: Iterable[str]) -> None:
        """Start each server's error counters at 0."""
        for server in names:
            self.prometheus_query_duration.labels(server=server)
            for reason in QUERY_ERROR_REASONS:
                self.prometheus_query_errors.labels(server=server, reason=reason)

    def prometheus_query(self, server: str, seconds: float, error: AutoscalerError | None) -> None:
        """One query's end (called from the query's worker or the event loop)."""
        self.prometheus_query_duration.labels(server=server).observe(seconds)
        if error is not None:
            self.prometheus_query_errors.labels(
                server=server, reason=query_error_reason(error)).inc()

    def kube_request(self, verb: str, code: str) -> None:
        self.kube_requests.labels(verb=verb, code=code).inc()

    def exposition(self) -> Iterator[bytes]:
        """The text format in pieces: the daemon-wide series, then each per-target family.
        Safe to run off the event loop (what it reads is replaced, not resized, by a pass)."""
        yield generate_latest(self.registry)
        series = list(self.per_target.values())  # one step: the loop may add or drop some
        for family in render(series, dry_run=self.is_dry_run):
            yield family.encode()

    def render(self) -> bytes:
        return b"".join(self.exposition())
