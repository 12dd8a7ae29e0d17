"""Per-target series: plain values the reconciler sets each pass, written as exposition text
at scrape time.

Every series carries ``namespace``, ``kind`` and ``name`` (as kube-state-metrics' and KEDA's
do), so ``sum by (namespace)`` and joins need no ``label_replace``; per-metric series add
``metric`` and ``metric_type``. Counters (scale events, drift) start at 0 so that ``rate()``
sees a target's first event.

Not prometheus_client children: ten per target at ~600 bytes each (a lock, a value object, a
label tuple) were 60 MB at 10,000 targets, and setting them cost ~25 us per target per pass
(bench/daemon_scale.py). Not ``MetricFamily`` objects either, which build a Sample per line
for the library to format: each line is written once here, from a label text escaped once
per target. A scrape at 10,000 targets is ~260,000 lines; ``render`` yields them a few
thousand at a time, so that a scrape never holds them all.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from autoscaler.algorithm import (
    AlgorithmSettings,
    AutoscalerSpec,
    ConditionType,
    Decision,
    MetricSpec,
)
from autoscaler.algorithm.behavior import tolerances_for
from autoscaler.algorithm.decision_values import ForecastReport, MetricForecast
from autoscaler.record import record

SCALE_DIRECTIONS = ("up", "down")
"""The ``direction`` label of the scale-event counters."""


@record(kw_only=False)
class MetricReading:
    """One metric of a target at its last pass, in the units users read."""

    name: str
    type: str
    """Its source type: Resource, ContainerResource, Pods, Object or External."""
    valid: bool
    target: float | None
    value: float | None


class ConditionView(Protocol):
    """What is exported of a status condition: its type and whether it holds."""

    @property
    def type(self) -> ConditionType: ...

    @property
    def status(self) -> bool: ...


@dataclass(slots=True)
class TargetSeries:
    """What ``/metrics`` shows of one target."""

    labels: str
    """``namespace="..",kind="..",name=".."``, escaped for the text format."""
    current: int | None = None
    desired: int | None = None
    recommended: int | None = None
    """After the stabilization windows, before the rate limits and the min/max clamp."""
    bounds: tuple[int, int] | None = None
    """(min, max) in force at the last decision: the spec's, or a schedule's."""
    schedules: tuple[tuple[str, bool], ...] = ()
    """Each schedule of the target and whether its bounds were in force."""
    spec: AutoscalerSpec | None = None
    settings: AlgorithmSettings | None = None
    conditions: Sequence[ConditionView] = ()
    paused: bool = False
    fallback_active: bool = False
    last_reconcile: float | None = None
    metrics: tuple[MetricReading, ...] = ()
    reconciles: dict[str, int] = field(default_factory=dict)
    scale_events: tuple[int, int] = (0, 0)
    """Landed writes (up, down). Tuples, replaced on a change: most targets never scale, and
    two lists of [0, 0] held 0.14 KB a target."""
    would_scale_events: tuple[int, int] = (0, 0)
    drift: int = 0
    shadow: tuple[int, int | None] | None = None
    """Shadow mode: (our desired count, the owning HPA's), at the last pass."""
    activation_active: bool | None = None
    """Scale to zero: whether an activation metric was above its threshold at the last pass
    (None: unknown, or the target does not scale to zero)."""
    forecast: ForecastReport | None = None
    """Predictive scaling's last report."""
    forecast_metrics: tuple[str, ...] = ()
    """The names of the target's metrics, aligned with ``forecast.metrics``."""
    _would_scale_to: tuple[int, int] | None = None
    _would_scale_now: bool = False
    _tolerance: tuple[AutoscalerSpec | None, AlgorithmSettings | None, tuple[str, str]] = (
        None, None, ("", ""))
    """The tolerances as text (up, down: shared by every target with the same ones), and the
    spec and settings they were read from."""

    def show(self, *, current: int | None, desired: int | None, decision: Decision | None,
             shadow: tuple[int, int | None] | None, metrics: Sequence[MetricSpec],
             activation_active: bool | None = None) -> None:
        """What the target's state says at the end of its pass, the state ``/status``
        shows: the count read and the count settled on, and what the pass's decision (if it
        made one: not while paused or owned elsewhere) measured, recommended and forecast.
        A mode switched off takes its series with it (``shadow`` None)."""
        self.current, self.desired = current, desired
        self.shadow = shadow
        if decision is None:
            self.recommended, self.metrics, self.forecast = None, (), None
            self.activation_active = None  # not decided this pass
            return
        self.activation_active = activation_active
        self.recommended = decision.stabilized
        self.metrics = tuple(
            MetricReading(outcome.spec.name, outcome.spec.type, outcome.proposal is not None,
                          outcome.target_value, outcome.current_value)
            for outcome in decision.metrics)
        self.forecast = decision.forecast
        if self.forecast is not None:
            self.forecast_metrics = tuple(metric.name for metric in metrics)

    def scaled(self, previous: int, new: int) -> None:
        """A scale write landed."""
        self.scale_events = _counted(self.scale_events, _direction(previous, new))
        self.desired = new

    def would_scale(self, current: int, desired: int) -> None:
        """Dry-run: the write a pass would have made. Counted once per change, not per
        pass: the target stays where it is, so every pass would propose it again."""
        self._would_scale_now = True
        if self._would_scale_to != (current, desired):
            self._would_scale_to = (current, desired)
            self.would_scale_events = _counted(self.would_scale_events,
                                               _direction(current, desired))

    def settled(self, outcome: str, *, at: float, spec: AutoscalerSpec,
                settings: AlgorithmSettings, conditions: Sequence[ConditionView],
                paused: bool, fallback_active: bool) -> None:
        """The end of the target's pass, whatever its outcome."""
        self.last_reconcile = at
        self.reconciles[outcome] = self.reconciles.get(outcome, 0) + 1
        self.spec, self.settings = spec, settings
        self.conditions, self.paused, self.fallback_active = conditions, paused, fallback_active
        if not self._would_scale_now:  # a would-be write withdrawn: proposing it is a change
            self._would_scale_to = None
        self._would_scale_now = False


def target_labels(key: str) -> str:
    """The label text of a target key ``namespace/Kind/name``."""
    namespace, kind, name = key.split("/", 2)
    return f'namespace="{escape(namespace)}",kind="{escape(kind)}",name="{escape(name)}"'


def escape(value: str) -> str:
    """A label value as the text format wants it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


_GAUGE, _COUNTER = "gauge", "counter"
FAMILIES: tuple[tuple[str, str, str, str], ...] = (
    # (name, type, extra labels, help)
    ("autoscaler_current_replicas", _GAUGE, "",
     "Replicas of the target's /scale at the last pass."),
    ("autoscaler_desired_replicas", _GAUGE, "",
     "Replicas the last pass settled on (the decision's, the fallback's, a pause's hold)."),
    ("autoscaler_recommended_replicas", _GAUGE, "",
     "Replicas the metrics recommend after the stabilization windows, before the behavior "
     "rate limits and the min/max clamp."),
    ("autoscaler_min_replicas", _GAUGE, "",
     "The lower bound in force (minReplicas, or a schedule's)."),
    ("autoscaler_max_replicas", _GAUGE, "",
     "The upper bound in force (maxReplicas, or a schedule's)."),
    ("autoscaler_schedule_active", _GAUGE, "schedule",
     "1 while the schedule's bounds are in force."),
    ("autoscaler_tolerance_ratio", _GAUGE, "direction",
     "Tolerance around each metric's target: no scale up below target x (1 + up), no scale "
     "down above target x (1 - down)."),
    ("autoscaler_status_condition", _GAUGE, "condition,status",
     "The target's conditions (AbleToScale, ScalingActive, ScalingLimited), 1 for the "
     "status that holds."),
    ("autoscaler_paused", _GAUGE, "", "1 while the target is paused (config or annotation)."),
    ("autoscaler_fallback_active", _GAUGE, "",
     "1 while the target is held at its fallback replicas."),
    ("autoscaler_last_reconcile_timestamp_seconds", _GAUGE, "",
     "When the target was last reconciled."),
    ("autoscaler_reconciles_total", _COUNTER, "outcome", "Passes over a target by outcome."),
    ("autoscaler_scale_events_total", _COUNTER, "direction", "Scale writes that landed."),
    ("autoscaler_would_scale_events_total", _COUNTER, "direction",
     "Dry-run: scale writes a pass would have made, once per change."),
    ("autoscaler_drift_total", _COUNTER, "",
     "Replica changes made by someone else between passes."),
    ("autoscaler_metric_value", _GAUGE, "metric,metric_type",
     "A metric's current value (utilization in percent, values in base units)."),
    ("autoscaler_metric_target", _GAUGE, "metric,metric_type",
     "A metric's target (same units as autoscaler_metric_value)."),
    ("autoscaler_metric_valid", _GAUGE, "metric,metric_type",
     "1 if the metric could be computed at the last pass."),
    ("autoscaler_shadow_agreement", _GAUGE, "",
     "Shadow mode: 1 if the desired count equals the owning HPA's at the last pass, 0 if not "
     "(absent while no HPA reports one)."),
    ("autoscaler_activation_active", _GAUGE, "",
     "Scale to zero: 1 if an activation metric is above its threshold at the last pass, 0 if "
     "every one is at or below it (absent while unknown, or without scale to zero)."),
    ("autoscaler_forecast_value", _GAUGE, "metric",
     "Predictive scaling: a metric's forecast total (base units) for the pass's horizon."),
    ("autoscaler_forecast_error_percent", _GAUGE, "metric",
     "Predictive scaling: the model's recent error (WAPE over the last season)."),
    ("autoscaler_forecast_used", _GAUGE, "metric",
     "Predictive scaling: 1 if the forecast went through the HPA math at the last pass."),
    ("autoscaler_forecast_changed", _GAUGE, "",
     "Predictive scaling: 1 if the forecast changed the desired count at the last pass (or "
     "would have, in forecastOnly)."),
    ("autoscaler_forecast_reactive_replicas", _GAUGE, "",
     "Predictive scaling: the desired count from the live metrics alone."),
)
FAMILY_NAMES = tuple(name for name, _, _, _ in FAMILIES)
"""Every per-target series name as it appears in the exposition."""


def render(series: Sequence[TargetSeries], *, dry_run: bool) -> Iterator[str]:
    """The text format of every target's series, family by family, in pieces of ``_CHUNK``
    targets: a scrape holds one piece's lines at once, not the whole exposition's (29 MB at
    10,000 targets)."""
    writers = (_current, _desired, _recommended, _min, _max, _schedule, _tolerance_lines,
               _conditions, _paused, _fallback, _last, _reconciles, _scale_events,
               _would_scale_events if dry_run else _would_scale_events_counted, _drift,
               _value, _target, _valid, _shadow, _activation, _forecast_value, _forecast_error,
               _forecast_used, _forecast_changed, _forecast_reactive)
    for (name, kind, _, help_text), lines in zip(FAMILIES, writers, strict=True):
        yield f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
        for start in range(0, len(series), _CHUNK):
            yield "".join([lines(s) for s in series[start:start + _CHUNK]])


_CHUNK = 500
"""Targets per piece of a family's text: ~50 KB, a few thousand lines at most."""


def _current(s: TargetSeries) -> str:
    return "" if s.current is None else f"autoscaler_current_replicas{{{s.labels}}} {s.current}\n"


def _desired(s: TargetSeries) -> str:
    return "" if s.desired is None else f"autoscaler_desired_replicas{{{s.labels}}} {s.desired}\n"


def _recommended(s: TargetSeries) -> str:
    if s.recommended is None:
        return ""
    return f"autoscaler_recommended_replicas{{{s.labels}}} {s.recommended}\n"


def _bounds(s: TargetSeries) -> tuple[int, int] | None:
    if s.bounds is not None or s.spec is None:
        return s.bounds
    return s.spec.min_replicas, s.spec.max_replicas


def _min(s: TargetSeries) -> str:
    bounds = _bounds(s)
    return "" if bounds is None else f"autoscaler_min_replicas{{{s.labels}}} {bounds[0]}\n"


def _max(s: TargetSeries) -> str:
    bounds = _bounds(s)
    return "" if bounds is None else f"autoscaler_max_replicas{{{s.labels}}} {bounds[1]}\n"


def _schedule(s: TargetSeries) -> str:
    return "".join(f'autoscaler_schedule_active{{{s.labels},schedule="{escape(name)}"}} '
                   f"{int(active)}\n" for name, active in s.schedules)


def _tolerance_lines(s: TargetSeries) -> str:
    """The tolerances are read again only when the spec or the settings change (a reload);
    the lines are written at each scrape (kept, they held 0.25 KB a target)."""
    spec, settings = s.spec, s.settings
    if spec is None or settings is None:
        return ""
    seen_spec, seen_settings, numbers = s._tolerance
    if seen_spec is not spec or seen_settings is not settings:
        tolerances = tolerances_for(spec.behavior, settings)
        numbers = _tolerance_text(tolerances.scale_up, tolerances.scale_down)
        s._tolerance = (spec, settings, numbers)
    (up, down), (up_text, down_text) = SCALE_DIRECTIONS, numbers
    return (f'autoscaler_tolerance_ratio{{{s.labels},direction="{up}"}} {up_text}\n'
            f'autoscaler_tolerance_ratio{{{s.labels},direction="{down}"}} {down_text}\n')


@functools.lru_cache(maxsize=64)
def _tolerance_text(up: float, down: float) -> tuple[str, str]:
    """A fleet has a few distinct tolerances: one pair of texts serves every target."""
    return _number(up), _number(down)


def _conditions(s: TargetSeries) -> str:
    text = ""
    for c in tuple(s.conditions):  # one step: rendering may run off the event loop
        holds = int(c.status)
        prefix = f'autoscaler_status_condition{{{s.labels},condition="{c.type}",status='
        text += f'{prefix}"true"}} {holds}\n{prefix}"false"}} {1 - holds}\n'
    return text


def _paused(s: TargetSeries) -> str:
    return "" if s.spec is None else f"autoscaler_paused{{{s.labels}}} {int(s.paused)}\n"


def _fallback(s: TargetSeries) -> str:
    if s.spec is None:
        return ""
    return f"autoscaler_fallback_active{{{s.labels}}} {int(s.fallback_active)}\n"


def _last(s: TargetSeries) -> str:
    if s.last_reconcile is None:
        return ""
    return (f"autoscaler_last_reconcile_timestamp_seconds{{{s.labels}}} "
            f"{_number(s.last_reconcile)}\n")


def _reconciles(s: TargetSeries) -> str:
    return "".join(f'autoscaler_reconciles_total{{{s.labels},outcome="{outcome}"}} {count}\n'
                   for outcome, count in tuple(s.reconciles.items()))  # one step, as above


def _scale_events(s: TargetSeries) -> str:
    up, down = s.scale_events
    return (f'autoscaler_scale_events_total{{{s.labels},direction="up"}} {up}\n'
            f'autoscaler_scale_events_total{{{s.labels},direction="down"}} {down}\n')


def _would_scale_events(s: TargetSeries) -> str:
    up, down = s.would_scale_events
    return (f'autoscaler_would_scale_events_total{{{s.labels},direction="up"}} {up}\n'
            f'autoscaler_would_scale_events_total{{{s.labels},direction="down"}} {down}\n')


def _would_scale_events_counted(s: TargetSeries) -> str:
    """Outside dry-run, only a target that counted some (it was in dry-run before)."""
    return _would_scale_events(s) if any(s.would_scale_events) else ""


def _drift(s: TargetSeries) -> str:
    return f"autoscaler_drift_total{{{s.labels}}} {s.drift}\n"


def _metric_labels(s: TargetSeries, reading: MetricReading) -> str:
    return s.labels + _metric_suffix(reading.name, reading.type)


@functools.lru_cache(maxsize=4096)
def _metric_suffix(name: str, metric_type: str) -> str:
    """A metric's labels after the target's, one text for every target that has the metric
    (kept per target, they held 0.38 KB each; joined at each scrape, as fast: 11,400 targets
    render in ~92 ms either way)."""
    return f',metric="{escape(name)}",metric_type="{metric_type}"'


def _value(s: TargetSeries) -> str:
    return "".join(f"autoscaler_metric_value{{{_metric_labels(s, r)}}} {_number(r.value)}\n"
                   for r in s.metrics if r.value is not None)


def _target(s: TargetSeries) -> str:
    return "".join(f"autoscaler_metric_target{{{_metric_labels(s, r)}}} {_number(r.target)}\n"
                   for r in s.metrics if r.target is not None)


def _valid(s: TargetSeries) -> str:
    return "".join(f"autoscaler_metric_valid{{{_metric_labels(s, r)}}} {int(r.valid)}\n"
                   for r in s.metrics)


def _shadow(s: TargetSeries) -> str:
    if s.shadow is None or s.shadow[1] is None:
        return ""
    return f"autoscaler_shadow_agreement{{{s.labels}}} {int(s.shadow[0] == s.shadow[1])}\n"


def _activation(s: TargetSeries) -> str:
    if s.activation_active is None:
        return ""
    return f"autoscaler_activation_active{{{s.labels}}} {int(s.activation_active)}\n"


def _forecasts(s: TargetSeries) -> Iterator[tuple[str, MetricForecast]]:
    """(label text, forecast) of each predicted metric."""
    if s.forecast is None:
        return
    for name, metric in zip(s.forecast_metrics, s.forecast.metrics, strict=False):
        if metric is not None:
            yield f'{s.labels},metric="{escape(name)}"', metric


def _forecast_value(s: TargetSeries) -> str:
    return "".join(f"autoscaler_forecast_value{{{labels}}} {_number(m.value)}\n"
                   for labels, m in _forecasts(s) if m.value is not None)


def _forecast_error(s: TargetSeries) -> str:
    return "".join(f"autoscaler_forecast_error_percent{{{labels}}} {_number(m.error_percent)}\n"
                   for labels, m in _forecasts(s) if m.error_percent is not None)


def _forecast_used(s: TargetSeries) -> str:
    return "".join(f"autoscaler_forecast_used{{{labels}}} {int(m.used)}\n"
                   for labels, m in _forecasts(s))


def _forecast_changed(s: TargetSeries) -> str:
    if s.forecast is None:
        return ""
    return f"autoscaler_forecast_changed{{{s.labels}}} {int(s.forecast.changed)}\n"


def _forecast_reactive(s: TargetSeries) -> str:
    if s.forecast is None:
        return ""
    return (f"autoscaler_forecast_reactive_replicas{{{s.labels}}} "
            f"{s.forecast.reactive_replicas}\n")


def _counted(counts: tuple[int, int], index: int) -> tuple[int, int]:
    up, down = counts
    return (up + 1, down) if index == 0 else (up, down + 1)


def _direction(previous: int, new: int) -> int:
    """The index in ``SCALE_DIRECTIONS``."""
    return 0 if new > previous else 1


def _number(value: float) -> str:
    if value - value == 0:  # finite: the common case, with one test
        return repr(float(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
