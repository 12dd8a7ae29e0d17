"""Pod JSON to the core's Pod: phase, readiness, times, deletion and requests."""

from datetime import UTC, datetime
from typing import Any

import pytest
import structlog.testing

from autoscaler.adapters.kube.pod_json import pod_from_json
from autoscaler.algorithm import ConditionStatus, PodPhase
from autoscaler.algorithm.pods import pod_requests


def unix(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "250m",
                                                                      "memory": "1Gi"}}}],
            "initContainers": [
                {"name": "setup", "resources": {"requests": {"cpu": "1"}}},
                {"name": "proxy", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "100m"}}},
            ],
        },
        "status": status,
    }


def test_running_ready_pod() -> None:
    """Phase, Ready and its transition time, start time and requests in milli-units."""
    converted = pod_from_json(pod(
        phase="Running", startTime="2026-01-02T03:04:05Z",
        conditions=[{"type": "Ready", "status": "True",
                     "lastTransitionTime": "2026-01-02T03:04:35Z"}]))
    assert converted.phase is PodPhase.RUNNING
    assert converted.ready is ConditionStatus.TRUE
    assert converted.start_time == unix("2026-01-02T03:04:05")
    assert converted.ready_transition_time == unix("2026-01-02T03:04:35")
    assert dict(converted.containers[0].requests) == {"cpu": 250, "memory": 1024**3 * 1000}
    assert not converted.deleting


def test_pods_that_started_in_the_same_second_share_its_timestamp() -> None:
    """Times are whole seconds and a rollout's pods share them: one float per instant,
    however many pods (and its texts, built apart, are equal but not the same objects)."""
    first, second = (pod_from_json(pod(
        phase="Running", startTime="".join(["2026-01-02T03:04:", "05Z"]),
        conditions=[{"type": "Ready", "status": "True",
                     "lastTransitionTime": "".join(["2026-01-02T03:04:", "35Z"])}]))
        for _ in range(2))
    assert first.start_time is second.start_time
    assert first.ready_transition_time is second.ready_transition_time
    assert first.start_time == unix("2026-01-02T03:04:05")

def test_only_restartable_init_containers_are_sidecars() -> None:
    """An init container with restartPolicy Always counts; a plain one does not."""
    converted = pod_from_json(pod(phase="Running"))
    assert [(c.name, dict(c.requests)) for c in converted.sidecars] == [("proxy", {"cpu": 100})]


@pytest.mark.parametrize(
    ("status", "phase", "ready"),
    [
        ({}, PodPhase.PENDING, None),
        ({"phase": "Failed"}, PodPhase.FAILED, None),
        ({"phase": "Weird"}, PodPhase.UNKNOWN, None),
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
         PodPhase.RUNNING, ConditionStatus.FALSE),
        ({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]},
         PodPhase.RUNNING, None),
    ],
    ids=["no-status-is-pending", "failed", "unknown-phase", "not-ready", "no-ready-condition"],
)
def test_phase_and_readiness(status: dict[str, Any], phase: PodPhase,
                             ready: ConditionStatus | None) -> None:
    """Missing phase means Pending; a missing Ready condition is None, not False."""
    converted = pod_from_json(pod(**status))
    assert (converted.phase, converted.ready) == (phase, ready)


def test_deleting_and_pod_level_requests() -> None:
    """A deletion timestamp marks the pod deleting; spec.resources.requests is kept."""
    raw = pod(phase="Running")
    raw["metadata"]["deletionTimestamp"] = "2026-01-02T03:05:00Z"
    raw["spec"]["resources"] = {"requests": {"cpu": "2"}}
    converted = pod_from_json(raw)
    assert converted.deleting
    assert converted.pod_requests == {"cpu": 2000}
    assert pod_from_json(pod(phase="Running")).pod_requests is None


def test_garbage_quantity_is_left_out() -> None:
    """An unparsable request is dropped, never fatal."""
    raw = pod(phase="Running")
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    assert dict(pod_from_json(raw).containers[0].requests) == {"memory": 1024**3 * 1000}


