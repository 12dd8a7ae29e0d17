"""Guard rails: too little history is reactive; a bad model is dropped and said so."""

from __future__ import annotations

import math
import random

import pytest

from autoscaler.algorithm.forecast import (
    Forecaster,
    ModelKind,
    PredictionSettings,
    Series,
    TargetPredictor,
    observe,
)
from tests.algorithm.builders import pod, pods_spec

STEP, SEASON = 60.0, 3600.0  # an hour of minutes: a season is 60 buckets


def settings(model: ModelKind = ModelKind.SEASONAL_NAIVE) -> PredictionSettings:
    return PredictionSettings(model=model, season=SEASON, step=STEP, horizon=60.0,
                              max_error_percent=20.0)


def fill(values: list[float]) -> Series:
    series = Series(step=STEP)
    for minute, value in enumerate(values):
        series = observe(series, at=minute * STEP, value=value, keep=1000)
    return series


def hourly(minutes: int) -> list[float]:
    return [100 + 50 * math.sin(2 * math.pi * m / 60) for m in range(minutes)]


@pytest.mark.parametrize(("minutes", "usable"), [(30, False), (90, False), (140, True)],
                         ids=["half-a-season", "learning", "scored-a-season"])
def test_a_model_is_used_only_after_a_season_of_scored_forecasts(minutes: int,
                                                                 usable: bool) -> None:
    """Until a whole season of forecasts was scored the metric is purely reactive."""
    forecast = Forecaster(settings()).forecast(fill(hourly(minutes)), now=minutes * STEP,
                                               horizon=60.0)
    assert forecast.usable is usable
    assert forecast.usable or forecast.reason


@pytest.mark.parametrize("model", list(ModelKind), ids=str)
def test_a_noisy_series_is_dropped_and_said_so(model: ModelKind) -> None:
    """Noise with no season gives a large error: the model is unreliable, with the figure."""
    rng = random.Random(3)
    forecast = Forecaster(settings(model)).forecast(
        fill([100 * rng.random() ** 3 + 1 for _ in range(200)]), now=200 * STEP, horizon=60.0)
    assert not forecast.usable
    assert forecast.unreliable
    assert "above the bound of 20%" in forecast.reason


def test_a_seasonal_series_is_forecast_within_its_bound() -> None:
    """A clean season gives a small error and a forecast one horizon ahead."""
    forecast = Forecaster(settings(ModelKind.HOLT_WINTERS)).forecast(
        fill(hourly(180)), now=180 * STEP, horizon=120.0)
    assert forecast.usable
    assert forecast.error_percent is not None
    assert forecast.error_percent < 2
    # 2 minutes after minute 180 is halfway between the centres of buckets 181 and 182.
    assert forecast.value == pytest.approx(sum(hourly(183)[181:183]) / 2, rel=0.01)


def test_the_predictor_records_only_valid_readings() -> None:
    """An invalid reading leaves a gap, never a zero, in the persisted series."""
    from autoscaler.algorithm import MetricUnavailable, PodMetricValues
    from tests.algorithm.builders import pod_samples

    predictor = TargetPredictor([pods_spec(100_000)], [settings()])
    pods = [pod("a", start=0.0, transition=30.0)]
    predictor.predict(metrics=[PodMetricValues(samples=pod_samples(5_000))], pods=pods, now=0.0)
    predictor.predict(metrics=[MetricUnavailable(reason="x")], pods=pods, now=60.0)
    predictor.predict(metrics=[PodMetricValues(samples=pod_samples(7_000))], pods=pods,
                      now=120.0)
    series, = predictor.series.values()
    assert series.values == (5.0, None)
    assert predictor.startup == 30.0


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan], ids=str)
def test_a_reading_that_is_not_finite_is_left_out(value: float) -> None:
    """A total that overflowed (or NaN) is no reading: the series is unchanged, so what is
    persisted always decodes (a state holding an infinity is set aside)."""
    series = fill([100.0, 110.0])
    assert observe(series, at=2 * STEP, value=value, keep=1000) == series


def test_a_gap_longer_than_what_is_kept_costs_only_what_is_kept() -> None:
    """A reading a trillion buckets after the last (a restored series from a bad clock)
    keeps ``keep`` empty buckets, as trimming would, without making the trillion first
    (which no memory holds)."""
    series = fill([100.0, 110.0])
    later = observe(series, at=1e12 * STEP, value=5.0, keep=10)
    assert later.values == (None,) * 10
    assert (later.first, later.open_index) == (10**12 - 10, 10**12)
    near = observe(series, at=5 * STEP, value=5.0, keep=10)
    assert near.values == (100.0, 110.0, None, None, None)
