"""The virtual-time loop: the daemon's reconcile pass, once per sync period, against a model.

Each step does what the daemon does for one target, with the same core: observe the pods and
the metrics, ``decide``, write the scale (here: tell the workload) and, after the write,
``record_scale_event``; the history carries over to the next step. Nothing else decides, so
what the simulation shows is what the daemon would do given the same observations.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from autoscaler.algorithm import (
    AlgorithmSettings,
    AutoscalerSpec,
    ConditionType,
    Decision,
    DecisionInput,
    History,
    MetricOutcome,
    MetricValues,
    Pod,
    ScaleState,
    decide,
    record_scale_event,
)
from autoscaler.algorithm.forecast import PredictionSettings, TargetPredictor, decide_predictive
from autoscaler.algorithm.model import DEFAULT_SYNC_PERIOD
from autoscaler.record import seal_values
from autoscaler.schedules import Schedule, bounds_at
from autoscaler.simulate.load import DEFAULT_WINDOW, MetricFeed
from autoscaler.simulate.rows import Counts, MetricLoad, MetricRow, Row
from autoscaler.simulate.simulation_error import SimulationError
from autoscaler.simulate.trace import DEMAND, Interpolation, Trace
from autoscaler.simulate.workload import Workload, WorkloadModel

NEVER = 2**31 - 1
"""A collection threshold that is never reached."""
YOUNG = 20_000
"""The youngest generation's threshold during a run: allocations between collections."""

Progress = Callable[[int, int], None]
"""Called with (steps done, steps in all) now and then during a run."""


DEFAULT_ORIGIN = datetime(2026, 1, 5, tzinfo=UTC).timestamp()
"""A Monday 00:00 UTC: where a trace with relative times starts, for its schedules."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One target's autoscaler configuration and the workload it scales."""

    label: str
    spec: AutoscalerSpec
    model: WorkloadModel
    settings: AlgorithmSettings = field(default_factory=AlgorithmSettings)
    sync_period: float = DEFAULT_SYNC_PERIOD
    windows: tuple[float, ...] = ()
    """Each metric's query window from the daemon's config, aligned with ``spec.metrics``."""
    schedules: tuple[Schedule, ...] = ()
    """The target's schedules, evaluated in the trace's own time."""
    origin: float = DEFAULT_ORIGIN
    """Unix time of the trace's start when the trace's times are relative."""
    predictions: tuple[PredictionSettings | None, ...] = ()
    """Each metric's ``prediction`` (aligned with ``spec.metrics``; empty: reactive only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    scenario: Scenario
    rows: tuple[Row, ...]
    origin: float | None = None
    """Unix time of the trace's start, when known."""


