"""One metric to one replica proposal: upstream's ``ReplicaCalculator``, without its I/O.

Each public function takes the samples the adapters fetched and the pods they listed, and
returns a ``MetricProposal`` or raises ``MetricError`` with upstream's message. Integer
arithmetic truncates toward zero and ratios are float64, exactly as upstream does, because the
rounding is visible in the result (5 pods at 28% of a 50% target propose 3, not 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from autoscaler.algorithm.model import AlgorithmSettings, Milli, Pod, PodSample, Seconds
from autoscaler.algorithm.pods import (
    MetricError,
    PodView,
    count_running_ready,
    group_pods,
    pod_requests,
)
from autoscaler.algorithm.stage_values import MetricCurrent, MetricProposal, PodGroups, Tolerances

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1


def trunc_div(numerator: int, denominator: int) -> int:
    """Integer division truncating toward zero, as Go's ``/`` on integers."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator > 0) else -quotient


def ceil_int32(value: float) -> int:
    """``int32(math.Ceil(x))`` with upstream's saturation at MaxInt32."""
    return MAX_INT32 if value > MAX_INT32 else math.ceil(value)


# --- per-pod metrics: Resource, ContainerResource, Pods -----------------------------------

RatioOf = Callable[[Mapping[str, int]], float]


def _per_pod_proposal(
    *,
    values: dict[str, int],
    ratio: float,
    groups: PodGroups,
    current_replicas: int,
    tolerances: Tolerances,
    ratio_of: RatioOf,
    scale_down_fill: Callable[[str], int],
    reported: MetricCurrent,
) -> MetricProposal:
    """The shared skeleton of ``GetResourceReplicas`` and ``calcPlainMetricReplicas``.

    ``ratio`` is ``ratio_of(values)``, which the caller has computed already.
    """
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        # (the usual case, built without the closure below: it runs per metric per pass)
        if tolerances.within(ratio):
            return _grouped_proposal(groups, reported, current_replicas, ratio,
                                     within_tolerance=True)
        # No unready or missing pods: the ratio times the ready pods is the answer.
        return _grouped_proposal(groups, reported, ceil_int32(ratio * groups.ready_count), ratio)

    # (a partial, not a nested function: compiled, a nested function and its environment
    # refer to each other, a cycle only the cyclic collector frees)
    proposal = partial(_grouped_proposal, groups, reported)

    filled = dict(values)
    if groups.missing:
        if ratio < 1.0:
            # On a scale-down, treat missing pods as using 100% of the request (or the target).
            filled.update({name: scale_down_fill(name) for name in groups.missing})
        elif ratio > 1.0:
            # On a scale-up, treat missing pods as using 0% of the request.
            filled.update(dict.fromkeys(groups.missing, 0))
    if scale_up_with_unready:
        # On a scale-up, treat unready pods as using 0% of the request.
        filled.update(dict.fromkeys(groups.unready, 0))

    new_ratio = ratio_of(filled)
    flipped = (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio)
    if tolerances.within(new_ratio) or flipped:
        # The change is too small, or the back-fill reversed the direction: hold.
        return proposal(
            current_replicas, ratio, rebalanced_ratio=new_ratio,
            within_tolerance=tolerances.within(new_ratio),
        )
    # Upstream multiplies by every sample, stale samples of unlisted pods included.
    replicas = ceil_int32(new_ratio * len(filled))
    if (new_ratio < 1.0 and replicas > current_replicas) or (
        new_ratio > 1.0 and replicas < current_replicas
    ):
        # The count of samples would reverse the direction: hold.
        return proposal(current_replicas, ratio, rebalanced_ratio=new_ratio)
    return proposal(replicas, ratio, rebalanced_ratio=new_ratio)


def _grouped_proposal(
    groups: PodGroups, reported: MetricCurrent, replicas: int, ratio: float, *,
    rebalanced_ratio: float | None = None, within_tolerance: bool = False,
) -> MetricProposal:
    return MetricProposal(
        replicas=replicas, current=reported, ratio=ratio, rebalanced_ratio=rebalanced_ratio,
        within_tolerance=within_tolerance, ready_pods=groups.ready_count,
        unready_pods=len(groups.unready), missing_pods=len(groups.missing),
        ignored_pods=len(groups.ignored), pods=groups,
    )


def _usable_samples(
    samples: Mapping[str, PodSample],
    pods: Sequence[Pod],
    *,
    resource: str | None,
    now: Seconds,
    settings: AlgorithmSettings,
    empty_message: str,
) -> tuple[dict[str, int], PodGroups]:
    if not samples:
        raise MetricError(empty_message)
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    groups = pods.groups(samples, resource=resource, now=now, settings=settings) \
        if isinstance(pods, PodView) else group_pods(pods, samples, resource=resource, now=now,
                                                     settings=settings)
    excluded = groups.ignored | groups.unready
    values: dict[str, int] = {
        name: s.value for name, s in samples.items() if name not in excluded
    } if excluded else {name: s.value for name, s in samples.items()}
    if not values:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    return values, groups


