"""``/metrics`` of predictive scaling: per predicted metric its forecast, the model's error and
whether it was used; per target whether the forecast changed the result, and the count the
live metrics alone asked for. Rendered at scrape time from ``TargetSeries.forecast``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from autoscaler.observability.metrics import TargetSeries

_NS = "autoscaler"


class ForecastCollector(Collector):
    def __init__(self, series: Mapping[str, TargetSeries]) -> None:
        self._series = series

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        value, error, used, changed, reactive = families = self._families()
        for key, s in self._series.items():
            report = s.forecast
            if report is None:
                continue
            changed.add_metric([key], 1.0 if report.changed else 0.0)
            reactive.add_metric([key], report.reactive_replicas)
            for name, metric in zip(s.forecast_metrics, report.metrics, strict=False):
                if metric is None:
                    continue
                used.add_metric([key, name], 1.0 if metric.used else 0.0)
                if metric.value is not None:
                    value.add_metric([key, name], metric.value)
                if metric.error_percent is not None:
                    error.add_metric([key, name], metric.error_percent)
        yield from families

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        t, tm = ["target"], ["target", "metric"]
        return (
            GaugeMetricFamily(f"{_NS}_forecast_value",
                              "A predicted metric's forecast total (base units) for the pass's "
                              "horizon.", labels=tm),
            GaugeMetricFamily(f"{_NS}_forecast_error_percent",
                              "The model's recent error: WAPE over the last season at the "
                              "horizon.", labels=tm),
            GaugeMetricFamily(f"{_NS}_forecast_used",
                              "1 if the forecast went through the HPA math at the last pass.",
                              labels=tm),
            GaugeMetricFamily(f"{_NS}_forecast_changed",
                              "1 if the forecast changed the desired count at the last pass "
                              "(or would have, in forecastOnly).", labels=t),
            GaugeMetricFamily(f"{_NS}_forecast_reactive_replicas",
                              "The desired count from the live metrics alone.", labels=t),
        )
