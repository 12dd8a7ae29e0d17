"""A metric's ``prediction`` table into ``PredictionSettings`` (issue #27).

The schema has checked each field's type and range; this checks what spans fields: the
season and the window are whole numbers of steps, a season of at most ``MAX_BUCKETS``
steps (the state keeps three seasons per metric), and settings that belong to one model only.
"""

from __future__ import annotations

from autoscaler.algorithm.forecast import ModelKind, PredictionSettings, Smoothing
from autoscaler.config.durations import format_duration
from autoscaler.config.issues import Loc, Problems
from autoscaler.config.schema import PredictionModel
from autoscaler.config.settings import given

MAX_BUCKETS = 2016
"""Steps per season (a week of 5-minute steps): bounds each metric's state and the fit."""


def convert_prediction(
    model: PredictionModel | None, *, loc: Loc, problems: Problems
) -> PredictionSettings | None:
    if model is None:
        return None
    before = len(problems.items)
    settings = PredictionSettings(
        model=ModelKind(model.model),
        **given(season=model.season, step=model.step, window=model.window,
                horizon=model.horizon, forecast_only=model.forecast_only,
                max_error_percent=model.max_error_percent),
        smoothing=None if model.smoothing is None else Smoothing(
            level=model.smoothing.level, trend=model.smoothing.trend,
            seasonal=model.smoothing.seasonal),
    )
    _check_steps(settings, model, loc, problems)
    if model.smoothing is not None and settings.model is not ModelKind.HOLT_WINTERS:
        problems.add((*loc, "smoothing"), "is for model \"holtWinters\" only")
    if model.window is not None and settings.model is not ModelKind.LINEAR_TREND:
        problems.add((*loc, "window"), "is for model \"linearTrend\" only")
    return settings if len(problems.items) == before else None


def _check_steps(settings: PredictionSettings, model: PredictionModel, loc: Loc,
                 problems: Problems) -> None:
    step = settings.step
    for key, length in (("season", settings.season), ("window", settings.window)):
        if key == "window" and settings.model is not ModelKind.LINEAR_TREND:
            continue
        steps = length / step
        where = (*loc, key if getattr(model, key) is not None else "step")
        if abs(steps - round(steps)) > 1e-9:
            problems.add(where, f"the {key} ({format_duration(length)}) must be a whole number "
                         f"of steps ({format_duration(step)})")
        elif round(steps) < 2:
            problems.add(where, f"the {key} ({format_duration(length)}) must be at least two "
                         f"steps ({format_duration(step)})")
        elif round(steps) > MAX_BUCKETS:
            problems.add(where, f"the {key} ({format_duration(length)}) must be at most "
                         f"{MAX_BUCKETS} steps ({format_duration(step)}); use a longer step")
