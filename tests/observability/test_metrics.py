"""The daemon's own metrics: per-target series with kube-state-metrics' labels, counters that
start at 0, dry-run counted apart, and an exposition ``promtool check metrics`` accepts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from autoscaler.algorithm import AlgorithmSettings, AutoscalerSpec, Condition, ConditionType
from autoscaler.algorithm.decision_values import ForecastReport, MetricForecast
from autoscaler.algorithm.reasons import Reason
from autoscaler.errors import (
    AccessDeniedError,
    AutoscalerError,
    BadDataError,
    BadQueryError,
    ThrottledError,
    TimedOutError,
    TransientError,
)
from autoscaler.observability.metrics import DaemonMetrics, MetricReading, query_error_reason
from autoscaler.observability.per_target import FAMILY_NAMES, TargetSeries
from tests.observability.exposition import exposition, label_sets, value
from tests.sim.prometheus import PROMTOOL_BIN, require_binary

WEB = {"namespace": "shop", "kind": "Deployment", "name": "web"}
CPU = {**WEB, "metric": "cpu", "metric_type": "Resource"}
QUEUE = {**WEB, "metric": "queue", "metric_type": "External"}


def settled(series: TargetSeries, outcome: str = "ok", **kwargs: object) -> None:
    """The end of a pass over the target, with a spec of 2 to 10 replicas."""
    options = {"at": 1.7e9, "spec": AutoscalerSpec(min_replicas=2, max_replicas=10, metrics=()),
               "settings": AlgorithmSettings(), "conditions": (), "paused": False,
               "fallback_active": False} | kwargs
    series.settled(outcome, **options)  # type: ignore[arg-type]


def populated() -> DaemonMetrics:
    """Every family with a sample: one target in full, one paused, daemon-wide series."""
    metrics = DaemonMetrics()
    metrics.set_dry_run(True)
    series = metrics.target("shop/Deployment/web")
    series.current, series.desired, series.recommended = 3, 5, 7
    series.metrics = (MetricReading("cpu", "Resource", True, 50.0, 80.0),
                      MetricReading("queue", "External", False, 10.0, None))
    series.schedules = (("business", True), ("nightly", False))
    series.bounds = (4, 10)
    series.scaled(3, 5)
    series.would_scale(5, 6)
    series.drift += 1
    series.shadow = (5, 4)
    series.activation_active = True
    series.forecast = ForecastReport(acting=False, reactive_replicas=4, predictive_replicas=5,
                                     metrics=(MetricForecast(
                                         model="holt-winters", horizon=90.0, value=120.0,
                                         live=100.0, error_percent=8.5, used=True,
                                         proposal=5), None))
    series.forecast_metrics = ("cpu", "queue")
    settled(series, conditions=(
        Condition(type=ConditionType.ABLE_TO_SCALE, status=True,
                  reason=Reason.READY_FOR_NEW_SCALE, message=""),
        Condition(type=ConditionType.SCALING_ACTIVE, status=False,
                  reason=Reason.FAILED_GET_EXTERNAL_METRIC, message="")), fallback_active=True)
    settled(metrics.target("shop/StatefulSet/db"), "paused", paused=True)
    metrics.observe_pass(period=15.0, seconds=0.2)
    metrics.prometheus_servers(["default"])
    metrics.prometheus_query("default", 0.01, None)
    metrics.kube_request("watch", "200")
    metrics.set_leader("autoscaler", True)
    metrics.config_loaded(None, at=1.7e9)
    # A ring member's series (dynamic sharding; one process is either, filled here together).
    metrics.ring_member.labels(ring="autoscaler", member="host-1a2b3c4d").set(1)
    metrics.ring_buckets.labels(ring="autoscaler", state="active").set(12)
    metrics.ring_targets.labels(ring="autoscaler").set(340)
    metrics.ring_unowned.labels(ring="autoscaler").set(0)
    metrics.ring_overdue.labels(ring="autoscaler").set(0)
    metrics.ring_moves.labels(ring="autoscaler", reason="gained").inc()
    return metrics


@pytest.mark.parametrize(("name", "labels", "expected"), [
    ("autoscaler_current_replicas", WEB, 3),
    ("autoscaler_desired_replicas", WEB, 5),
    ("autoscaler_recommended_replicas", WEB, 7),
    ("autoscaler_min_replicas", WEB, 4),
    ("autoscaler_max_replicas", WEB, 10),
    ("autoscaler_schedule_active", {**WEB, "schedule": "business"}, 1),
    ("autoscaler_schedule_active", {**WEB, "schedule": "nightly"}, 0),
    ("autoscaler_tolerance_ratio", {**WEB, "direction": "up"}, 0.1),
    ("autoscaler_status_condition", {**WEB, "condition": "AbleToScale", "status": "true"}, 1),
    ("autoscaler_status_condition", {**WEB, "condition": "AbleToScale", "status": "false"}, 0),
    ("autoscaler_status_condition", {**WEB, "condition": "ScalingActive", "status": "false"}, 1),
    ("autoscaler_paused", WEB, 0),
    ("autoscaler_paused", {"kind": "StatefulSet", "name": "db"}, 1),
    ("autoscaler_min_replicas", {"kind": "StatefulSet", "name": "db"}, 2),
    ("autoscaler_fallback_active", WEB, 1),
    ("autoscaler_last_reconcile_timestamp_seconds", WEB, 1.7e9),
    ("autoscaler_reconciles_total", {**WEB, "outcome": "ok"}, 1),
    ("autoscaler_scale_events_total", {**WEB, "direction": "up"}, 1),
    ("autoscaler_scale_events_total", {**WEB, "direction": "down"}, 0),
    ("autoscaler_would_scale_events_total", {**WEB, "direction": "up"}, 1),
    ("autoscaler_drift_total", WEB, 1),
    ("autoscaler_metric_value", CPU, 80),
    ("autoscaler_metric_target", QUEUE, 10),
    ("autoscaler_metric_valid", CPU, 1),
    ("autoscaler_metric_valid", QUEUE, 0),
    ("autoscaler_activation_active", WEB, 1),
    ("autoscaler_clock_steps_total", {"source": "machine"}, 0),
    ("autoscaler_build_info", {"version": "0.1.0"}, 1),
    ("autoscaler_dry_run", {}, 1),
    ("autoscaler_leader", {"lease": "autoscaler"}, 1),
    ("autoscaler_pass_duration_seconds_count", {"period": "15s"}, 1),
    ("autoscaler_sync_period_seconds", {"period": "15s"}, 15),
    ("autoscaler_prometheus_query_duration_seconds_count", {"server": "default"}, 1),
    ("autoscaler_prometheus_query_errors_total", {"server": "default", "reason": "timeout"}, 0),
    ("autoscaler_kube_api_requests_total", {"verb": "watch", "code": "200"}, 1),
    ("autoscaler_errors_total", {"reason": "state_save"}, 0),
    ("autoscaler_config_reloads_total", {"result": "rejected"}, 0),
    ("autoscaler_config_last_reload_successful", {}, 1),
    ("autoscaler_config_last_reload_success_timestamp_seconds", {}, 1.7e9),
], ids=lambda v: v if isinstance(v, str) else None)
def test_series_and_their_labels(name: str, labels: dict[str, str], expected: float) -> None:
    """Each series carries namespace, kind and name (and metric, metric_type) as labels."""
    assert value(exposition(populated()), name, **labels) == expected


def test_every_per_target_family_is_in_the_exposition() -> None:
    """The populated daemon shows a sample of every per-target family."""
    text = exposition(populated())
    assert [name for name in FAMILY_NAMES if not label_sets(text, name)] == []


def test_targets_share_their_tolerance_text_and_counters_until_they_scale() -> None:
    """Each target kept its own tolerance lines (0.25 KB) and two lists of [0, 0] (0.14 KB):
    11,400 targets held ~4.5 MB of them. The numbers' text is one pair for every target with
    the same tolerances, written into the lines at each scrape, and the counters are one
    shared tuple until a target scales."""
    metrics = DaemonMetrics()
    web, api = metrics.target("shop/Deployment/web"), metrics.target("shop/Deployment/api")
    for series in (web, api):  # specs equal, not the same object: each target has its own
        settled(series)
    text = exposition(metrics)
    assert value(text, "autoscaler_tolerance_ratio", name="api", direction="down") == 0.1
    assert web._tolerance[2] is api._tolerance[2]
    assert web.scale_events is api.scale_events is web.would_scale_events
    web.scaled(3, 5)
    assert (web.scale_events, api.scale_events) == ((1, 0), (0, 0))


def test_invalid_metric_has_no_value_rather_than_zero() -> None:
    """A metric that could not be computed has no value sample (a 0 would look real)."""
    assert value(exposition(populated()), "autoscaler_metric_value", **QUEUE) is None


def test_label_values_are_escaped() -> None:
    """Quotes, backslashes and newlines in a metric name stay inside their label."""
    metrics = DaemonMetrics()
    metrics.target("ns/Deployment/web").metrics = (
        MetricReading('q"1\\\n', "External", True, 1.0, 2.0),)
    text = exposition(metrics)
    assert value(text, "autoscaler_metric_value", metric='q"1\\\n') == 2.0


def test_forget_drops_every_series_of_the_target() -> None:
    """After forget(), no series of that target remains; others are untouched."""
    metrics = populated()
    metrics.forget("shop/Deployment/web")
    text = exposition(metrics)
    assert 'name="web"' not in text
    assert value(text, "autoscaler_paused", name="db") == 1


def test_forget_targets_drops_them_all() -> None:
    """A standby shows no per-target series (its view would be stale)."""
    metrics = populated()
    metrics.forget_targets()
    text = exposition(metrics)
    assert 'kind="' not in text
    assert value(text, "autoscaler_leader", lease="autoscaler") == 1


@pytest.mark.parametrize(("passes", "counted"), [
    ([(2, 4)] * 50, 1),
    ([(2, 4), (2, 4), (2, 5), (2, 5)], 2),
    ([(2, 4), None, (2, 4)], 2),
    ([(2, 4), (4, 2)], 2),
    ([None, None], 0),
], ids=["same-change-every-pass", "a-new-desired", "withdrawn-and-proposed-again",
        "both-ways", "nothing-to-do"])
def test_would_be_scales_are_counted_once_per_change(
    passes: list[tuple[int, int] | None], counted: int,
) -> None:
    """Dry-run: a pass that would make the same write as the pass before counts nothing."""
    series = DaemonMetrics().target("ns/Deployment/web")
    for would in passes:
        if would is not None:
            series.would_scale(*would)
        settled(series)
    assert sum(series.would_scale_events) == counted
    assert series.scale_events == (0, 0)


def test_would_be_scales_show_only_in_dry_run_or_once_counted() -> None:
    """A daemon that writes does not show a would-be counter at 0 for every target."""
    metrics = DaemonMetrics()
    settled(metrics.target("ns/Deployment/web"))
    assert label_sets(exposition(metrics), "autoscaler_would_scale_events_total") == []
    metrics.set_dry_run(True)
    assert len(label_sets(exposition(metrics), "autoscaler_would_scale_events_total")) == 2


@pytest.mark.parametrize(("error", "reason"), [
    (TimedOutError("x"), "timeout"),
    (ThrottledError("x"), "throttled"),
    (TransientError("x"), "unavailable"),
    (AccessDeniedError("x"), "access_denied"),
    (BadQueryError("x"), "bad_query"),
    (BadDataError("x"), "bad_data"),
], ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_query_errors_by_reason(error: AutoscalerError, reason: str) -> None:
    """A failed query is counted under its server and the kind of its error."""
    metrics = DaemonMetrics()
    metrics.prometheus_servers(["default", "thanos"])
    metrics.prometheus_query("thanos", 0.5, error)
    text = exposition(metrics)
    assert query_error_reason(error) == reason
    assert value(text, "autoscaler_prometheus_query_errors_total",
                 server="thanos", reason=reason) == 1
    assert value(text, "autoscaler_prometheus_query_errors_total",
                 server="default", reason=reason) == 0


@pytest.mark.parametrize(("results", "successful", "stamped"), [
    ([None], 1, True),
    ([None, "rejected"], 0, True),
    (["rejected", "applied"], 1, True),
    (["rejected"], 0, False),
], ids=["loaded-at-start", "then-rejected", "rejected-then-applied", "only-rejected"])
def test_last_reload_result_and_time(results: list[str | None], successful: int,
                                     stamped: bool) -> None:
    """As Prometheus' own: the last reload's result, and when one last succeeded."""
    metrics = DaemonMetrics()
    for result in results:
        metrics.config_loaded(result, at=100.0)
    text = exposition(metrics)
    assert value(text, "autoscaler_config_last_reload_successful") == successful
    assert value(text, "autoscaler_config_last_reload_success_timestamp_seconds") == (
        100.0 if stamped else 0.0)


def test_sync_periods_follow_the_config() -> None:
    """A period no target has any more leaves the exposition."""
    metrics = DaemonMetrics()
    metrics.set_periods([15.0, 60.0])
    metrics.set_periods([15.0])
    assert label_sets(exposition(metrics), "autoscaler_sync_period_seconds") == [
        {"period": "15s"}]


def test_promtool_check_metrics_accepts_the_exposition() -> None:
    """Prometheus' own linter finds nothing to say about names, types, units or help."""
    promtool = require_binary(PROMTOOL_BIN)
    checked = subprocess.run([promtool, "check", "metrics"], input=populated().render(),
                             capture_output=True, timeout=30, check=False)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, b"")


def test_readme_documents_every_series() -> None:
    """The README's tables name exactly the series the daemon exports, each with its type."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    documented = dict(re.findall(r"^\| `(autoscaler_\w+)` \| (\w+) \|", readme, re.MULTILINE))
    exported = dict(re.findall(r"^# TYPE (autoscaler_\w+) (\w+)$", exposition(populated()),
                               re.MULTILINE))
    assert documented == exported
