"""The models against known series, and Holt-Winters against statsmodels."""

from __future__ import annotations

import math
import random

import pytest

from autoscaler.algorithm.forecast.models import (
    HoltWinters,
    LinearTrend,
    OnlineModel,
    SeasonalNaive,
    fit_smoothing,
    initial_states,
    sse,
)
from autoscaler.algorithm.forecast.prediction_settings import Smoothing

np = pytest.importorskip("numpy")
holtwinters = pytest.importorskip("statsmodels.tsa.holtwinters")
initialization = pytest.importorskip("statsmodels.tsa.exponential_smoothing.initialization")

M = 48
SMOOTHING = Smoothing(level=0.3, trend=0.05, seasonal=0.2)


def seasonal(n: int, *, noise: float = 0.0, slope: float = 0.0, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [100 + 30 * math.sin(2 * math.pi * i / M) + 15 * (i % M > M * 3 // 4)
            + slope * i + rng.gauss(0, noise) for i in range(n)]


def statsmodels_fit(values: list[float], **fit: object) -> object:
    """statsmodels' ExponentialSmoothing, its initial states from its own "simple" method."""
    level, trend, season = initialization._initialization_simple(
        np.array(values), trend="add", seasonal="add", seasonal_periods=M)
    model = holtwinters.ExponentialSmoothing(
        np.array(values), trend="add", seasonal="add", seasonal_periods=M,
        initialization_method="known", initial_level=level, initial_trend=trend,
        initial_seasonal=season)
    return model.fit(**fit)


def fed(model: OnlineModel, values: list[float]) -> OnlineModel:
    for value in values:
        model.update(value)
    return model


def test_initial_states_are_statsmodels_simple_initialization() -> None:
    """Level, trend and season start where statsmodels' "simple" method puts them."""
    values = seasonal(4 * M, noise=2, slope=0.1)
    level, trend, season = initialization._initialization_simple(
        np.array(values), trend="add", seasonal="add", seasonal_periods=M)
    ours = initial_states(values, M)
    assert ours[0] == pytest.approx(level)
    assert ours[1] == pytest.approx(trend)
    assert ours[2] == pytest.approx(list(season))


def test_holt_winters_forecasts_as_statsmodels_does() -> None:
    """Given the same smoothing parameters, forecasts and the loss equal statsmodels'.

    Except exactly one season ahead: there the textbook forecast (Hyndman and Athanasopoulos,
    8.3) uses the season updated at the last step, statsmodels the one before it."""
    values = seasonal(4 * M, noise=2, slope=0.1)
    theirs = statsmodels_fit(values, smoothing_level=0.3, smoothing_trend=0.05,
                             smoothing_seasonal=0.2, optimized=False)
    expected = list(theirs.forecast(2 * M - 1))  # type: ignore[attr-defined]
    model = fed(HoltWinters(M, SMOOTHING, init_seasons=2), values)
    horizons = [h for h in range(1, 2 * M) if h != M]
    assert [model.forecast(h) for h in horizons] == pytest.approx(
        [expected[h - 1] for h in horizons], rel=1e-9)
    assert sse(values, M, SMOOTHING) == pytest.approx(theirs.sse, rel=1e-9)  # type: ignore[attr-defined]


def test_fitted_smoothing_is_as_good_as_statsmodels() -> None:
    """The fit finds a loss within 0.1 % of statsmodels' optimiser on the same data."""
    values = seasonal(4 * M, noise=3, slope=0.05, seed=7)
    theirs = statsmodels_fit(values)
    fitted = fit_smoothing(values, M)
    assert sse(values, M, fitted) <= theirs.sse * 1.001  # type: ignore[attr-defined]


@pytest.mark.parametrize("model", [SeasonalNaive(M), HoltWinters(M, SMOOTHING, init_seasons=1)],
                         ids=["seasonal-naive", "holt-winters"])
def test_a_pure_seasonal_series_is_forecast_after_one_season(model: OnlineModel) -> None:
    """After one season of a repeating shape (and a second to settle), the next season is
    forecast within 1 % at every step."""
    fed(model, seasonal(2 * M))
    truth = seasonal(3 * M)[2 * M:]
    for h, expected in enumerate(truth, start=1):
        assert model.forecast(h) == pytest.approx(expected, rel=0.01)


def test_a_linear_ramp_is_forecast_exactly() -> None:
    """A straight line continues exactly."""
    model = fed(LinearTrend(12), [5.0 + 2.5 * i for i in range(30)])
    assert [model.forecast(h) for h in (1, 10)] == pytest.approx([5 + 2.5 * 30, 5 + 2.5 * 39])


@pytest.mark.parametrize(("model", "needs"), [
    (SeasonalNaive(M), M), (LinearTrend(12), 12), (HoltWinters(M, SMOOTHING, init_seasons=1), M),
], ids=["seasonal-naive", "linear-trend", "holt-winters"])
def test_no_forecast_before_enough_history(model: OnlineModel, needs: int) -> None:
    """A model says nothing until it has seen what it needs."""
    fed(model, seasonal(needs - 1))
    assert model.forecast(1) is None
    model.update(1.0)
    assert model.forecast(1) is not None


@pytest.mark.parametrize("smoothing", [SMOOTHING, Smoothing(level=1.0, trend=0.0, seasonal=0.9),
                                       Smoothing(level=0.05, trend=0.4, seasonal=0.0)],
                         ids=["usual", "edges", "slow-level"])
def test_the_fit_loss_is_the_models_own_errors_to_the_last_bit(smoothing: Smoothing) -> None:
    """``sse`` (unrolled for speed) is exactly the sum of the model's squared one-step
    errors: not merely close, so a refit chooses what it chose before."""
    values = seasonal(3 * M, noise=4.0, slope=0.2)
    errors = HoltWinters(M, smoothing).errors(values)
    assert sse(values, M, smoothing) == sum(e * e for e in errors)
