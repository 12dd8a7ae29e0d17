"""Pod classification and requests, ported from upstream's TestGroupPods and TestCalculateRequests."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import Pod, PodSample
from autoscaler.algorithm.model import PodPhase
from autoscaler.algorithm.pods import MetricError, PodView, group_pods, pod_requests
from tests.algorithm.builders import (
    FAILED,
    FALSE,
    NOW,
    PENDING,
    TESTING,
    TRUE,
    container,
    pod,
    sample,
)

SUCCEEDED = PodPhase.SUCCEEDED


def minutes(m: float) -> float:
    return NOW - 60.0 * m


# upstream: TestGroupPods. Upstream's pods mostly have phase Succeeded; a pod without a Ready
# condition has ready=None, and one without status.startTime has start=None.
GROUP_PODS = [
    pytest.param([], {}, "cpu", (0, set(), set(), set()), id="void"),
    pytest.param([pod("bentham", phase=SUCCEEDED, ready=None, start=None)],
                 {"bentham": sample(1, timestamp=NOW)}, "memory", (1, set(), set(), set()),
                 id="count-in-ready-pod-memory"),
    pytest.param([pod("lucretius", phase=SUCCEEDED, ready=None, start=NOW)],
                 {"lucretius": sample(1)}, "cpu", (0, {"lucretius"}, set(), set()),
                 id="unready-pod-without-ready-condition-cpu"),
    pytest.param([pod("bentham", phase=SUCCEEDED, start=minutes(1), transition=NOW - 30)],
                 {"bentham": sample(1, timestamp=NOW, window=30)}, "cpu", (1, set(), set(), set()),
                 id="ready-pod-fresh-metrics-during-initialization-cpu"),
    pytest.param([pod("bentham", phase=SUCCEEDED, start=minutes(1), transition=NOW - 30)],
                 {"bentham": sample(1, timestamp=NOW, window=60)}, "cpu",
                 (0, {"bentham"}, set(), set()),
                 id="ready-pod-stale-metrics-during-initialization-cpu"),
    pytest.param([pod("lucretius", phase=SUCCEEDED, ready=FALSE, start=minutes(10),
                      transition=minutes(9) - 54)],
                 {"lucretius": sample(1)}, "cpu", (0, {"lucretius"}, set(), set()),
                 id="unready-pod-during-initialization-cpu"),
    pytest.param([pod("bentham", phase=SUCCEEDED, start=minutes(3), transition=minutes(3))],
                 {"bentham": sample(1, timestamp=minutes(2))}, "cpu", (1, set(), set(), set()),
                 id="ready-pod-stale-metrics-after-initialization-cpu"),
    pytest.param([pod("lucretius", phase=SUCCEEDED, ready=FALSE, start=minutes(10),
                      transition=minutes(9))],
                 {"lucretius": sample(1)}, "cpu", (1, set(), set(), set()),
                 id="unready-pod-that-was-ready-after-initialization-cpu"),
    pytest.param([pod("lucretius", phase=SUCCEEDED, ready=FALSE, start=minutes(10),
                      transition=minutes(9) - 50)],
                 {"lucretius": sample(1)}, "cpu", (1, set(), set(), set()),
                 id="unready-pod-never-ready-after-initialization-cpu"),
    pytest.param([pod("epicurus", phase=SUCCEEDED, ready=None, start=minutes(3))], {}, "cpu",
                 (0, set(), {"epicurus"}, set()), id="a-missing-pod"),
    pytest.param([pod("lucretius", phase=SUCCEEDED, ready=None, start=NOW),
                  pod("niccolo", phase=SUCCEEDED, start=minutes(3), transition=minutes(3)),
                  pod("epicurus", phase=SUCCEEDED, ready=None, start=minutes(3))],
                 {"lucretius": sample(1), "niccolo": sample(1)}, "cpu",
                 (1, {"lucretius"}, {"epicurus"}, set()), id="several-pods"),
    pytest.param([pod("unscheduled", phase=PENDING, ready=None, start=None)], {}, "cpu",
                 (0, {"unscheduled"}, set(), set()), id="pending-pods-are-unreadied"),
    pytest.param([pod("deleted", phase=PENDING, ready=None, start=None, deleting=True)],
                 {"deleted": sample(1)}, "cpu", (0, set(), set(), {"deleted"}),
                 id="ignore-pods-with-deletion-timestamps"),
    pytest.param([pod("failed", phase=FAILED, ready=None, start=None)], {"failed": sample(1)},
                 "cpu", (0, set(), set(), {"failed"}), id="ignore-pods-in-failed-state"),
]


@pytest.mark.parametrize(("pods", "samples", "resource", "expected"), GROUP_PODS)
def test_group_pods(
    pods: list[Pod], samples: dict[str, PodSample], resource: str,
    expected: tuple[int, set[str], set[str], set[str]],
) -> None:
    """Each pod lands in upstream's class: ready, unready, missing or ignored."""
    groups = group_pods(pods, samples, resource=resource, now=NOW, settings=TESTING)
    got = (groups.ready_count, set(groups.unready), set(groups.missing), set(groups.ignored))
    assert got == expected