def test_each_pod_gets_its_own_quantities_and_garbage_is_logged_for_each() -> None:
    """Quantities are parsed once per distinct text (pods repeat them): a pod reads its own,
    spelled any way, as JSON numbers too, and an unparsable one is reported for every pod
    that carries it, not only the first."""
    spelled = {"1": 1000, "1000m": 1000, "0.5": 500, "1Ki": 1024 * 1000, "250m": 250}
    for text, milli in [*spelled.items(), *spelled.items()]:
        raw = pod(phase="Running")
        raw["spec"]["containers"][0]["resources"]["requests"] = {"cpu": text, "memory": 2}
        assert dict(pod_from_json(raw).containers[0].requests) == {"cpu": milli,
                                                                   "memory": 2000}
    with structlog.testing.capture_logs() as logs:
        for _ in range(2):
            raw = pod(phase="Running")
            raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
            assert "cpu" not in pod_from_json(raw).containers[0].requests
    assert [e["event"] for e in logs] == ["unparsable resource request"] * 2


def test_overhead_is_read_and_left_out_of_pod_level_requests() -> None:
    """spec.overhead is read, and the requests the daemon divides by exclude it, as
    upstream's since kubernetes#142154: pod-level cpu 800m with 250m overhead is 800m."""
    raw = pod(phase="Running")
    raw["spec"]["resources"] = {"requests": {"cpu": "800m"}}
    raw["spec"]["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    converted = pod_from_json(raw)
    assert converted.overhead == {"cpu": 250, "memory": 120 * 1024**2 * 1000}
    assert pod_requests([converted], resource="cpu", container=None) == {"web-1": 800}


def resized(**status: Any) -> dict[str, Any]:
    """A Running pod whose spec asks 1 cpu for app and 200m for its sidecar."""
    raw = pod(phase="Running", **status)
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    raw["spec"]["initContainers"][1]["resources"]["requests"]["cpu"] = "200m"
    return raw


@pytest.mark.parametrize(
    ("status", "app", "proxy"),
    [
        ({}, None, None),
        ({"containerStatuses": [{"name": "app", "resources": {
            "requests": {"cpu": "250m", "memory": "1Gi"}}}]},
         {"cpu": 250, "memory": 1024**3 * 1000}, None),
        ({"containerStatuses": [{"name": "app", "allocatedResources": {"cpu": "500m"}}]},
         {"cpu": 500}, None),
        ({"containerStatuses": [{"name": "app", "resources": {"requests": {"cpu": "250m"}},
                                 "allocatedResources": {"cpu": "1"}}]}, {"cpu": 250}, None),
        ({"containerStatuses": [{"name": "app", "resources": {"limits": {"cpu": "2"}}}]},
         None, None),
        ({"initContainerStatuses": [{"name": "proxy", "resources": {
            "requests": {"cpu": "100m"}}}]}, None, {"cpu": 100}),
        ({"containerStatuses": [{"name": "app", "resources": "garbage"}]}, None, None),
    ],
    ids=["no-statuses", "status-resources", "only-allocated", "resources-before-allocated",
         "limits-only", "sidecar-in-initContainerStatuses", "garbage-resources"],
)
def test_applied_requests_from_the_container_statuses(
    status: dict[str, Any], app: dict[str, int] | None, proxy: dict[str, int] | None
) -> None:
    """Each container's applied requests come from its status by name (resources.requests,
    else allocatedResources); the spec's requests stay as they are."""
    converted = pod_from_json(resized(**status))
    assert dict(converted.containers[0].requests)["cpu"] == 1000
    assert (None if converted.containers[0].applied is None
            else dict(converted.containers[0].applied)) == app
    assert (None if converted.sidecars[0].applied is None
            else dict(converted.sidecars[0].applied)) == proxy


def test_pod_level_applied_requests() -> None:
    """status.resources.requests (else status.allocatedResources) is the pod-level applied
    value, overhead included as the kubelet reports it; the core takes the overhead off."""
    raw = pod(phase="Running", resources={"requests": {"cpu": "1050m"}},
              allocatedResources={"cpu": "2"})
    raw["spec"]["resources"] = {"requests": {"cpu": "4"}}
    raw["spec"]["overhead"] = {"cpu": "250m"}
    converted = pod_from_json(raw)
    assert converted.pod_applied == {"cpu": 1050}
    assert pod_requests([converted], resource="cpu", container=None) == {"web-1": 800}
    assert pod_from_json(pod(phase="Running", allocatedResources={"cpu": "2"})).pod_applied \
        == {"cpu": 2000}
    assert pod_from_json(pod(phase="Running")).pod_applied is None
