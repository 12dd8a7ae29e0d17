"""The daemon's own metrics: per-target numbers rendered at scrape time."""

from __future__ import annotations

from autoscaler.observability.metrics import DaemonMetrics, MetricReading


def exposition(metrics: DaemonMetrics) -> str:
    return metrics.render().decode()


def test_per_target_series_render_as_gauges_and_counters() -> None:
    metrics = DaemonMetrics()
    series = metrics.target("shop/web")
    series.current, series.desired, series.last_reconcile = 3, 5, 1700000000.0
    series.metrics = (MetricReading("cpu", True, 50.0, 80.0),
                      MetricReading("queue", False, 10.0, None))
    series.reconciles["ok"] = 2
    text = exposition(metrics)
    for line in ('autoscaler_current_replicas{target="shop/web"} 3.0',
                 'autoscaler_desired_replicas{target="shop/web"} 5.0',
                 'autoscaler_last_reconcile_timestamp_seconds{target="shop/web"} 1.7e+09',
                 'autoscaler_metric_value{metric="cpu",target="shop/web"} 80.0',
                 'autoscaler_metric_target{metric="queue",target="shop/web"} 10.0',
                 'autoscaler_metric_valid{metric="cpu",target="shop/web"} 1.0',
                 'autoscaler_metric_valid{metric="queue",target="shop/web"} 0.0',
                 'autoscaler_reconciles_total{outcome="ok",target="shop/web"} 2.0',
                 "# TYPE autoscaler_reconciles_total counter"):
        assert line in text, line
    assert 'autoscaler_metric_value{metric="queue"' not in text  # invalid: no value, not 0


def test_forget_drops_every_series_of_the_target() -> None:
    metrics = DaemonMetrics()
    for key in ("shop/web", "shop/api"):
        series = metrics.target(key)
        series.current = 2
        series.metrics = (MetricReading("cpu", True, 50.0, 40.0),)
        metrics.scale_events.labels(target=key, direction="up").inc()
        metrics.drift.labels(target=key).inc()
    metrics.forget("shop/web")
    text = exposition(metrics)
    assert "shop/web" not in text
    assert 'autoscaler_current_replicas{target="shop/api"} 2.0' in text
    assert 'autoscaler_scale_events_total{direction="up",target="shop/api"} 1.0' in text
    assert 'autoscaler_drift_total{target="shop/api"} 1.0' in text
