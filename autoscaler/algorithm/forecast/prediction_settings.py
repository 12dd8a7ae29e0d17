"""What a user asks of one metric's prediction (``prediction`` in its ``metrics`` entry).

Off unless configured; once configured, ``forecast_only`` (the default) computes and shows
the forecast and what it would have changed without acting on it.
"""

from __future__ import annotations

from enum import StrEnum

from autoscaler.record import record

DAY = 86_400.0
DEFAULT_STEP = 300.0
"""Bucket width: a week of 5-minute buckets is 2,016 numbers per metric in the state."""
DEFAULT_HORIZON = 60.0
"""When no pod tells how long a scale-up takes to be Ready (a target at 0, a fresh one)."""
KEPT_SEASONS = 3
"""History kept per metric: one season to learn the shape, one to score the model, one
spare so a restart or failover keeps a scored model."""


class ModelKind(StrEnum):
    SEASONAL_NAIVE = "seasonalNaive"
    """The value one season ago."""
    LINEAR_TREND = "linearTrend"
    """A least-squares line through the last ``window``."""
    HOLT_WINTERS = "holtWinters"
    """Additive level, trend and season (triple exponential smoothing)."""


@record
class Smoothing:
    """Holt-Winters' smoothing parameters (statsmodels' names); fitted when not given."""

    level: float
    trend: float
    seasonal: float


@record
class PredictionSettings:
    model: ModelKind
    season: float = DAY
    step: float = DEFAULT_STEP
    window: float = 3600.0
    """The linear trend's fitting window."""
    horizon: float | None = None
    """Seconds ahead to forecast; ``None``: the target's observed scale-up-to-Ready time."""
    forecast_only: bool = True
    max_error_percent: float = 20.0
    """A model whose recent error (WAPE over the last season, at the horizon) is above this
    is not used."""
    smoothing: Smoothing | None = None

    @property
    def season_buckets(self) -> int:
        return max(1, round(self.season / self.step))

    @property
    def window_buckets(self) -> int:
        return max(2, round(self.window / self.step))

    @property
    def kept_buckets(self) -> int:
        """Closed buckets kept: ``KEPT_SEASONS`` seasons (the linear trend: its window, x2)."""
        if self.model is ModelKind.LINEAR_TREND:
            return max(2 * self.window_buckets, self.season_buckets)
        return KEPT_SEASONS * self.season_buckets
