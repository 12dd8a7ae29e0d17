"""What a decision shows of prediction: per metric, the forecast and whether it was used;
for the target, what the live metrics alone asked for and whether the forecast changed it.

``plan --explain``, ``/status``, the status command and ``/metrics`` render these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from autoscaler.record import seal_values


@dataclass(init=False, slots=True, unsafe_hash=True)
class MetricForecast:
    model: Final[str]
    horizon: Final[float]
    """Seconds ahead of the pass the forecast is for."""
    value: Final[float | None]
    """The metric's forecast total (base units: cores, requests/s, the object's value)."""
    live: Final[float | None]
    """The metric's total read this pass (``None``: invalid, and so no forecast is used)."""
    error_percent: Final[float | None]
    """The model's recent error (WAPE over the last season, at this horizon)."""
    used: Final[bool]
    """The forecast went through the HPA math this pass (usable, and the live value valid)."""
    reason: Final[str]
    """Why it was not used."""
    proposal: Final[int | None]
    """The replicas this metric proposed with the forecast (``None``: not used)."""

    def __init__(
        self,
        *,
        model: str,
        horizon: float,
        value: float | None,
        live: float | None,
        error_percent: float | None,
        used: bool,
        reason: str = "",
        proposal: int | None = None,
    ) -> None:
        self.model = model
        self.horizon = horizon
        self.value = value
        self.live = live
        self.error_percent = error_percent
        self.used = used
        self.reason = reason
        self.proposal = proposal


@dataclass(init=False, slots=True, unsafe_hash=True)
class ForecastReport:
    acting: Final[bool]
    """False in ``forecastOnly``: shown, not acted on."""
    reactive_replicas: Final[int]
    """The desired count from the live metrics alone."""
    predictive_replicas: Final[int]
    """The desired count with the forecasts combined (what acting would do)."""
    metrics: Final[tuple[MetricForecast | None, ...]]
    """Aligned with ``spec.metrics``; ``None`` for a metric without prediction."""

    def __init__(
        self,
        *,
        acting: bool,
        reactive_replicas: int,
        predictive_replicas: int,
        metrics: tuple[MetricForecast | None, ...] = (),
    ) -> None:
        self.acting = acting
        self.reactive_replicas = reactive_replicas
        self.predictive_replicas = predictive_replicas
        self.metrics = metrics

    @property
    def changed(self) -> bool:
        """The forecast changed the result (or would have, in forecastOnly)."""
        return self.predictive_replicas != self.reactive_replicas


seal_values(globals())
