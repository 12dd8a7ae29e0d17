"""The daemon's own metrics: fast label lookups keep prometheus_client's semantics."""

from __future__ import annotations

import pytest

from autoscaler.observability.metrics import DaemonMetrics


def exposition(metrics: DaemonMetrics) -> str:
    return metrics.render().decode()


def test_labels_by_name_or_position_reach_one_child() -> None:
    metrics = DaemonMetrics()
    metrics.metric_value.labels(target="shop/web", metric="cpu").set(3)
    metrics.metric_value.labels("shop/web", "cpu").inc(2)
    metrics.metric_value.labels(metric="cpu", target="shop/web").inc(1)
    assert 'autoscaler_metric_value{metric="cpu",target="shop/web"} 6.0' in exposition(metrics)


def test_forget_drops_the_series_and_a_later_pass_recreates_it() -> None:
    metrics = DaemonMetrics()
    metrics.current_replicas.labels(target="shop/web").set(4)
    metrics.metric_valid.labels(target="shop/web", metric="cpu").set(1)
    metrics.forget("shop/web", ("cpu",))
    assert "shop/web" not in exposition(metrics)
    metrics.current_replicas.labels(target="shop/web").set(5)
    assert 'autoscaler_current_replicas{target="shop/web"} 5.0' in exposition(metrics)


def test_wrong_labels_still_fail_as_in_the_library() -> None:
    metrics = DaemonMetrics()
    with pytest.raises(ValueError, match="Incorrect label"):
        metrics.current_replicas.labels(namespace="shop")
    with pytest.raises(ValueError, match="Incorrect label count"):
        metrics.metric_value.labels("shop/web")
