"""What one decision reads and returns: ``DecisionInput``, ``Decision`` and what it carries
(its conditions, the bounds it clamped to, the window that held it, the limit that cut it,
what a later scale-down must get past, and prediction's report).

Native value types, as every value the core makes each pass (``autoscaler/record.py``); the
rules that make them are in ``decision``, ``explain`` and ``forecast``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from autoscaler.algorithm.model import (
    EMPTY_HISTORY,
    AlgorithmSettings,
    AutoscalerSpec,
    History,
    MetricValues,
    Pod,
    ScaleState,
    ScalingPolicy,
    Seconds,
    SelectPolicy,
)
from autoscaler.algorithm.reasons import ConditionType, Reason, Step
from autoscaler.algorithm.stage_values import MetricOutcome, Rules
from autoscaler.record import refuse_assignment, seal_values


@dataclass(init=False, slots=True, unsafe_hash=True)
class Condition:
    type: Final[ConditionType]
    status: Final[bool]
    reason: Final[Reason]
    message: Final[str]

    def __init__(self, *, type: ConditionType, status: bool, reason: Reason, message: str) -> None:
        self.type = type
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(init=False, slots=True, unsafe_hash=True)
class Bounds:
    """The replica bounds this pass clamps to (the spec's, or a schedule's override)."""

    min_replicas: Final[int]
    max_replicas: Final[int]
    gradual: Final[bool]
    """Move a count outside these bounds into them through stabilization and the rate limits
    (scheduled bounds), instead of upstream's jump straight to the bound."""

    def __init__(self, *, min_replicas: int, max_replicas: int, gradual: bool = False) -> None:
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.gradual = gradual


@dataclass(init=False, slots=True, unsafe_hash=True)
class WindowHold:
    """A stabilization window kept the count away from the metrics' proposal."""

    reason: Final[Reason]
    """``ScaleDownStabilized`` or ``ScaleUpStabilized``."""
    window_seconds: Final[Seconds]
    held_at: Final[int]
    """The count the window allowed (the highest, or lowest, recommendation in it)."""
    releases_at: Final[Seconds | None]
    """When the window stops holding ``held_at``: the last recommendation that holds it
    leaves the window (``window_release``), and the count moves towards the proposal."""

    def __init__(
        self,
        *,
        reason: Reason,
        window_seconds: Seconds,
        held_at: int,
        releases_at: Seconds | None,
    ) -> None:
        self.reason = reason
        self.window_seconds = window_seconds
        self.held_at = held_at
        self.releases_at = releases_at


@dataclass(init=False, slots=True, unsafe_hash=True)
class StepLimit:
    """A rate limit or a bound cut the step from the stabilized count to ``limit``."""

    reason: Final[Reason]
    """``ScaleUpLimit``/``ScaleDownLimit`` (a rate) or ``TooManyReplicas``/``TooFewReplicas``."""
    limit: Final[int]
    policy: Final[ScalingPolicy | None]
    """The ``behavior`` policy whose limit was selected; ``None`` for upstream's default
    scale-up rate (max(2 x current, 4), no behavior), a disabled direction or a bound."""
    select_policy: Final[SelectPolicy | None]
    """How the policies were combined (``None`` without behavior)."""
    next_step_at: Final[Seconds | None]
    """When the policies allow going past ``limit`` once this step is made; ``None``: at
    the next pass (the default rate), or not by waiting (a bound, a disabled direction)."""

    def __init__(
        self,
        *,
        reason: Reason,
        limit: int,
        policy: ScalingPolicy | None = None,
        select_policy: SelectPolicy | None = None,
        next_step_at: Seconds | None = None,
    ) -> None:
        self.reason = reason
        self.limit = limit
        self.policy = policy
        self.select_policy = select_policy
        self.next_step_at = next_step_at


@dataclass(init=False, slots=True, unsafe_hash=True)
class ScaleDownRules:
    """What a future scale-down must get past: the window, and the policies (``None``:
    no rate limit on scale-down, as without behavior)."""

    window_seconds: Final[Seconds]
    rules: Final[Rules | None]

    def __init__(self, *, window_seconds: Seconds, rules: Rules | None) -> None:
        self.window_seconds = window_seconds
        self.rules = rules


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


