"""How a forecast acts: through the same HPA math as the live value, combined by max.

Each metric with a usable forecast is evaluated again *as if* its total were
``max(live total, forecast)``: its pods' samples scaled up together (so readiness, missing
pods and tolerance rules apply as usual), an Object's value or an External metric's sum
replaced. ``decide`` then runs on those values with the same history, spec, bounds and
behavior as the live decision, so stabilization, policies, bounds and schedules apply. The
result is never below the live decision: prediction may scale up earlier or hold a
scale-down, never take the target below what the live metrics ask for. A metric whose live
value is missing or invalid stays invalid: a forecast never stands in for missing data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from autoscaler.algorithm.decision import StagedDecision, decide_staged
from autoscaler.algorithm.decision_values import (
    Condition,
    Decision,
    DecisionInput,
    ForecastReport,
    MetricForecast,
)
from autoscaler.algorithm.forecast.forecaster import Forecast
from autoscaler.algorithm.model import (
    ExternalMetricValues,
    MetricValues,
    Milli,
    ObjectMetricValue,
    PodMetricValues,
    PodSample,
    Seconds,
)
from autoscaler.algorithm.pods import pod_view
from autoscaler.algorithm.reasons import ConditionType, Reason
from autoscaler.algorithm.stage_values import MetricOutcome
from autoscaler.record import seal_values


@dataclass(init=False, slots=True, unsafe_hash=True)
class Prediction:
    """One metric's forecast for this pass, as the forecaster judged it."""

    model: Final[str]
    horizon: Final[Seconds]
    forecast: Final[Forecast]
    live: Final[float | None]
    """The metric's live total this pass (``metric_total`` of its values)."""

    def __init__(
        self,
        *,
        model: str,
        horizon: Seconds,
        forecast: Forecast,
        live: float | None,
    ) -> None:
        self.model = model
        self.horizon = horizon
        self.forecast = forecast
        self.live = live


def metric_total(values: MetricValues) -> float | None:
    """The metric's total in base units (what is forecast): the pods' samples summed, the
    Object's value, the External series summed; ``None`` when the metric is unavailable."""
    if isinstance(values, PodMetricValues):
        samples = values.samples
        return sum([s.value for s in samples.values()]) / 1000 if samples else None
    if isinstance(values, ObjectMetricValue):
        return values.value / 1000
    if isinstance(values, ExternalMetricValues):
        return sum(values.values) / 1000 if values.values else None
    return None