def simulate(
    scenario: Scenario,
    trace: Trace,
    *,
    interpolation: Interpolation = "step",
    progress: Progress | None = None,
) -> Timeline:
    """Run the scenario over the whole trace, one step per sync period from time 0."""
    sync = scenario.sync_period
    if sync <= 0:
        raise SimulationError(f"the sync period must be positive, got {sync}")
    model = _fit_container(scenario.model, scenario.spec)
    feeds = _feeds(scenario, model, trace)
    grid = [k * sync for k in range(int(trace.duration // sync) + 1)]
    demand = trace.on_grid(DEMAND, grid, interpolation) if DEMAND in trace.columns else None
    totals = [_totals(feed, trace, grid, demand, interpolation) for feed in feeds]
    target = _Target(scenario, model, feeds,
                     origin=trace.origin if trace.origin is not None else scenario.origin)
    rows: list[Row] = []
    every = max(len(grid) // 100, 1)
    with _collector_tuned():
        for k, now in enumerate(grid):
            step_demand = demand[k] if demand is not None else None
            rows.append(target.sync(now, demand=step_demand, totals=[t[k] for t in totals]))
            if progress is not None and (k % every == 0 or k == len(grid) - 1):
                progress(k + 1, len(grid))
    return Timeline(scenario=scenario, rows=tuple(rows), origin=trace.origin)


@contextmanager
def _collector_tuned() -> Iterator[None]:
    """The timeline only grows, and each full collection walks all of it again (~5 % of a
    week's run): none runs during the loop. A step's garbage dies young, so the young
    collections still free it; fewer of them (as the daemon does once settled) walk the
    young rows fewer times (~3 %)."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG), middle, NEVER)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)


class _Target:
    """What the daemon keeps for one target between passes (replicas, history), and its pods."""

    def __init__(
        self, scenario: Scenario, model: WorkloadModel, feeds: Sequence[MetricFeed], *,
        origin: float,
    ) -> None:
        self._origin = origin
        self._scenario = scenario
        self._feeds = feeds
        spec = scenario.spec
        self._replicas = model.replicas if model.replicas is not None else max(spec.min_replicas, 1)
        self._workload = Workload(model, prefix=scenario.label, replicas=self._replicas, now=0.0)
        self._history = History()
        self._predictor = TargetPredictor(
            spec.metrics, scenario.predictions, windows=[f.window for f in feeds],
        ) if any(scenario.predictions) else None

    def sync(self, now: float, *, demand: float | None, totals: Sequence[float | None]) -> Row:
        """One reconcile pass at ``now``: observe, decide, write the scale, record it."""
        spec, settings, workload = self._scenario.spec, self._scenario.settings, self._workload
        workload.advance(now)
        counts, pods = workload.observe(now)
        observed = [
            feed.observe(now=now, total=total, ready=counts.ready, pods=workload.reporting)
            for feed, total in zip(self._feeds, totals, strict=True)
        ]
        decision = self._decide(now, counts, pods, [values for values, _ in observed])
        self._history = decision.history
        if decision.rescale:
            # The write succeeds (the model cannot fail it); record it as the daemon does.
            workload.scale_to(decision.desired_replicas, now)
            self._history = record_scale_event(
                self._history, behavior=spec.behavior, previous=self._replicas,
                new=decision.desired_replicas, now=now, settings=settings,
            )
            self._replicas = decision.desired_replicas
        return _row(now, demand, counts, observed, decision)

    def _decide(self, now: float, counts: Counts, pods: Sequence[Pod],
                values: Sequence[MetricValues]) -> Decision:
        """The daemon's decision: with prediction, ``decide_predictive`` (as the daemon's
        ``runtime/prediction.py``), else plain ``decide``."""
        spec = self._scenario.spec
        scale = ScaleState(spec_replicas=self._replicas, status_replicas=counts.active)
        schedules = self._scenario.schedules
        bounds = bounds_at(schedules, spec, datetime.fromtimestamp(self._origin + now, UTC))[0] \
            if schedules else None  # (no schedule: the spec's bounds, without a datetime a step)
        given = DecisionInput(spec=spec, scale=scale, metrics=values, pods=pods,
                              history=self._history, now=now, settings=self._scenario.settings,
                              bounds=bounds)
        if self._predictor is None:
            return decide(given)
        predictions = self._predictor.predict(metrics=values, pods=pods, now=now)
        return decide_predictive(given, predictions=predictions, acting=self._predictor.acting)


def _feeds(scenario: Scenario, model: WorkloadModel, trace: Trace) -> list[MetricFeed]:
    """One feed per metric; a metric with a trace column of its own name reads that column."""
    metrics = scenario.spec.metrics
    windows = scenario.windows
    if len(windows) != len(metrics):
        windows = (DEFAULT_WINDOW,) * len(metrics)
    return [
        MetricFeed(metric, model, own_column=metric.name in trace.columns, window=window)
        for metric, window in zip(metrics, windows, strict=True)
    ]


def _fit_container(model: WorkloadModel, spec: AutoscalerSpec) -> WorkloadModel:
    """Name the pods' container after the one a ContainerResource metric asks for."""
    names = {m.container for m in spec.metrics if m.container}
    if len(names) > 1:
        raise SimulationError(f"the model has one container; the metrics name {sorted(names)}")
    return replace(model, container=names.pop()) if names else model


def _totals(
    feed: MetricFeed,
    trace: Trace,
    grid: Sequence[float],
    demand: list[float | None] | None,
    interpolation: Interpolation,
) -> list[float | None]:
    name = feed.spec.name
    if name in trace.columns:
        return trace.on_grid(name, grid, interpolation)
    if demand is None:
        raise SimulationError(
            f"the trace has neither a {DEMAND!r} column nor one named after metric {name!r}"
        )
    return [feed.total(value) for value in demand]


def _row(
    now: float,
    demand: float | None,
    counts: Counts,
    observed: Sequence[tuple[MetricValues, MetricLoad]],
    decision: Decision,
) -> Row:
    # An early exit (replica bounds, scaling disabled) evaluates no metric: decision.metrics
    # is empty then; otherwise it is aligned with spec.metrics, like ``observed``.
    outcomes: Sequence[MetricOutcome | None] = decision.metrics or [None] * len(observed)
    report = decision.forecast
    forecasts = report.metrics if report and report.metrics else (None,) * len(observed)
    metrics = tuple([
        MetricRow(
            load=load,
            seen=outcome.current_value if outcome else None,
            proposal=outcome.proposal.replicas if outcome and outcome.proposal else None,
            forecast=forecast.value if forecast else None,
            forecast_at=now + forecast.horizon if forecast else None,
            forecast_used=bool(forecast and forecast.used),
        )
        for (_, load), outcome, forecast in zip(observed, outcomes, forecasts, strict=True)
    ])
    limited = decision.condition(ConditionType.SCALING_LIMITED)
    return Row(
        time=now, demand=demand, current=decision.current_replicas,
        desired=decision.desired_replicas, pending=counts.pending, starting=counts.starting,
        ready=counts.ready, deleting=counts.deleting, metrics=metrics,
        proposal=decision.proposal, steps=tuple(decision.steps),
        limited=limited.reason if limited and limited.status else "",
        error=decision.error,
        reactive=report.reactive_replicas if report else None,
        predictive=report.predictive_replicas if report else None,
    )


seal_values(globals())