@dataclass(init=False, slots=True, unsafe_hash=True)
class Decision:
    current_replicas: Final[int]
    desired_replicas: Final[int]
    proposal: Final[int | None]
    """The metrics' combined proposal before normalization; ``None`` if none was made."""
    stabilized: Final[int | None]
    """The proposal after the stabilization windows, before rate limits and bounds."""
    rescale_reason: Final[str]
    """Upstream's SuccessfulRescale reason text ("cpu resource utilization ... above target")."""
    conditions: Final[tuple[Condition, ...]]
    metrics: Final[tuple[MetricOutcome, ...]]
    steps: Final[tuple[Step, ...]]
    history: Final[History]
    error: Final[str | None]
    """The pass's error (the first invalid metric), also set when scaling went ahead."""
    forecast: Final[ForecastReport | None]
    """Set on targets with a ``prediction`` (``autoscaler.algorithm.forecast``)."""
    proposed_by: str = field(compare=False)
    """Which metric's proposal won ("pods metric rps"), or "scheduled minReplicas"."""
    decided_at: Seconds | None = field(compare=False)
    """The ``now`` this decision was made at."""
    bounds: Bounds | None = field(compare=False)
    """The bounds this pass clamped to (the spec's, or an active schedule's)."""
    hold: WindowHold | None = field(compare=False)
    """The stabilization window that held the proposal back, and when it lets go."""
    limit: StepLimit | None = field(compare=False)
    """The rate limit or bound that cut the step, and when the next step is allowed."""
    scale_down: ScaleDownRules | None = field(compare=False)
    """What a later scale-down must get past (``explain.decision_scale_down``)."""

    def __init__(
        self,
        *,
        current_replicas: int,
        desired_replicas: int,
        proposal: int | None = None,
        stabilized: int | None = None,
        rescale_reason: str = "",
        conditions: tuple[Condition, ...] = (),
        metrics: tuple[MetricOutcome, ...] = (),
        steps: tuple[Step, ...] = (),
        history: History = EMPTY_HISTORY,
        error: str | None = None,
        forecast: ForecastReport | None = None,
        proposed_by: str = "",
        decided_at: Seconds | None = None,
        bounds: Bounds | None = None,
        hold: WindowHold | None = None,
        limit: StepLimit | None = None,
        scale_down: ScaleDownRules | None = None,
    ) -> None:
        self.current_replicas = current_replicas
        self.desired_replicas = desired_replicas
        self.proposal = proposal
        self.stabilized = stabilized
        self.rescale_reason = rescale_reason
        self.conditions = conditions
        self.metrics = metrics
        self.steps = steps
        self.history = history
        self.error = error
        self.forecast = forecast
        self.proposed_by = proposed_by
        self.decided_at = decided_at
        self.bounds = bounds
        self.hold = hold
        self.limit = limit
        self.scale_down = scale_down

    @property
    def rescale(self) -> bool:
        return self.desired_replicas != self.current_replicas

    @property
    def all_metrics_invalid(self) -> bool:
        """Every metric was evaluated and none gave a proposal (the fallback counts these
        passes); false when no metric was evaluated at all (replica bounds, disabled)."""
        return bool(self.metrics) and all(m.proposal is None for m in self.metrics)

    def condition(self, type_: ConditionType) -> Condition | None:
        return next((c for c in self.conditions if c.type is type_), None)

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


DEFAULT_SETTINGS = AlgorithmSettings()
"""Upstream's controller-wide defaults (immutable: one instance serves every default)."""


@dataclass(init=False, slots=True, unsafe_hash=True)
class DecisionInput:
    """What one decision for one target reads: upstream's ``reconcileAutoscaler`` inputs,
    without its I/O. Every way of deciding (``decide``, ``decide_staged``, prediction's,
    scale to zero's) takes this one value."""

    spec: Final[AutoscalerSpec]
    scale: Final[ScaleState]
    metrics: Final[Sequence[MetricValues]]
    """One per ``spec.metrics``, in its order."""
    pods: Final[Sequence[Pod]]
    """The target's pods; a ``PodView`` (``algorithm.pods``) computes its groupings once."""
    history: Final[History]
    now: Final[Seconds]
    settings: Final[AlgorithmSettings]
    bounds: Final[Bounds | None]
    """Replaces the spec's min/max for this pass (schedules); ``None``: the spec's."""

    def __init__(
        self, *, spec: AutoscalerSpec, scale: ScaleState, metrics: Sequence[MetricValues],
        pods: Sequence[Pod], history: History, now: Seconds,
        settings: AlgorithmSettings = DEFAULT_SETTINGS, bounds: Bounds | None = None,
    ) -> None:
        self.spec = spec
        self.scale = scale
        self.metrics = metrics
        self.pods = pods
        self.history = history
        self.now = now
        self.settings = settings
        self.bounds = bounds

    # Changed copies, built directly: ``dataclasses.replace`` runs as interpreted code, which
    # the compiled core would pay every pass (predictive scaling decides twice a pass).
    def with_metrics(self, metrics: Sequence[MetricValues]) -> DecisionInput:
        return DecisionInput(spec=self.spec, scale=self.scale, metrics=metrics, pods=self.pods,
                             history=self.history, now=self.now, settings=self.settings,
                             bounds=self.bounds)

    def with_pods(self, pods: Sequence[Pod]) -> DecisionInput:
        return DecisionInput(spec=self.spec, scale=self.scale, metrics=self.metrics, pods=pods,
                             history=self.history, now=self.now, settings=self.settings,
                             bounds=self.bounds)

    def with_bounds(self, bounds: Bounds | None) -> DecisionInput:
        return DecisionInput(spec=self.spec, scale=self.scale, metrics=self.metrics,
                             pods=self.pods, history=self.history, now=self.now,
                             settings=self.settings, bounds=bounds)


seal_values(globals())
