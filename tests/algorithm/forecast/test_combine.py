"""The combination rule: through the HPA math, by max, never below the live proposal."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    ConditionType,
    DecisionInput,
    History,
    MetricUnavailable,
    MetricValues,
    Milli,
    ObjectMetricValue,
    PodMetricValues,
    Reason,
    Recommendation,
    ScaleState,
    decide,
)
from autoscaler.algorithm.forecast import Forecast, Prediction, decide_predictive, metric_total
from tests.algorithm.builders import object_spec, pod, pod_samples, pods_spec, spec

NOW = 10_000.0
PODS = [pod(f"test-pod-{i}") for i in range(4)]
SPEC = spec(pods_spec(100_000), max_replicas=20)  # 100 per pod
SETTLED = History(recommendations=(Recommendation(replicas=4, timestamp=NOW - 1000),))
"""Seen before, outside the scale-down window: a scale-down is allowed now."""


def usable(value: float) -> Prediction:
    return Prediction(model="holtWinters", horizon=60.0, live=None, forecast=Forecast(
        value=value, error_percent=5.0, usable=True, reason=""))


def run(values: MetricValues, forecast: float | None, *, acting: bool = True,
        history: History | None = None) -> tuple[int, int, object]:
    """(live desired, combined desired, report) for 4 pods."""
    scale = ScaleState(spec_replicas=4, status_replicas=4)
    live = decide(DecisionInput(spec=SPEC, scale=scale, metrics=[values], pods=PODS,
                                history=history or SETTLED, now=NOW))
    prediction = None if forecast is None else usable(forecast)
    if prediction is not None:
        prediction = Prediction(model=prediction.model, horizon=prediction.horizon,
                                forecast=prediction.forecast, live=metric_total(values))
    combined = decide_predictive(
        DecisionInput(spec=SPEC, scale=scale, metrics=[values], pods=PODS,
                      history=history or SETTLED, now=NOW),
        predictions=[prediction], acting=acting)
    return live.desired_replicas, combined.desired_replicas, combined.forecast


@pytest.mark.parametrize(("per_pod", "forecast", "expected"), [
    (100_000, 800.0, 8),    # on target now, twice the load ahead: scale up early
    (100_000, 300.0, 4),    # a lower forecast changes nothing
    (50_000, 400.0, 4),     # half load now (would scale down to 2), full ahead: hold
    (50_000, 100.0, 2),     # a lower forecast does not hold what the live metric lets go
    (150_000, 200.0, 6),    # never below what the live metric asks for
], ids=["scale-up-early", "lower-ignored", "hold-scale-down", "no-hold-when-lower",
        "never-below-live"])
def test_the_forecast_combines_by_max(per_pod: int, forecast: float, expected: int) -> None:
    """The forecast total goes through the same per-pod math; the larger proposal wins."""
    live, combined, _ = run(PodMetricValues(samples=pod_samples(*[per_pod] * 4)), forecast)
    assert combined == expected
    assert combined >= live


def test_forecast_only_shows_without_acting() -> None:
    """forecastOnly acts on the live metrics and reports what the forecast would have done."""
    live, combined, report = run(PodMetricValues(samples=pod_samples(*[100_000] * 4)), 800.0,
                                 acting=False)
    assert combined == live == 4
    assert report.predictive_replicas == 8
    assert report.changed


def test_a_missing_metric_stays_invalid() -> None:
    """A forecast never stands in for missing data: the target holds."""
    live, combined, report = run(MetricUnavailable(reason="no data"), 800.0)
    assert combined == live == 4
    assert not report.metrics[0].used  # type: ignore[attr-defined]
    assert "missing data" in report.metrics[0].reason  # type: ignore[attr-defined]


def test_an_object_metric_takes_the_forecast_value() -> None:
    """An Object value is replaced by the larger forecast (AverageValue: total / target)."""
    object_metric = spec(object_spec(average=100_000), max_replicas=20)
    decision = decide_predictive(
        DecisionInput(spec=object_metric, scale=ScaleState(spec_replicas=4, status_replicas=4),
                      metrics=[ObjectMetricValue(value=Milli(400_000))], pods=PODS,
                      history=History(), now=NOW),
        acting=True, predictions=[Prediction(
            model="seasonalNaive", horizon=60.0, live=400.0,
            forecast=Forecast(value=1000.0, error_percent=1.0, usable=True, reason=""))])
    assert decision.desired_replicas == 8  # the default scale-up limit: max(2x, 4) per pass
    assert decision.forecast is not None
    assert decision.forecast.predictive_replicas == 8


def test_an_unusable_model_is_said_in_the_condition() -> None:
    """A model over its error bound is not used, and PredictiveScaling says why."""
    values = PodMetricValues(samples=pod_samples(*[100_000] * 4))
    decision = decide_predictive(
        DecisionInput(spec=SPEC, scale=ScaleState(spec_replicas=4, status_replicas=4),
                      metrics=[values], pods=PODS, history=History(), now=NOW),
        acting=True, predictions=[Prediction(
            model="holtWinters", horizon=60.0, live=400.0, forecast=Forecast(
                value=800.0, error_percent=45.0, usable=False, unreliable=True,
                reason="error 45.0% is above the bound of 20%"))])
    assert decision.desired_replicas == 4
    condition = decision.condition(ConditionType.PREDICTIVE_SCALING)
    assert condition is not None
    assert not condition.status
    assert condition.reason is Reason.FORECAST_UNRELIABLE
    assert "45.0% is above the bound" in condition.message
