"""One metric's model between passes: fed each closed bucket once, scored as it goes.

A ``Forecaster`` is a memo over the metric's ``Series`` (the persisted truth): each call
feeds it the buckets closed since the last call, or rebuilds it from the whole series when
the series changed otherwise (a restart, a backfill, a trimmed start). Holt-Winters without
given smoothing parameters is refitted on the kept history once per season.

Scoring: every forecast made for the bucket ``h`` steps ahead (``h`` from the horizon) is
compared with what that bucket turned out to be; the error is the WAPE (sum of absolute
errors over sum of actual values, in percent; running sums) of the last season of such
forecasts. WAPE, not MAPE: a night at nearly zero load would make every percentage error
explode. A model is
*usable* once a whole season of its forecasts has been scored and its error is within the
bound; until then the metric is purely reactive.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Final

from autoscaler.algorithm.forecast.models import (
    HoltWinters,
    LinearTrend,
    OnlineModel,
    SeasonalNaive,
    fit_smoothing,
)
from autoscaler.algorithm.forecast.prediction_settings import (
    ModelKind,
    PredictionSettings,
    Smoothing,
)
from autoscaler.algorithm.forecast.series import Series, filled
from autoscaler.record import seal_values

START_SMOOTHING = Smoothing(level=0.3, trend=0.01, seasonal=0.3)
"""Holt-Winters' parameters until two seasons are there to fit them on."""


@dataclass(init=False, slots=True, unsafe_hash=True)
class Forecast:
    """A metric's forecast for one instant, and whether it may be used."""

    value: Final[float | None]
    error_percent: Final[float | None]
    """WAPE of the last season's forecasts at this horizon; ``None`` until one was scored."""
    usable: Final[bool]
    reason: Final[str]
    """Why it is not usable (``""`` when it is)."""
    unreliable: Final[bool]
    """Scored over a whole season, and its error is above the bound: the model is dropped."""
    smoothing: Final[Smoothing | None]

    def __init__(
        self,
        *,
        value: float | None,
        error_percent: float | None,
        usable: bool,
        reason: str,
        unreliable: bool = False,
        smoothing: Smoothing | None = None,
    ) -> None:
        self.value = value
        self.error_percent = error_percent
        self.usable = usable
        self.reason = reason
        self.unreliable = unreliable
        self.smoothing = smoothing


