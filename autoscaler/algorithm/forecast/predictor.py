"""A target's prediction between passes: each metric's series (persisted) and model (memo).

The daemon keeps one per target in its ``TargetState`` and ``simulate`` one per scenario;
both call ``predict`` once per pass with the live values, then ``decide_predictive``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from autoscaler.algorithm.forecast.combine import Prediction, metric_total
from autoscaler.algorithm.forecast.forecaster import Forecaster
from autoscaler.algorithm.forecast.prediction_settings import DEFAULT_HORIZON, PredictionSettings
from autoscaler.algorithm.forecast.series import Series, backfill, observe
from autoscaler.algorithm.model import (
    ConditionStatus,
    MetricSpec,
    MetricValues,
    Pod,
    Seconds,
)

MAX_STARTUP = 3600.0
"""A pod Ready later than this after it started flapped or waited: not a startup time."""


def metric_key(index: int, spec: MetricSpec) -> str:
    """The series' key in the state: a metric moved or renamed starts a new history."""
    return f"{index}/{spec.type}/{spec.name}"


def observed_startup(pods: Sequence[Pod]) -> Seconds | None:
    """The median time from start to Ready of the target's Ready pods (what a scale-up
    takes to serve), or ``None`` when no pod tells."""
    took = [
        pod.ready_transition_time - pod.start_time for pod in pods
        if pod.ready is ConditionStatus.TRUE and not pod.deleting
        and pod.ready_transition_time is not None and pod.start_time is not None
        and 0 <= pod.ready_transition_time - pod.start_time <= MAX_STARTUP
    ]
    return statistics.median(took) if took else None


class TargetPredictor:
    def __init__(
        self,
        metrics: Sequence[MetricSpec],
        settings: Sequence[PredictionSettings | None],
        series: Mapping[str, Series] | None = None,
        *,
        windows: Sequence[Seconds] = (),
    ) -> None:
        self.metrics = tuple(metrics)
        self.settings = tuple(settings)
        self.windows = tuple(windows) or (0.0,) * len(self.metrics)
        keys = [metric_key(i, m) for i, m in enumerate(self.metrics)]
        self._keys = keys
        kept = dict(series or {})
        self.series: dict[str, Series] = {
            key: kept[key] if key in kept and kept[key].step == s.step else Series(step=s.step)
            for key, s in zip(keys, self.settings, strict=True) if s is not None
        }
        self._forecasters = {key: Forecaster(s)
                             for key, s in zip(keys, self.settings, strict=True) if s is not None}
        self._models = tuple("" if s is None else s.model.value for s in self.settings)
        self._kept = {key: s.kept_buckets
                      for key, s in zip(keys, self.settings, strict=True) if s is not None}
        self.startup: Seconds | None = None
        self._startup_of: Sequence[Pod] = ()
        self._startup_seen: Seconds | None = None

    @property
    def acting(self) -> bool:
        """Acts only when every metric's prediction says ``forecastOnly = false``."""
        return all(s.forecast_only is False for s in self.settings if s is not None)

    def horizon(self, settings: PredictionSettings, window: Seconds) -> Seconds:
        """The set horizon, else the observed start-to-Ready time plus the metric's window:
        pods asked for now serve that much later, and a value averaged over the window
        (``rate(...[1m])``) reads what happened up to a window ago."""
        if settings.horizon is not None:
            return settings.horizon
        return (self.startup if self.startup is not None else DEFAULT_HORIZON) + window

    def predict(
        self, *, metrics: Sequence[MetricValues], pods: Sequence[Pod], now: Seconds
    ) -> tuple[Prediction | None, ...]:
        """Record this pass's live totals, then forecast each metric ``horizon`` ahead."""
        self.startup = self._observed_startup(pods) or self.startup
        out: list[Prediction | None] = []
        for key, settings, values, window, model in zip(self._keys, self.settings, metrics,
                                                        self.windows, self._models, strict=True):
            if settings is None:
                out.append(None)
                continue
            total = metric_total(values)
            if total is not None:
                self.series[key] = observe(self.series[key], at=now, value=total,
                                           keep=self._kept[key])
            horizon = self.horizon(settings, window)
            forecast = self._forecasters[key].forecast(self.series[key], now=now,
                                                       horizon=horizon)
            out.append(Prediction(model=model, horizon=horizon, forecast=forecast, live=total))
        return tuple(out)

    def _observed_startup(self, pods: Sequence[Pod]) -> Seconds | None:
        """``observed_startup``, computed again only when some pod changed: pods are
        immutable values, and the pod cache (and the simulator) hand the same objects over
        until a pod changes, so most passes find the same ones."""
        last = self._startup_of
        if pods is last:
            return self._startup_seen  # the very same pods (a ``PodView`` kept by the caller)
        if len(pods) != len(last) or any(a is not b for a, b in zip(pods, last, strict=True)):
            self._startup_seen = observed_startup(pods)
        self._startup_of = pods if isinstance(pods, tuple) else tuple(pods)
        return self._startup_seen

    def backfill(self, index: int, points: Sequence[tuple[float, float]]) -> None:
        """Fill metric ``index``'s gaps from a range query of its own total."""
        settings = self.settings[index]
        if settings is None:
            return
        key = self._keys[index]
        self.series[key] = backfill(self.series[key], points, keep=settings.kept_buckets)
