"""The forecasting models, each an online model over evenly spaced values.

``update(y)`` takes the next value; ``forecast(h)`` is the value ``h`` steps after the last
one (``None`` until the model has seen enough). Pure Python on purpose: the daemon's install
stays lean (statsmodels would pull in scipy, pandas and patsy, ~270 MB); the tests check the
Holt-Winters recursion and fit against statsmodels' ``ExponentialSmoothing``.

- Seasonal naive: the value one season before the forecast time.
- Linear trend: a least-squares line through the last ``window`` values.
- Holt-Winters, additive trend and season (Hyndman and Athanasopoulos, *Forecasting:
  principles and practice*, 8.3), initialised as statsmodels' ``initialization_method=
  "simple"``: level the first season's mean, trend the mean season-over-season change per
  step (0 with only one season), season the first season less that level.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from autoscaler.algorithm.forecast.prediction_settings import Smoothing


class OnlineModel(Protocol):
    def update(self, y: float) -> None: ...

    def forecast(self, h: int) -> float | None: ...


class SeasonalNaive:
    def __init__(self, season: int) -> None:
        self._season = season
        self._last: deque[float] = deque(maxlen=season)

    def update(self, y: float) -> None:
        self._last.append(y)

    def forecast(self, h: int) -> float | None:
        m = self._season
        if len(self._last) < m:
            return None
        # y[n + h - m*k] for the smallest k that lands inside the last season.
        return self._last[(h - 1) % m]


class LinearTrend:
    def __init__(self, window: int) -> None:
        self._last: deque[float] = deque(maxlen=max(2, window))

    def update(self, y: float) -> None:
        self._last.append(y)

    def forecast(self, h: int) -> float | None:
        n = len(self._last)
        if n < self._last.maxlen:  # type: ignore[operator]  # set in __init__
            return None
        mean_x = (n - 1) / 2
        mean_y = sum(self._last) / n
        spread = sum((x - mean_x) ** 2 for x in range(n))
        slope = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(self._last)) / spread
        return mean_y + slope * (n - 1 + h - mean_x)


class HoltWinters:
    """Additive Holt-Winters; buffers one (or two) seasons before its first forecast."""

    def __init__(self, season: int, smoothing: Smoothing, *, init_seasons: int = 2) -> None:
        self._m = season
        self._a, self._b, self._g = smoothing.level, smoothing.trend, smoothing.seasonal
        self._init = max(1, init_seasons) * season
        self._buffer: list[float] = []
        self._level = self._trend = 0.0
        self._seasons: list[float] = []
        self._at = 0  # index into _seasons of the next value's season
        self.ready = False

    def update(self, y: float) -> None:
        if not self.ready:
            self._buffer.append(y)
            if len(self._buffer) == self._init:
                self._start()
            return
        self._step(y)

    def _start(self) -> None:
        # statsmodels runs the recursion over the data it took its initial states from.
        deque(self.errors(self._buffer), maxlen=0)

    def _step(self, y: float) -> float:
        """Take ``y``; return its one-step error (``y`` less the forecast made for it)."""
        a, b, g = self._a, self._b, self._g
        s = self._seasons[self._at]
        level, trend = self._level, self._trend
        self._level = a * (y - s) + (1 - a) * (level + trend)
        self._trend = b * (self._level - level) + (1 - b) * trend
        self._seasons[self._at] = g * (y - level - trend) + (1 - g) * s
        self._at = (self._at + 1) % self._m
        return y - (level + trend + s)

    def errors(self, values: Sequence[float]) -> Iterator[float]:
        """Start from ``values`` (at least one season) and yield each one-step error."""
        level, trend, seasons = initial_states(values, self._m)
        self._level, self._trend, self._seasons, self._at = level, trend, list(seasons), 0
        self.ready = True
        return map(self._step, values)

    def forecast(self, h: int) -> float | None:
        if not self.ready:
            return None
        return self._level + h * self._trend + self._seasons[(self._at + h - 1) % self._m]


def initial_states(values: Sequence[float], m: int) -> tuple[float, float, list[float]]:
    """statsmodels' "simple" initialization; with one season only, the trend starts at 0."""
    level = sum(values[:m]) / m
    trend = 0.0
    if len(values) >= 2 * m:
        trend = sum((values[m + i] - values[i]) / m for i in range(m)) / m
    return level, trend, [y - level for y in values[:m]]