class Forecaster:
    def __init__(self, settings: PredictionSettings) -> None:
        self.settings = settings
        self._season = settings.season_buckets  # (read every pass)
        self._reset(Series(step=settings.step), smoothing=settings.smoothing)

    def _reset(self, series: Series, *, smoothing: Smoothing | None) -> None:
        s = self.settings
        self._first = series.first
        self._raw: tuple[float | None, ...] = ()
        self._smoothing = smoothing or START_SMOOTHING
        self._fed = 0
        self._refit_at = 2 * s.season_buckets
        self._model = self._new_model()
        self._recent: deque[float] = deque(maxlen=max(s.season_buckets, s.window_buckets))
        self._pending: dict[int, float] = {}
        self._scored: deque[tuple[float, float]] = deque(maxlen=s.season_buckets)
        self._sums = [0.0, 0.0]  # running sums of _scored's errors and actual values
        self._last: float | None = None
        self._judged: tuple[float | None, str, bool, Smoothing | None] | None = None

    def _new_model(self) -> OnlineModel:
        s = self.settings
        if s.model is ModelKind.SEASONAL_NAIVE:
            return SeasonalNaive(s.season_buckets)
        if s.model is ModelKind.LINEAR_TREND:
            return LinearTrend(s.window_buckets)
        return HoltWinters(s.season_buckets, self._smoothing, init_seasons=1)

    def forecast(self, series: Series, *, now: float, horizon: float) -> Forecast:
        """The metric's total at ``now + horizon``, from ``series``' closed buckets."""
        ahead = max(1, math.ceil(horizon / self.settings.step))
        self._catch_up(series, ahead)
        value = self._at(series, now + horizon)
        return self._judge(value)

    # --- feeding ----------------------------------------------------------------------

    def _catch_up(self, series: Series, ahead: int) -> None:
        if series.values is self._raw and series.first == self._first:
            return  # no bucket closed since the last pass (most passes)
        end = self._first + len(self._raw)
        offset = series.first - self._first
        extends = 0 <= offset <= len(self._raw) and series.end >= end and \
            series.values[:end - series.first] == self._raw[offset:]
        if not extends:
            self._reset(series, smoothing=self.settings.smoothing)
            end = series.first
        new = series.values[end - series.first:]
        self._first, self._raw = series.first, series.values
        for index, value in enumerate(new, start=end):
            self._feed(index, value, ahead)
        if self._due_refit():
            self._refit(series, ahead)

    def _feed(self, index: int, value: float | None, ahead: int) -> None:
        real = value is not None
        if value is None:  # the same rule as ``filled``: a season back, else the last value
            m = self._season
            value = self._recent[-m] if len(self._recent) >= m else self._last
            if value is None:
                return  # nothing to fill a leading gap from
        predicted = self._pending.pop(index, None)
        if real and predicted is not None:
            self._score(abs(value - predicted), abs(value))
        self._model.update(value)
        self._recent.append(value)
        self._last = value
        self._fed += 1
        made = self._model.forecast(ahead)
        if made is not None:
            self._pending[index + ahead] = made
        for stale in [k for k in self._pending if k <= index]:
            del self._pending[stale]

    def _score(self, error: float, actual: float) -> None:
        scored, sums = self._scored, self._sums
        if len(scored) == scored.maxlen:
            old_error, old_actual = scored[0]
            sums[0] -= old_error
            sums[1] -= old_actual
        scored.append((error, actual))
        sums[0] += error
        sums[1] += actual
        self._judged = None

    def _due_refit(self) -> bool:
        return (self.settings.model is ModelKind.HOLT_WINTERS
                and self.settings.smoothing is None and self._fed >= self._refit_at)

    def _refit(self, series: Series, ahead: int) -> None:
        """Fit on the kept history and replay it with the fitted parameters (the scores
        then come from the same parameters as the forecasts that follow)."""
        values = filled(series.values, self.settings.season_buckets)
        smoothing = fit_smoothing(values, self.settings.season_buckets)
        self._reset(series, smoothing=smoothing)
        self._refit_at = self._fed_after_replay(series, ahead) + self.settings.season_buckets

    def _fed_after_replay(self, series: Series, ahead: int) -> int:
        self._first, self._raw = series.first, series.values
        for index, value in enumerate(series.values, start=series.first):
            self._feed(index, value, ahead)
        return self._fed

    # --- reading ------------------------------------------------------------------------

    def _at(self, series: Series, at: float) -> float | None:
        """Linear between bucket centres; 0 steps ahead is the last closed bucket."""
        if self._last is None:
            return None
        ahead = at / series.step - 0.5 - (series.end - 1)
        low = max(0, math.floor(ahead))
        share = min(1.0, max(0.0, ahead - low))
        a = self._last if low == 0 else self._model.forecast(low)
        b = self._model.forecast(low + 1)
        if a is None or b is None:
            return None
        return max(0.0, a + (b - a) * share)

    def _judge(self, value: float | None) -> Forecast:
        # The verdict changes only when a forecast is scored or the model reset (a bucket
        # closed), not with each pass's value: judged once per bucket.
        judged = self._judged
        if judged is None:
            judged = self._judged = self._verdict()
        error, reason, unreliable, smoothing = judged
        if value is None:
            reason = "not enough history to forecast yet"
        return Forecast(value=value, error_percent=error, usable=not reason, reason=reason,
                        unreliable=unreliable, smoothing=smoothing)

    def _verdict(self) -> tuple[float | None, str, bool, Smoothing | None]:
        """The error, why a forecast is not usable (a value given), whether the model is
        unreliable, and its smoothing."""
        s = self.settings
        error = 100 * self._sums[0] / self._sums[1] if self._scored and self._sums[1] > 0 \
            else None
        smoothing = self._smoothing if s.model is ModelKind.HOLT_WINTERS else None
        if len(self._scored) < self._season:
            reason = (f"learning: {len(self._scored)} of {self._season} forecasts "
                      "scored (a season)")
        elif error is None:
            reason = "error undefined: no load in the last season"
        elif error > s.max_error_percent:
            reason = f"error {error:.1f}% is above the bound of {s.max_error_percent:g}%"
        else:
            reason = ""
        unreliable = error is not None and error > s.max_error_percent and \
            len(self._scored) >= self._season
        return error, reason, unreliable, smoothing


seal_values(globals())