def test_unready_pod_keeps_its_sample_for_memory() -> None:
    """Readiness rules apply to cpu only: an unready pod's memory sample counts (upstream
    groupPods checks readiness only when the resource is cpu)."""
    unready = pod("p", ready=FALSE, start=NOW)
    assert group_pods([unready], {"p": sample(1)}, resource="memory", now=NOW,
                      settings=TESTING).ready_count == 1


C1 = container("container1", cpu=100)
C2 = container("container2", cpu=50)

# upstream: TestCalculateRequests (replica_calculator_test.go, store 54802859854), each row by
# its upstream name. pod_requests=None models the PodLevelResources gate off or pod-level
# requests not set; the gate is always on here (upstream's default since 1.34).
CALCULATE_REQUESTS = [
    pytest.param([], None, {}, id="void"),
    pytest.param([pod("test-pod", containers=[C1, C2])], None, {"test-pod": 150},
                 id="Sum container requests if pod-level feature is disabled"),
    pytest.param([pod("test-pod", containers=[C1, C2], pod_requests={})], None,
                 {"test-pod": 150},
                 id="Pod-level resources are enabled, but not set: fallback to sum container "
                    "requests"),
    pytest.param([pod("test-pod", containers=[C1, C2], pod_requests={"cpu": 800})], None,
                 {"test-pod": 800},
                 id="Pod-level resources override container requests when feature enabled and "
                    "pod resources specified"),
    pytest.param([pod("test-pod", containers=[container("container1"), C2],
                      pod_requests={"cpu": 800})], None, {"test-pod": 800},
                 id="Pod-level resources override missing container requests when feature "
                    "enabled and pod resources specified"),
    pytest.param([pod("test-pod", containers=[C1, C2])], "container1", {"test-pod": 100},
                 id="Container: if a container name is specified, calculate requests only for "
                    "that container"),
    pytest.param([pod("test-pod", containers=[C1, C2], pod_requests={"cpu": 800})], "container1",
                 {"test-pod": 100},
                 id="Container: if a container name is specified, calculate requests only for "
                    "that container and ignore pod-level requests"),
    pytest.param([pod("test-pod", containers=[C1],
                      sidecars=[container("restartable-container1", cpu=50)])], None,
                 {"test-pod": 150}, id="pod with restartable init containers"),
    # ours, after upstream's PodRequests: a pod-level value for another resource does not
    # hide the containers' requests for this one.
    pytest.param([pod("test-pod", containers=[C1, C2], pod_requests={"memory": 1024})], None,
                 {"test-pod": 150}, id="ours-pod-level-other-resource-uses-containers"),
    # kubernetes#142154 (merged; its test rows are not in the store, so the numbers are ours,
    # on TestCalculateRequests' pod): ExcludeOverhead, the RuntimeClass overhead is not a
    # request, at pod level as in the container sum.
    pytest.param([pod("test-pod", containers=[C1, C2], pod_requests={"cpu": 800},
                      overhead={"cpu": 250})], None, {"test-pod": 800},
                 id="kubernetes#142154: overhead excluded from pod-level requests"),
    pytest.param([pod("test-pod", containers=[C1, C2], pod_requests={"memory": 1024},
                      overhead={"cpu": 250})], None, {"test-pod": 150},
                 id="kubernetes#142154: overhead excluded from the pod-level aggregate"),
    pytest.param([pod("test-pod", containers=[C1, C2], overhead={"cpu": 250})], None,
                 {"test-pod": 150}, id="ours-container-sum-ignores-overhead"),
]


@pytest.mark.parametrize(("pods", "named", "expected"), CALCULATE_REQUESTS)
def test_calculate_requests(pods: list[Pod], named: str | None, expected: dict[str, int]) -> None:
    """Requests come from the named container, pod-level requests or the container sum."""
    assert pod_requests(pods, resource="cpu", container=named) == expected