# The ratio functions are module-level, not nested in their proposal functions: compiled, a
# nested function that a lambda calls and its environment refer to each other, a cycle per
# call that only the cyclic collector frees (two per metric per pass).
def _utilization(
    of: Mapping[str, int], requests: Mapping[str, int], target_utilization: int
) -> tuple[float, int, int]:
    """The ratio to the target, the integer percent and the raw average of ``of``."""
    usage = request = count = 0
    for name, value in of.items():
        pod_request = requests.get(name)
        if pod_request is not None:  # samples of unlisted pods have no request: skipped
            usage += value
            request += pod_request
            count += 1
    if request == 0:
        raise MetricError("no metrics returned matched known pods")
    percent = trunc_div(usage * 100, request)  # an integer percent, as upstream
    return float(percent) / float(target_utilization), percent, trunc_div(usage, count)


def _average(of: Mapping[str, int], target_average: Milli) -> tuple[float, int]:
    """The ratio to the target and the average of ``of``."""
    # Upstream averages over every sample, including samples of pods it did not list.
    value = trunc_div(sum(of.values()), len(of))
    return float(value) / float(target_average), value


def utilization_proposal(
    *,
    samples: Mapping[str, PodSample],
    pods: Sequence[Pod],
    resource: str,
    container: str | None,
    target_utilization: int,
    current_replicas: int,
    tolerances: Tolerances,
    now: Seconds,
    settings: AlgorithmSettings,
) -> MetricProposal:
    """``GetResourceReplicas``: a Utilization target, in percent of the pods' requests."""
    values, groups = _usable_samples(
        samples, pods, resource=resource, now=now, settings=settings,
        empty_message="no metrics returned from resource metrics API",
    )
    basis = settings.utilization_requests
    requests = pods.requests(resource=resource, container=container, basis=basis) \
        if isinstance(pods, PodView) \
        else pod_requests(pods, resource=resource, container=container, basis=basis)

    ratio, percent, raw_average = _utilization(values, requests, target_utilization)
    fallback_percent = max(100, target_utilization)
    return _per_pod_proposal(
        values=values,
        ratio=ratio,
        groups=groups,
        current_replicas=current_replicas,
        tolerances=tolerances,
        ratio_of=lambda of: _utilization(of, requests, target_utilization)[0],
        scale_down_fill=lambda name: trunc_div(requests[name] * fallback_percent, 100),
        reported=MetricCurrent(average_utilization=percent, average_value=raw_average),
    )


def average_value_proposal(
    *,
    samples: Mapping[str, PodSample],
    pods: Sequence[Pod],
    resource: str | None,
    target_average: Milli,
    current_replicas: int,
    tolerances: Tolerances,
    now: Seconds,
    settings: AlgorithmSettings,
) -> MetricProposal:
    """``calcPlainMetricReplicas``: Pods metrics and Resource AverageValue targets."""
    values, groups = _usable_samples(
        samples, pods, resource=resource, now=now, settings=settings,
        empty_message=(
            "no metrics returned from resource metrics API" if resource
            else "no metrics returned from custom metrics API"
        ),
    )

    ratio, current = _average(values, target_average)
    return _per_pod_proposal(
        values=values,
        ratio=ratio,
        groups=groups,
        current_replicas=current_replicas,
        tolerances=tolerances,
        ratio_of=lambda of: _average(of, target_average)[0],
        # On a scale-down, treat missing pods as using exactly the target.
        scale_down_fill=lambda _name: target_average,
        reported=MetricCurrent(average_value=current),
    )


# --- single-value metrics: Object and External --------------------------------------------


def saturating_sum(values: Sequence[int]) -> int:
    """Upstream sums external series and caps a positive overflow at MaxInt64."""
    total = 0
    for value in values:
        if value > 0 and total > MAX_INT64 - value:
            return MAX_INT64
        total += value
    return total


def value_proposal(
    *,
    usage: int,
    target_value: Milli,
    current_replicas: int,
    pods: Sequence[Pod],
    tolerances: Tolerances,
) -> MetricProposal:
    """``getUsageRatioReplicaCount``: Object and External Value targets.

    Scales by the Running+Ready pods, not by the current count; at 0 replicas (scale to zero)
    ``ceil(ratio)`` with no tolerance and no pods.
    """
    ratio = float(usage) / float(target_value)
    reported = MetricCurrent(value=usage)
    if current_replicas == 0:
        return MetricProposal(replicas=ceil_int32(ratio), current=reported, ratio=ratio)
    if tolerances.within(ratio):
        return MetricProposal(
            replicas=current_replicas, current=reported, ratio=ratio, within_tolerance=True
        )
    ready = count_running_ready(pods)
    return MetricProposal(
        replicas=ceil_int32(ratio * ready), current=reported, ratio=ratio, ready_pods=ready
    )


def per_pod_value_proposal(
    *, usage: int, target_average: Milli, status_replicas: int, tolerances: Tolerances
) -> MetricProposal:
    """``Get{Object,External}PerPodMetricReplicas``: an AverageValue over ``status.replicas``."""
    wanted = ceil_int32(float(usage) / float(target_average))
    if status_replicas == 0:
        # Upstream divides by zero here (ratio +Inf, never within tolerance); say so plainly.
        return MetricProposal(
            replicas=wanted, current=MetricCurrent(average_value=usage), ratio=math.inf
        )
    ratio = float(usage) / (float(target_average) * float(status_replicas))
    within = tolerances.within(ratio)
    average = MAX_INT64 if usage >= MAX_INT64 else math.ceil(float(usage) / float(status_replicas))
    return MetricProposal(
        replicas=status_replicas if within else wanted,
        current=MetricCurrent(average_value=average),
        ratio=ratio,
        within_tolerance=within,
    )
