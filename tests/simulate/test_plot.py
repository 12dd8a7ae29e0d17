"""The PNG: a valid image of the expected size that actually shows each run's series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from autoscaler.algorithm.forecast import ModelKind, PredictionSettings
from autoscaler.simulate.engine import Scenario, Timeline, simulate
from autoscaler.simulate.plot import (
    COLORS,
    DPI,
    FORECAST_HEIGHT,
    HEIGHT,
    TOTAL_COLOR,
    WIDTH,
    plot,
)
from autoscaler.simulate.workload import WorkloadModel
from tests.simulate.builders import PNG_SIGNATURE, cpu, pixels_of, rps, run, spec, trace

DAY = trace([(0, 100), (600, 900), (1800, 2500), (2400, 300), (3600, 300)])


def draw(tmp_path: Path, *timelines: Timeline) -> np.ndarray:
    path = tmp_path / "plot.png"
    plot(timelines, path)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    return np.asarray(mpimg.imread(path))


def test_single_run_is_a_valid_png_with_its_series(tmp_path: Path) -> None:
    """The image decodes at the documented size, is not blank, and draws the run in blue."""
    image = draw(tmp_path, run(spec(rps(100), cpu(60)), DAY, capacity=100))
    assert image.shape[:2] == (round(HEIGHT * DPI), round(WIDTH * DPI))
    assert image[..., :3].std() > 0.05
    assert pixels_of(image, COLORS[0]) > 500
    assert pixels_of(image, COLORS[1]) == 0


def test_compare_overlays_both_runs(tmp_path: Path) -> None:
    """With two runs both colors are drawn, each about as much as the other."""
    first = run(spec(rps(100)), DAY)
    second = run(spec(rps(50)), DAY)
    image = draw(tmp_path, first, second)
    blue, orange = pixels_of(image, COLORS[0]), pixels_of(image, COLORS[1])
    assert blue > 500
    assert orange > 500
    assert 0.2 < blue / orange < 5


def test_nothing_to_plot_is_an_error(tmp_path: Path) -> None:
    """No runs, no picture: a plain error instead of an empty file."""
    with pytest.raises(ValueError, match="nothing to plot"):
        plot([], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def predictive_run() -> Timeline:
    """Two hours of a demand with a ten-minute season, forecast by seasonal naive."""
    season = trace([(m * 60, 300 + 1200 * (m % 10 >= 5)) for m in range(120)])
    prediction = PredictionSettings(model=ModelKind.SEASONAL_NAIVE, season=600, step=60,
                                    horizon=60, forecast_only=False)
    scenario = Scenario(label="p", spec=spec(rps(100)), model=WorkloadModel(metric_window=15),
                        predictions=(prediction,))
    return simulate(scenario, season)


def test_a_predicted_metric_gets_a_panel_of_its_total_and_forecast(tmp_path: Path) -> None:
    """A run with a prediction is taller by one panel, where its forecast is drawn in the
    run's color over the metric's total in gray; a reactive run beside it draws none."""
    predictive, reactive = predictive_run(), run(spec(rps(100)), DAY)
    image = draw(tmp_path, predictive)
    height = round((HEIGHT + FORECAST_HEIGHT) * DPI)
    panel = image[round(HEIGHT * DPI * 0.97):]
    assert image.shape[:2] == (height, round(WIDTH * DPI))
    assert pixels_of(panel, COLORS[0]) > 300
    assert pixels_of(panel, TOTAL_COLOR) > 300
    assert draw(tmp_path, reactive).shape[0] == round(HEIGHT * DPI)
