"""Predictive scaling in the daemon (issue #27): the one place the reconciler asks for it.

For a target with a ``prediction`` (the others are decided by plain ``decide``), each pass
records the live metric totals in the target's series (persisted with its history), forecasts each
predicted metric, and decides with ``decide_predictive``: by max with the live values, never
below them, acting only when every prediction says ``forecastOnly = false``. A model dropped
by the guard rails (error above its bound) is said once per change: the
``PredictiveScaling`` condition, a ``ForecastUnreliable`` Event, a log line, and
``autoscaler_forecast_used`` at 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import ConditionType, Decision, DecisionInput, Reason
from autoscaler.algorithm.forecast import TargetPredictor, decide_predictive, metric_key
from autoscaler.runtime.status import TargetState

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.prediction")

Emit = Callable[[str, str], None]
"""Records a Warning Event on the target: (reason, message)."""


def decide_with_prediction(state: TargetState, target: TargetConfig, given: DecisionInput, *,
                           emit: Emit) -> Decision:
    """The decision for a target with a ``prediction`` (the reconciler uses it as its
    ``core`` for such targets only)."""
    predictor = _predictor(state, target)
    predictions = predictor.predict(metrics=given.metrics, pods=given.pods, now=given.now)
    state.forecasts = predictor.series
    decision = decide_predictive(given, predictions=predictions, acting=predictor.acting)
    _report(state, target, decision, emit)
    return decision


def closed_buckets(state: TargetState, target: TargetConfig, index: int) -> int:
    """How many closed buckets of metric ``index``'s series hold a value (0 without a
    prediction or a series of its step)."""
    settings = target.predictions[index] if index < len(target.predictions) else None
    if settings is None:
        return 0
    series = state.forecasts.get(metric_key(index, target.spec.metrics[index]))
    if series is None or series.step != settings.step:
        return 0
    return sum(value is not None for value in series.values)


def apply_history(state: TargetState, target: TargetConfig, index: int,
                  points: Sequence[tuple[float, float]]) -> int:
    """Fill metric ``index``'s series from a range query's points (a bucket that has a
    value keeps it; see ``series.backfill``); the closed buckets with a value after."""
    predictor = _predictor(state, target)
    predictor.backfill(index, points)
    state.forecasts = predictor.series
    return closed_buckets(state, target, index)


def _predictor(state: TargetState, target: TargetConfig) -> TargetPredictor:
    """The target's predictor; rebuilt over the saved series after a restore or a reload
    that changed its metrics or predictions (a series whose step changed starts anew)."""
    predictor = state.predictor
    if predictor is None or predictor.settings != target.predictions \
            or predictor.metrics != target.spec.metrics:
        predictor = state.predictor = TargetPredictor(
            target.spec.metrics, target.predictions, state.forecasts,
            windows=[query.window for query in target.metric_queries])
    return predictor


def _report(state: TargetState, target: TargetConfig, decision: Decision, emit: Emit) -> None:
    condition = decision.condition(ConditionType.PREDICTIVE_SCALING)
    before = next((c for c in state.conditions
                   if c.type is ConditionType.PREDICTIVE_SCALING), None)
    if condition is None or condition.reason != Reason.FORECAST_UNRELIABLE:
        return
    if before is None or before.reason != Reason.FORECAST_UNRELIABLE:
        log.warning("forecast dropped: model error above its bound", target=target.key,
                    message=condition.message)
        emit(Reason.FORECAST_UNRELIABLE.value, condition.message)