def sse(values: Sequence[float], m: int, smoothing: Smoothing) -> float:
    """The sum of squared one-step errors of Holt-Winters over ``values``: the loss the fit
    minimises, as statsmodels' does.

    ``HoltWinters._step`` unrolled over local variables, the same arithmetic in the same
    order (so the same floats): the fit evaluates this ~80 times per refit over up to three
    seasons, and attribute access made it most of a refit's time. The loop walks the values
    a season at a time so the season index is the inner loop's own (no modulo per value)."""
    a, b, g = smoothing.level, smoothing.trend, smoothing.seasonal
    keep_a, keep_b, keep_g = 1 - a, 1 - b, 1 - g
    level, trend, seasons = initial_states(values, m)
    errors: list[float] = []
    square = errors.append
    for start in range(0, len(values), m):
        for at, y in enumerate(values[start:start + m]):
            s = seasons[at]
            both = level + trend
            new_level = a * (y - s) + keep_a * both
            seasons[at] = g * (y - level - trend) + keep_g * s
            trend = b * (new_level - level) + keep_b * trend
            level = new_level
            e = y - (both + s)
            square(e * e)
    return sum(errors)


def fit_smoothing(values: Sequence[float], m: int) -> Smoothing:
    """The smoothing parameters in [0, 1] with the least ``sse``: a coarse grid, then
    Nelder-Mead from its best point (~80 evaluations of the loss)."""
    def loss(point: Sequence[float]) -> float:
        a, b, g = (min(1.0, max(0.0, v)) for v in point)
        return sse(values, m, Smoothing(level=a, trend=b, seasonal=g))

    grid = [(a, b, g) for a in (0.1, 0.4, 0.8) for b in (0.0, 0.1) for g in (0.05, 0.3, 0.7)]
    start = min(grid, key=loss)
    best = nelder_mead(loss, start, scale=0.1, iterations=60)
    a, b, g = (min(1.0, max(0.0, v)) for v in best)
    return Smoothing(level=a, trend=b, seasonal=g)


def nelder_mead(
    loss: Callable[[Sequence[float]], float], start: Sequence[float], *, scale: float,
    iterations: int,
) -> list[float]:
    """The textbook simplex method (reflect 1, expand 2, contract 0.5, shrink 0.5)."""
    simplex = [list(start)] + [
        [v + (scale if i == j else 0.0) for j, v in enumerate(start)] for i in range(len(start))
    ]
    scored = sorted(((loss(p), p) for p in simplex), key=lambda pair: pair[0])
    for _ in range(iterations):
        worst_loss, worst = scored[-1]
        centroid = [sum(p[i] for _, p in scored[:-1]) / (len(scored) - 1)
                    for i in range(len(start))]

        def toward(factor: float, c: list[float] = centroid, w: list[float] = worst) -> list[float]:
            return [ci + factor * (ci - wi) for ci, wi in zip(c, w, strict=True)]

        reflected = toward(1.0)
        reflected_loss = loss(reflected)
        if reflected_loss < scored[0][0]:
            expanded = toward(2.0)
            expanded_loss = loss(expanded)
            scored[-1] = (expanded_loss, expanded) if expanded_loss < reflected_loss \
                else (reflected_loss, reflected)
        elif reflected_loss < scored[-2][0]:
            scored[-1] = (reflected_loss, reflected)
        else:
            contracted = toward(-0.5)
            contracted_loss = loss(contracted)
            if contracted_loss < worst_loss:
                scored[-1] = (contracted_loss, contracted)
            else:
                best = scored[0][1]
                scored = [scored[0]] + [
                    (loss(q), q) for q in
                    ([b + 0.5 * (v - b) for b, v in zip(best, p, strict=True)]
                     for _, p in scored[1:])]
        scored.sort(key=lambda pair: pair[0])
        if abs(scored[-1][0] - scored[0][0]) <= 1e-6 * (abs(scored[0][0]) + 1e-12):
            break
    return scored[0][1]
