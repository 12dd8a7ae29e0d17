"""Predictive scaling (issue #27): forecast each metric, act through the exact HPA math.

Opt-in per metric (``prediction``), off by default, and forecast-only until told otherwise.
``TargetPredictor.predict`` records a pass's live totals and forecasts each metric
``horizon`` ahead; ``decide_predictive`` runs ``decide`` on the live values and on the values
as if each metric had its forecast, and never goes below the live result. Pure, like the core.
"""

from autoscaler.algorithm.decision_values import ForecastReport, MetricForecast
from autoscaler.algorithm.forecast.combine import (
    Prediction,
    decide_predictive,
    metric_total,
    with_forecast,
)
from autoscaler.algorithm.forecast.forecaster import Forecast, Forecaster
from autoscaler.algorithm.forecast.prediction_settings import (
    ModelKind,
    PredictionSettings,
    Smoothing,
)
from autoscaler.algorithm.forecast.predictor import TargetPredictor, metric_key, observed_startup
from autoscaler.algorithm.forecast.series import Series, backfill, observe

__all__ = [
    "Forecast", "ForecastReport", "Forecaster", "MetricForecast", "ModelKind", "Prediction",
    "PredictionSettings", "Series", "Smoothing", "TargetPredictor", "backfill",
    "decide_predictive", "metric_key", "metric_total", "observe", "observed_startup",
    "with_forecast",
]