@pytest.mark.parametrize(
    ("pods", "named", "message"),
    [
        # upstream: TestCalculateRequests
        pytest.param([pod("test-pod", containers=[container("container1"), C2])], None,
                     "missing request for cpu in container container1 of Pod test-pod",
                     id="Fail if at least one of the containers is missing requests and "
                        "pod-level feature/requests are not set"),
        # upstream: TestCalculatePodRequestsFromContainers_NonExistentContainer
        pytest.param([pod("test-pod", containers=[C1])], "non-existent-container",
                     "container non-existent-container not found in Pod test-pod",
                     id="TestCalculatePodRequestsFromContainers_NonExistentContainer"),
        # ours, after calculatePodLevelRequests: nobody requests the resource
        pytest.param([pod("test-pod", containers=[container("c")], pod_requests={"memory": 1})],
                     None, "missing pod-level request for cpu in Pod test-pod",
                     id="ours-pod-level-set-resource-missing-everywhere"),
    ],
)
def test_calculate_requests_errors(pods: list[Pod], named: str | None, message: str) -> None:
    """A missing request fails the metric with upstream's exact message."""
    with pytest.raises(MetricError) as raised:
        pod_requests(pods, resource="cpu", container=named)
    assert str(raised.value) == message


def test_pod_level_request_without_supported_resource_is_ignored() -> None:
    """IsPodLevelRequestsSet looks for cpu, memory or huge pages only."""
    odd = pod("p", containers=[C1], pod_requests={"ephemeral-storage": 5})
    assert pod_requests([odd], resource="cpu", container=None) == {"p": 100}


def test_unready_pending_pod_is_classified_before_samples() -> None:
    """A Pending pod is unready even without a sample (never missing)."""
    groups = group_pods([pod("p", phase=PENDING, ready=TRUE)], {}, resource="cpu", now=NOW,
                        settings=TESTING)
    assert groups.unready == {"p"}
    assert not groups.missing


# --- PodView: the same answers, computed once ---------------------------------------------


@pytest.mark.parametrize(("pods", "samples", "resource", "expected"), GROUP_PODS)
def test_view_groups_as_group_pods(
    pods: list[Pod], samples: dict[str, PodSample], resource: str,
    expected: tuple[int, set[str], set[str], set[str]],
) -> None:
    """A view groups its pods as ``group_pods`` does, asked once or again."""
    view = PodView(pods)
    for _ in range(2):
        groups = view.groups(samples, resource=resource, now=NOW, settings=TESTING)
        got = (groups.ready_count, set(groups.unready), set(groups.missing), set(groups.ignored))
        assert got == expected


def test_view_regroups_cpu_while_a_pod_initializes() -> None:
    """While a pod is initializing, its cpu sample's time decides: the view does not hand
    back the grouping of an earlier pass (same names, staler sample)."""
    view = PodView([pod("p", start=NOW - 60, transition=NOW - 30)])
    stale = view.groups({"p": sample(1, timestamp=NOW, window=60)}, resource="cpu", now=NOW,
                        settings=TESTING)
    fresh = view.groups({"p": sample(1, timestamp=NOW + 15, window=30)}, resource="cpu",
                        now=NOW + 15, settings=TESTING)
    assert (stale.unready, fresh.ready_count) == ({"p"}, 1)


def test_view_regroups_when_the_samples_name_other_pods() -> None:
    """A pod whose sample went missing is missing, whatever the view grouped before."""
    view = PodView([pod("a"), pod("b")])
    view.groups({"a": sample(1), "b": sample(1)}, resource="memory", now=NOW, settings=TESTING)
    assert view.groups({"a": sample(1)}, resource="memory", now=NOW,
                       settings=TESTING).missing == {"b"}


@pytest.mark.parametrize(("pods", "named", "expected"), CALCULATE_REQUESTS)
def test_view_requests_as_pod_requests(
    pods: list[Pod], named: str | None, expected: dict[str, int],
) -> None:
    """A view's requests are ``pod_requests``', asked once or again."""
    view = PodView(pods)
    assert view.requests(resource="cpu", container=named) == expected
    assert view.requests(resource="cpu", container=named) == expected


def test_view_request_failure_fails_again() -> None:
    """A missing request fails every time it is asked for, not only the first."""
    view = PodView([pod("test-pod", containers=[container("container1")])])
    for _ in range(2):
        with pytest.raises(MetricError, match="missing request for cpu"):
            view.requests(resource="cpu", container=None)
