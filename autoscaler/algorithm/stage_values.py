"""The values a decision passes between its stages: each metric's proposal and outcome, the pod
groups behind it, the tolerances, the resolved ``behavior`` rules and the normalized count.

The core's value idiom, here as in ``decision_values`` and ``model``: a value made every pass
is a native value type (``autoscaler/record.py``); one made once (a spec, a setting) is a
``@record``. This module holds values and the few properties that read them; the rules that
make them are in ``replicas``, ``metric``, ``pods`` and ``behavior``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from autoscaler.algorithm.model import (
    History,
    KeptValues,
    MetricSourceType,
    MetricSpec,
    ScalingPolicy,
    SelectPolicy,
)
from autoscaler.algorithm.reasons import Reason
from autoscaler.record import refuse_assignment, seal_values


@dataclass(init=False, slots=True, unsafe_hash=True)
class Tolerances:
    """A ratio r is within tolerance iff 1 - scale_down <= r <= 1 + scale_up (both inclusive)."""

    scale_down: Final[float]
    scale_up: Final[float]

    def __init__(self, *, scale_down: float = 0.1, scale_up: float = 0.1) -> None:
        self.scale_down = scale_down
        self.scale_up = scale_up

    def within(self, ratio: float) -> bool:
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)


@dataclass(init=False, slots=True, unsafe_hash=True)
class MetricCurrent:
    """``MetricValueStatus``: what ``kubectl describe hpa`` shows as the current value."""

    value: Final[int | None]
    average_value: Final[int | None]
    average_utilization: Final[int | None]

    def __init__(
        self,
        *,
        value: int | None = None,
        average_value: int | None = None,
        average_utilization: int | None = None,
    ) -> None:
        self.value = value
        self.average_value = average_value
        self.average_utilization = average_utilization


@dataclass(init=False, slots=True, unsafe_hash=True)
class PodGroups:
    ready_count: Final[int]
    unready: Final[frozenset[str]]
    missing: Final[frozenset[str]]
    ignored: Final[frozenset[str]]

    def __init__(
        self,
        *,
        ready_count: int,
        unready: frozenset[str],
        missing: frozenset[str],
        ignored: frozenset[str],
    ) -> None:
        self.ready_count = ready_count
        self.unready = unready
        self.missing = missing
        self.ignored = ignored


@dataclass(init=False, slots=True, unsafe_hash=True)
class MetricProposal:
    """A metric's proposal, and how it was reached (for ``plan --explain``)."""

    replicas: Final[int]
    current: Final[MetricCurrent]
    ratio: Final[float]
    rebalanced_ratio: Final[float | None]
    """The ratio after missing and unready pods were back-filled, if that step ran."""
    within_tolerance: Final[bool]
    ready_pods: Final[int | None]
    unready_pods: Final[int]
    missing_pods: Final[int]
    ignored_pods: Final[int]
    pods: PodGroups | None = field(compare=False)
    """The pods by group, named (per-pod metrics only): which were unready, missing or
    ignored, for ``status`` to name them."""

    def __init__(
        self,
        *,
        replicas: int,
        current: MetricCurrent,
        ratio: float,
        rebalanced_ratio: float | None = None,
        within_tolerance: bool = False,
        ready_pods: int | None = None,
        unready_pods: int = 0,
        missing_pods: int = 0,
        ignored_pods: int = 0,
        pods: PodGroups | None = None,
    ) -> None:
        self.replicas = replicas
        self.current = current
        self.ratio = ratio
        self.rebalanced_ratio = rebalanced_ratio
        self.within_tolerance = within_tolerance
        self.ready_pods = ready_pods
        self.unready_pods = unready_pods
        self.missing_pods = missing_pods
        self.ignored_pods = ignored_pods
        self.pods = pods

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


