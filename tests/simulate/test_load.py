"""Demand to metric values: units, saturation, who gets traffic, and window averages."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    ExternalMetricValues,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    MetricUnavailable,
    Milli,
    ObjectMetricValue,
    PodMetricValues,
)
from autoscaler.simulate.load import MetricFeed
from autoscaler.simulate.simulation_error import SimulationError
from autoscaler.simulate.workload import Workload, WorkloadModel
from tests.simulate.builders import cpu, external, rps

HALF_CPU = WorkloadModel(capacity=100, requests={"cpu": Milli(500)}, metric_window=15)


def samples(values: object) -> dict[str, int]:
    assert isinstance(values, PodMetricValues)
    return {name: sample.value for name, sample in values.samples.items()}


def test_utilization_is_load_over_capacity() -> None:
    """150 units on one pod of capacity 100 and request 500m: 750m used, 150%, 3x a 50% target."""
    feed = MetricFeed(cpu(50), HALF_CPU, own_column=False)
    pods = Workload(HALF_CPU, prefix="p", replicas=1, now=0).pods
    total = feed.total(150)
    values, load = feed.observe(now=0, total=total, ready=1, pods=pods)
    assert total == 0.75
    assert samples(values) == {"p-00001": 750}
    assert load.ratio == 3.0


def test_saturation_caps_what_pods_report_not_the_true_load() -> None:
    """A pod cannot use more than its limit; the true load over target is still reported."""
    model = WorkloadModel(capacity=100, saturation=120, metric_window=15)
    feed = MetricFeed(cpu(50), model, own_column=False)
    pods = Workload(model, prefix="p", replicas=1, now=0).pods
    values, load = feed.observe(now=0, total=feed.total(300), ready=1, pods=pods)
    assert samples(values) == {"p-00001": 1200}
    assert load.ratio == 6.0


def test_only_ready_pods_get_traffic() -> None:
    """Ready pods share the load; Running-unready report 0; Pending and deleting report nothing."""
    model = WorkloadModel(startup=10, readiness=10, metric_window=15)
    workload = Workload(model, prefix="p", replicas=3, now=0)
    workload.scale_to(2, 0)  # p-00003 deleting (no termination: gone at once)
    workload.scale_to(4, 0)  # p-00004, p-00005: Running at 10, Ready at 20
    workload.scale_to(5, 5)  # p-00006: Running at 15
    feed = MetricFeed(rps(100), model, own_column=False)
    workload.observe(12)
    values, load = feed.observe(now=12, total=300, ready=2, pods=workload.reporting)
    assert samples(values) == {"p-00001": 150_000, "p-00002": 150_000, "p-00004": 0, "p-00005": 0}
    assert load.per_pod == 150.0


def test_samples_average_over_the_window_of_the_pods_life() -> None:
    """Each sample is the mean over the window's steps since the pod started, stamped now."""
    model = WorkloadModel(readiness=15, metric_window=45)
    workload = Workload(model, prefix="p", replicas=1, now=0)
    feed = MetricFeed(rps(100), model, own_column=False)
    for now, total in ((0, 100), (15, 200)):
        feed.observe(now=now, total=total, ready=1, pods=workload.pods)
    workload.scale_to(2, 15)  # p-00002: Running at 15, Ready at 30
    values, _ = feed.observe(now=30, total=600, ready=2, pods=workload.pods)
    # p-00001 over (-15, 30]: 100, 200, 300; p-00002 over its life [15, 30]: 0, 300.
    assert samples(values) == {"p-00001": 200_000, "p-00002": 150_000}
    assert isinstance(values, PodMetricValues)
    assert {s.timestamp for s in values.samples.values()} == {30}
    assert {s.window for s in values.samples.values()} == {45}


@pytest.mark.parametrize(
    ("spec", "ready", "kind", "ratio"),
    [
        (external(50), 2, ExternalMetricValues, 2.0),
        (external(25, average=True), 2, ExternalMetricValues, 2.0),
        (MetricSpec(type=MetricSourceType.OBJECT, name="q", target=MetricTarget(
            type=MetricTargetType.VALUE, value=Milli(200_000))), 2, ObjectMetricValue, 0.5),
    ],
    ids=["external-value", "external-average", "object-value"],
)
def test_single_value_metrics_carry_the_total(
    spec: MetricSpec, ready: int, kind: type, ratio: float
) -> None:
    """External and Object metrics see the total; the true ratio follows the target type."""
    feed = MetricFeed(spec, WorkloadModel(), own_column=False)
    values, load = feed.observe(now=0, total=100, ready=ready, pods=[])
    assert isinstance(values, kind)
    assert load.ratio == ratio
    expected = ExternalMetricValues(values=(Milli(100_000),)) if kind is ExternalMetricValues \
        else ObjectMetricValue(value=Milli(100_000))
    assert values == expected


def test_a_gap_is_an_unavailable_metric() -> None:
    """No value in the trace: the metric is unavailable, as when a query returns nothing."""
    feed = MetricFeed(rps(), WorkloadModel(), own_column=False)
    values, load = feed.observe(now=45, total=None, ready=1, pods=[])
    assert isinstance(values, MetricUnavailable)
    assert "no value for rps at 45s" in values.reason
    assert load.ratio is None


def test_load_with_no_ready_pod_has_no_ratio() -> None:
    """Demand that no Ready pod can take has no per-pod value; no demand is simply zero."""
    feed = MetricFeed(rps(), WorkloadModel(), own_column=False)
    assert feed.observe(now=0, total=10, ready=0, pods=[])[1].per_pod is None
    assert feed.observe(now=15, total=0, ready=0, pods=[])[1].ratio == 0.0


@pytest.mark.parametrize(
    ("model", "own_column", "message"),
    [
        (WorkloadModel(), False, "give the per-pod capacity"),
        (WorkloadModel(capacity=10, requests={}), False, "need a cpu request"),
        (WorkloadModel(capacity=10, requests={}), True, "need a cpu request"),
    ],
    ids=["no-capacity", "no-request", "no-request-own-column"],
)
def test_resource_metrics_need_capacity_and_request(
    model: WorkloadModel, own_column: bool, message: str
) -> None:
    """A Resource metric cannot be modelled without a request, nor from demand without capacity."""
    with pytest.raises(SimulationError, match=message):
        MetricFeed(cpu(), model, own_column=own_column)


def test_own_column_needs_no_capacity() -> None:
    """With a ``cpu`` column the total is already in cores."""
    feed = MetricFeed(cpu(50), WorkloadModel(), own_column=True)
    assert feed.total(1.5) == 1.5


def test_a_pod_reports_the_common_sample_once_ready_through_the_window() -> None:
    """A new pod's sample counts only its Ready steps until it has been Ready for a whole
    window; from then on it reports what every other pod does."""
    model = WorkloadModel(readiness=15, metric_window=30)
    workload = Workload(model, prefix="p", replicas=1, now=0)
    workload.scale_to(2, 0)  # p-00002: Running at 0, Ready at 15
    feed = MetricFeed(rps(100), model, own_column=False)
    workload.observe(0)
    feed.observe(now=0, total=100, ready=1, pods=workload.reporting)
    workload.observe(15)
    got = [samples(feed.observe(now=now, total=200, ready=2, pods=workload.reporting)[0])
           for now in (15, 30)]
    # At 15 p-00002 counts its two steps, Ready in one: (0 + 100) / 2; at 30 the window
    # (0, 30] holds only Ready steps of both.
    assert got == [{"p-00001": 100_000, "p-00002": 50_000},
                   {"p-00001": 100_000, "p-00002": 100_000}]