def with_forecast(live: MetricValues, forecast: float, total: float | None = None) -> MetricValues:
    """``live`` as if the metric's total were ``max(live total, forecast)`` (``total``: the
    live total when the caller has it)."""
    total = metric_total(live) if total is None else total
    if total is None or not math.isfinite(forecast) or forecast <= total:
        return live  # unavailable stays unavailable; a lower forecast changes nothing
    wanted = round(forecast * 1000)
    if isinstance(live, PodMetricValues):
        samples = live.samples
        if total > 0:
            return PodMetricValues(samples=_scaled(samples, forecast / total))
        each = Milli(wanted // len(samples))
        return PodMetricValues(samples={
            name: PodSample(value=each, timestamp=s.timestamp, window=s.window)
            for name, s in samples.items()})
    if isinstance(live, ObjectMetricValue):
        return ObjectMetricValue(value=Milli(wanted))
    return ExternalMetricValues(values=(Milli(wanted),))


def _scaled(samples: Mapping[str, PodSample], factor: float) -> dict[str, PodSample]:
    """Each sample times ``factor``; pods that share one sample object (the simulator's
    pods Ready through the window) share its scaled copy, built once."""
    made: dict[int, PodSample] = {}
    out: dict[str, PodSample] = {}
    for name, s in samples.items():
        scaled = made.get(id(s))
        if scaled is None:
            scaled = made[id(s)] = PodSample(value=Milli(round(s.value * factor)),
                                             timestamp=s.timestamp, window=s.window)
        out[name] = scaled
    return out


def decide_predictive(
    given: DecisionInput, *, predictions: Sequence[Prediction | None], acting: bool,
) -> Decision:
    """``decide`` with the forecasts combined by max; ``acting`` false (forecastOnly) returns
    the live decision with the forecast's report. ``predictions`` is aligned with
    ``spec.metrics``."""
    # The second decision sees the same pods: group them once.
    given = given.with_pods(pod_view(given.pods))
    metrics = given.metrics

    def run(values: Sequence[MetricValues]) -> Decision | StagedDecision:
        # Staged: only the decision kept is built in full (conditions, steps, holds, limits).
        return decide_staged(given if values is metrics else given.with_metrics(values))

    live = run(metrics)
    totals = [p.live if p is not None else None for p in predictions]
    used = [_usable(p, t) for p, t in zip(predictions, totals, strict=True)]
    predicted = live
    values = [with_forecast(m, p.forecast.value, t)
              if use and p and p.forecast.value is not None else m
              for p, m, t, use in zip(predictions, metrics, totals, used, strict=True)]
    if any(v is not m for v, m in zip(values, metrics, strict=True)):
        predicted = run(values)
        if _desired(predicted) < _desired(live):
            predicted = live  # never below what the live metrics ask for
    report = ForecastReport(
        acting=acting, reactive_replicas=_desired(live),
        predictive_replicas=_desired(predicted),
        metrics=tuple(_shown(p, t, use, predicted.metrics, i) for i, (p, t, use) in
                      enumerate(zip(predictions, totals, used, strict=True))),
    )
    chosen = predicted if acting else live
    reason = chosen.rescale_reason
    if acting and report.changed and reason:
        reason = f"{reason} (forecast {_ahead(predictions)} ahead)"
    condition = _condition(report, predictions)
    if isinstance(chosen, StagedDecision):
        return chosen.decision(rescale_reason=reason, extra=condition, forecast=report)
    return replace(chosen, forecast=report, rescale_reason=reason,
                   conditions=(*chosen.conditions, condition))


def _desired(decision: Decision | StagedDecision) -> int:
    return decision.desired_replicas if isinstance(decision, Decision) else decision.desired


def _usable(prediction: Prediction | None, total: float | None) -> bool:
    return (prediction is not None and prediction.forecast.usable
            and prediction.forecast.value is not None and total is not None)


def _shown(prediction: Prediction | None, total: float | None, used: bool,
           outcomes: Sequence[MetricOutcome], index: int) -> MetricForecast | None:
    if prediction is None:
        return None
    forecast = prediction.forecast
    reason = forecast.reason
    if not reason and not used:
        reason = "the live metric is invalid: a forecast never stands in for missing data"
    outcome = outcomes[index] if used and index < len(outcomes) else None
    return MetricForecast(
        model=prediction.model, horizon=prediction.horizon, value=forecast.value,
        live=total,
        error_percent=forecast.error_percent, used=used, reason=reason,
        proposal=outcome.proposal.replicas if outcome and outcome.proposal else None,
    )


def _ahead(predictions: Sequence[Prediction | None]) -> str:
    horizon = max((p.horizon for p in predictions if p is not None), default=0.0)
    return f"{horizon:.0f}s"


def _condition(report: ForecastReport, predictions: Sequence[Prediction | None]) -> Condition:
    """``PredictiveScaling``: whether forecasts are used, and if not, why (per metric)."""
    shown = [(p, m) for p, m in zip(predictions, report.metrics, strict=True) if m and p]
    used = [m for _, m in shown if m.used]
    if used:
        mode = "acting on" if report.acting else "showing, not acting on (forecastOnly),"
        what = ", ".join(f"{m.model} (error {m.error_percent:.1f}%)" for m in used)
        return Condition(
            type=ConditionType.PREDICTIVE_SCALING, status=True,
            reason=Reason.FORECAST_ACTING if report.acting else Reason.FORECAST_ONLY,
            message=f"{mode} the forecast {_ahead(predictions)} ahead: {what}")
    unreliable = any(p.forecast.unreliable for p, _ in shown)
    why = "; ".join(f"{p.model}: {m.reason}" for p, m in shown)
    return Condition(
        type=ConditionType.PREDICTIVE_SCALING, status=False,
        reason=Reason.FORECAST_UNRELIABLE if unreliable else Reason.FORECAST_NOT_READY,
        message=f"purely reactive: {why}")


seal_values(globals())