_FAILURE_REASONS = {
    MetricSourceType.RESOURCE: Reason.FAILED_GET_RESOURCE_METRIC,
    MetricSourceType.CONTAINER_RESOURCE: Reason.FAILED_GET_CONTAINER_RESOURCE_METRIC,
    MetricSourceType.PODS: Reason.FAILED_GET_PODS_METRIC,
    MetricSourceType.OBJECT: Reason.FAILED_GET_OBJECT_METRIC,
    MetricSourceType.EXTERNAL: Reason.FAILED_GET_EXTERNAL_METRIC,
}


@dataclass(init=False, slots=True, unsafe_hash=True)
class MetricOutcome:
    """A metric's result this pass: a proposal, or the error that made it invalid."""

    spec: Final[MetricSpec]
    description: Final[str]
    """Upstream's name for the metric in messages ("cpu resource utilization (...)")."""
    proposal: Final[MetricProposal | None]
    error: Final[str | None]
    values: KeptValues | None = field(compare=False)
    """The values the metric was computed from (each pod's value, the query), for status."""

    def __init__(
        self,
        *,
        spec: MetricSpec,
        description: str,
        proposal: MetricProposal | None = None,
        error: str | None = None,
        values: KeptValues | None = None,
    ) -> None:
        self.spec = spec
        self.description = description
        self.proposal = proposal
        self.error = error
        self.values = values

    @property
    def failure_reason(self) -> Reason:
        return _FAILURE_REASONS.get(self.spec.type, Reason.INVALID_METRIC_SOURCE_TYPE)

    @property
    def target_value(self) -> float | None:
        """The spec's target in the units users read: percent for a utilization target,
        else base units (``"500m"`` is 0.5)."""
        target = self.spec.target
        if target.average_utilization is not None:
            return float(target.average_utilization)
        milli = target.average_value if target.average_value is not None else target.value
        return None if milli is None else milli / 1000

    @property
    def current_value(self) -> float | None:
        """The current value the proposal was made from, in the target's units (as
        ``target_value``); ``None`` without a proposal."""
        if self.proposal is None:
            return None
        current = self.proposal.current
        if self.spec.target.average_utilization is not None \
                and current.average_utilization is not None:
            return current.average_utilization  # a whole percent, as upstream's status has it
        milli = current.average_value if current.average_value is not None else current.value
        return None if milli is None else milli / 1000

    def __setattr__(self, name: str, value: object) -> None:
        refuse_assignment(self, name)  # compiled: some fields are not Final

    def __delattr__(self, name: str) -> None:
        refuse_assignment(self, name)


@dataclass(init=False, slots=True, unsafe_hash=True)
class Rules:
    """``HPAScalingRules`` with every default filled in."""

    stabilization_window_seconds: Final[int]
    select_policy: Final[SelectPolicy]
    policies: Final[tuple[ScalingPolicy, ...]]
    tolerance: Final[float | None]

    def __init__(
        self,
        *,
        stabilization_window_seconds: int,
        select_policy: SelectPolicy,
        policies: tuple[ScalingPolicy, ...],
        tolerance: float | None,
    ) -> None:
        self.stabilization_window_seconds = stabilization_window_seconds
        self.select_policy = select_policy
        self.policies = policies
        self.tolerance = tolerance


@dataclass(init=False, slots=True, unsafe_hash=True)
class ResolvedBehavior:
    scale_up: Final[Rules]
    scale_down: Final[Rules]

    def __init__(self, *, scale_up: Rules, scale_down: Rules) -> None:
        self.scale_up = scale_up
        self.scale_down = scale_down


@dataclass(init=False, slots=True, unsafe_hash=True)
class Normalized:
    """The outcome of normalization, with the reasons upstream puts on its conditions."""

    stabilized: Final[int]
    desired: Final[int]
    stabilization_reason: Final[Reason]
    limit_reason: Final[Reason]
    history: Final[History]

    def __init__(
        self,
        *,
        stabilized: int,
        desired: int,
        stabilization_reason: Reason,
        limit_reason: Reason,
        history: History,
    ) -> None:
        self.stabilized = stabilized
        self.desired = desired
        self.stabilization_reason = stabilization_reason
        self.limit_reason = limit_reason
        self.history = history

    @property
    def limited(self) -> bool:
        return self.desired != self.stabilized


seal_values(globals())
