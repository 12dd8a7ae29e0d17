"""What a decision shows of prediction: per metric, the forecast and whether it was used;
for the target, what the live metrics alone asked for and whether the forecast changed it.

``plan --explain``, ``/status``, the status command and ``/metrics`` render these.
"""

from __future__ import annotations

from autoscaler.record import record


@record
class MetricForecast:
    model: str
    horizon: float
    """Seconds ahead of the pass the forecast is for."""
    value: float | None
    """The metric's forecast total (base units: cores, requests/s, the object's value)."""
    live: float | None
    """The metric's total read this pass (``None``: invalid, and so no forecast is used)."""
    error_percent: float | None
    """The model's recent error (WAPE over the last season, at this horizon)."""
    used: bool
    """The forecast went through the HPA math this pass (usable, and the live value valid)."""
    reason: str = ""
    """Why it was not used."""
    proposal: int | None = None
    """The replicas this metric proposed with the forecast (``None``: not used)."""


@record
class ForecastReport:
    acting: bool
    """False in ``forecastOnly``: shown, not acted on."""
    reactive_replicas: int
    """The desired count from the live metrics alone."""
    predictive_replicas: int
    """The desired count with the forecasts combined (what acting would do)."""
    metrics: tuple[MetricForecast | None, ...] = ()
    """Aligned with ``spec.metrics``; ``None`` for a metric without prediction."""

    @property
    def changed(self) -> bool:
        """The forecast changed the result (or would have, in forecastOnly)."""
        return self.predictive_replicas != self.reactive_replicas
