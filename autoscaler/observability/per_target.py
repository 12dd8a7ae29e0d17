"""Per-target series: plain values the reconciler sets each pass, written as exposition text
at scrape time.

Every series carries ``namespace``, ``kind`` and ``name`` (as kube-state-metrics' and KEDA's
do), so ``sum by (namespace)`` and joins need no ``label_replace``; per-metric series add
``metric`` and ``metric_type``. Counters (scale events, drift) start at 0 so that ``rate()``
sees a target's first event.

Not prometheus_client children: ten per target at ~600 bytes each (a lock, a value object, a
label tuple) were 60 MB at 10,000 targets, and setting them cost ~25 us per target per pass
(bench/daemon_scale.py). Not ``MetricFamily`` objects either: a Sample per line and the
library's formatting took several times longer than writing the lines here, from a label
text escaped once per target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from autoscaler.algorithm import AlgorithmSettings, AutoscalerSpec, ConditionType
from autoscaler.algorithm.behavior import tolerances_for
from autoscaler.record import record

SCALE_DIRECTIONS = ("up", "down")
"""The ``direction`` label of the scale-event counters."""
CONDITION_STATUSES = ("true", "false")
"""The ``status`` label of ``autoscaler_status_condition``, as kube-state-metrics spells it."""


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
    scale_events: list[int] = field(default_factory=lambda: [0, 0])
    would_scale_events: list[int] = field(default_factory=lambda: [0, 0])
    drift: int = 0
    _would_scale_to: tuple[int, int] | None = None
    _would_scale_now: bool = False

    def scaled(self, previous: int, new: int) -> None:
        """A scale write landed."""
        self.scale_events[_direction(previous, new)] += 1
        self.desired = new

    def would_scale(self, current: int, desired: int) -> None:
        """Dry-run: the write a pass would have made. Counted once per change, not per
        pass: the target stays where it is, so every pass would propose it again."""
        self._would_scale_now = True
        if self._would_scale_to != (current, desired):
            self._would_scale_to = (current, desired)
            self.would_scale_events[_direction(current, desired)] += 1

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
    ("autoscaler_desired_replicas", _GAUGE, "", "Replicas the last pass decided on."),
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
)
FAMILY_NAMES = tuple(name for name, _, _, _ in FAMILIES)
"""Every per-target series name as it appears in the exposition."""


def render(series: Sequence[TargetSeries], *, dry_run: bool) -> str:
    """The text format of every target's series, family by family."""
    out = _Lines()
    for s in series:
        _replicas(out, s)
        _state(out, s)
        _counters(out, s, dry_run=dry_run)
        _metrics(out, s)
    text: list[str] = []
    for (name, kind, _, help_text), lines in zip(FAMILIES, out.families, strict=True):
        text.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        text.extend(lines)
    return "".join(text)


class _Lines:
    """One list of lines per family, in ``FAMILIES`` order; a writer per family."""

    def __init__(self) -> None:
        self.families: list[list[str]] = [[] for _ in FAMILIES]
        (self.current, self.desired, self.recommended, self.min, self.max, self.schedule,
         self.tolerance, self.condition, self.paused, self.fallback, self.last,
         self.reconciles, self.scales, self.would, self.drift, self.value, self.target,
         self.valid) = (lines.append for lines in self.families)


def _replicas(out: _Lines, s: TargetSeries) -> None:
    labels = s.labels
    if s.current is not None:
        out.current(f"autoscaler_current_replicas{{{labels}}} {s.current}\n")
    if s.desired is not None:
        out.desired(f"autoscaler_desired_replicas{{{labels}}} {s.desired}\n")
    if s.recommended is not None:
        out.recommended(f"autoscaler_recommended_replicas{{{labels}}} {s.recommended}\n")
    bounds = s.bounds or (None if s.spec is None else (s.spec.min_replicas,
                                                       s.spec.max_replicas))
    if bounds is not None:
        out.min(f"autoscaler_min_replicas{{{labels}}} {bounds[0]}\n")
        out.max(f"autoscaler_max_replicas{{{labels}}} {bounds[1]}\n")
    for name, active in s.schedules:
        out.schedule(f'autoscaler_schedule_active{{{labels},schedule="{escape(name)}"}} '
                     f"{int(active)}\n")


def _state(out: _Lines, s: TargetSeries) -> None:
    labels = s.labels
    if s.spec is not None and s.settings is not None:
        tolerances = tolerances_for(s.spec.behavior, s.settings)
        up, down = SCALE_DIRECTIONS
        out.tolerance(f'autoscaler_tolerance_ratio{{{labels},direction="{up}"}} '
                      f"{_number(tolerances.scale_up)}\n")
        out.tolerance(f'autoscaler_tolerance_ratio{{{labels},direction="{down}"}} '
                      f"{_number(tolerances.scale_down)}\n")
    for c in s.conditions:
        holds = int(c.status)
        out.condition(f'autoscaler_status_condition{{{labels},condition="{c.type}",'
                      f'status="true"}} {holds}\n')
        out.condition(f'autoscaler_status_condition{{{labels},condition="{c.type}",'
                      f'status="false"}} {1 - holds}\n')
    if s.spec is not None:
        out.paused(f"autoscaler_paused{{{labels}}} {int(s.paused)}\n")
        out.fallback(f"autoscaler_fallback_active{{{labels}}} {int(s.fallback_active)}\n")
    if s.last_reconcile is not None:
        out.last(f"autoscaler_last_reconcile_timestamp_seconds{{{labels}}} "
                 f"{_number(s.last_reconcile)}\n")


def _counters(out: _Lines, s: TargetSeries, *, dry_run: bool) -> None:
    labels = s.labels
    for outcome, count in s.reconciles.items():
        out.reconciles(f'autoscaler_reconciles_total{{{labels},outcome="{outcome}"}} {count}\n')
    for direction, count in zip(SCALE_DIRECTIONS, s.scale_events, strict=True):
        out.scales(f'autoscaler_scale_events_total{{{labels},direction="{direction}"}} '
                   f"{count}\n")
    if dry_run or any(s.would_scale_events):
        for direction, count in zip(SCALE_DIRECTIONS, s.would_scale_events, strict=True):
            out.would(f'autoscaler_would_scale_events_total{{{labels},'
                      f'direction="{direction}"}} {count}\n')
    out.drift(f"autoscaler_drift_total{{{labels}}} {s.drift}\n")


def _metrics(out: _Lines, s: TargetSeries) -> None:
    for reading in s.metrics:
        each = f'{s.labels},metric="{escape(reading.name)}",metric_type="{reading.type}"'
        out.valid(f"autoscaler_metric_valid{{{each}}} {int(reading.valid)}\n")
        if reading.target is not None:
            out.target(f"autoscaler_metric_target{{{each}}} {_number(reading.target)}\n")
        if reading.value is not None:
            out.value(f"autoscaler_metric_value{{{each}}} {_number(reading.value)}\n")


def _direction(previous: int, new: int) -> int:
    """The index in ``SCALE_DIRECTIONS``."""
    return 0 if new > previous else 1


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
