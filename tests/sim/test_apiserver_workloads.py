"""Simulated controllers and kubelet: pods follow replicas and turn Ready on the injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.apiserver import argo_rollout_type
from tests.sim.kube import PodTiming, SimApiServer, apiserver, apiserver_manual, wait_until

__all__ = ["apiserver", "apiserver_manual"]


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in pod["status"]["conditions"] if c["type"] == kind)


def test_pods_turn_ready_after_the_delay(apiserver_manual: SimApiServer) -> None:
    """A new pod runs at once, is Ready only after ready_delay, with lastTransitionTime then."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=2, ready_delay=30)
    pods = api.pods("default", "app=web")
    assert [(p["status"]["phase"], _ready(p)) for p in pods] == [("Running", False)] * 2
    assert all(p["status"]["startTime"] for p in pods)
    api.advance(29)
    assert not any(_ready(p) for p in api.pods("default", "app=web"))
    api.advance(1)
    pods = api.pods("default", "app=web")
    assert all(_ready(p) for p in pods)
    assert _condition(pods[0], "Ready")["lastTransitionTime"] == "2026-01-01T00:00:30Z"


def test_pods_carry_template_labels_and_requests(apiserver_manual: SimApiServer) -> None:
    """Pods get the template's labels and requests, and belong to the Deployment's ReplicaSet."""
    api = apiserver_manual
    dep = api.create_deployment("default", "web", replicas=1, labels={"app": "web", "t": "x"},
                                requests={"cpu": "500m", "memory": "64Mi"})
    pod = api.pods("default", "app=web,t=x")[0]
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m",
                                                                     "memory": "64Mi"}
    [rs] = api.store.list(("apps", "replicasets"), "default")
    assert rs["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    assert pod["metadata"]["name"].startswith(rs["metadata"]["name"] + "-")
    assert pod["metadata"]["labels"]["pod-template-hash"] == rs["metadata"]["name"].split("-")[1]
    assert pod["status"]["qosClass"] == "Burstable"


def test_template_change_rolls_to_a_new_replica_set(apiserver_manual: SimApiServer) -> None:
    """A new template makes a new ReplicaSet with all replicas; the old one goes to zero."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=2)
    api.patch("apps/v1", "Deployment", "default", "web", {"spec": {"template": {
        "metadata": {"annotations": {"restartedAt": "now"}}}}})
    api.settle()
    sets = {rs["metadata"]["name"]: rs for rs in api.store.list(("apps", "replicasets"))}
    assert sorted(rs["spec"]["replicas"] for rs in sets.values()) == [0, 2]
    new = next(rs for rs in sets.values() if rs["spec"]["replicas"] == 2)
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert {p["metadata"]["ownerReferences"][0]["name"] for p in api.pods()} == {
        new["metadata"]["name"]}


def test_deployment_conditions(apiserver_manual: SimApiServer) -> None:
    """Available turns True once enough pods are Ready; Progressing reports the new set."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=4, ready_delay=10)
    conditions = {c["type"]: c for c in api.get("apps/v1", "Deployment", "default", "web")[
        "status"]["conditions"]}
    assert (conditions["Available"]["status"], conditions["Progressing"]["reason"]) == (
        "False", "ReplicaSetUpdated")
    api.advance(10)
    conditions = {c["type"]: c for c in api.get("apps/v1", "Deployment", "default", "web")[
        "status"]["conditions"]}
    assert conditions["Available"]["status"] == "True"
    assert conditions["Available"]["lastTransitionTime"] == "2026-01-01T00:00:10Z"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"


def test_deployment_status_follows_pods(apiserver_manual: SimApiServer) -> None:
    """status.replicas counts pods at once; readyReplicas only once they are Ready."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=3, ready_delay=10)
    status = api.get("apps/v1", "Deployment", "default", "web")["status"]
    assert (status["replicas"], status.get("readyReplicas", 0)) == (3, 0)
    api.advance(10)
    status = api.get("apps/v1", "Deployment", "default", "web")["status"]
    assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (3, 3, 3)


def test_scale_down_prefers_unready_pods_and_waits_for_termination(
        apiserver_manual: SimApiServer) -> None:
    """A scale-down deletes the not-ready pod first; it lingers with a deletionTimestamp."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=3, ready_delay=0, termination_delay=20)
    api.settle()
    victim = api.pods("default", "app=web")[1]["metadata"]["name"]
    api.set_pod_ready("default", victim, False)
    api.set_replicas("Deployment", "default", "web", 2)
    api.settle()
    terminating = [p["metadata"]["name"] for p in api.pods("default", "app=web")
                   if p["metadata"].get("deletionTimestamp")]
    assert terminating == [victim]
    assert api.get("apps/v1", "Deployment", "default", "web")["status"]["replicas"] == 2
    api.advance(20)
    assert victim not in {p["metadata"]["name"] for p in api.pods("default", "app=web")}


def test_deleted_pod_is_replaced(apiserver_manual: SimApiServer) -> None:
    """Deleting a pod with grace 0 removes it and the controller makes a new one."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=2)
    first = api.pods("default", "app=web")[0]["metadata"]["name"]
    pods_rt = api.resource("v1", "Pod")
    api.rest.delete(pods_rt, "default", first, {"gracePeriodSeconds": 0}, None)
    api.settle()
    names = {p["metadata"]["name"] for p in api.pods("default", "app=web")}
    assert len(names) == 2
    assert first not in names


def test_deleting_the_workload_collects_its_pods(apiserver_manual: SimApiServer) -> None:
    """Pods of a deleted deployment are garbage-collected."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=2)
    api.rest.delete(api.resource("apps/v1", "Deployment"), "default", "web", {}, None)
    api.settle()
    assert api.pods("default", "app=web") == []


def test_statefulset_ordered_ready_creates_one_ordinal_at_a_time(
        apiserver_manual: SimApiServer) -> None:
    """OrderedReady: db-2 appears only after db-1 is Ready; scale-down removes db-2 first."""
    api = apiserver_manual
    api.create_workload("StatefulSet", "default", "db", replicas=1,
                        timing=PodTiming(ready_delay=5))
    api.advance(5)
    api.set_replicas("StatefulSet", "default", "db", 3)
    api.settle()
    assert [p["metadata"]["name"] for p in api.pods()] == ["db-0", "db-1"]
    api.advance(5)
    assert [p["metadata"]["name"] for p in api.pods()] == ["db-0", "db-1", "db-2"]
    api.set_replicas("StatefulSet", "default", "db", 2)
    api.settle()
    assert [p["metadata"]["name"] for p in api.pods()] == ["db-0", "db-1"]


@pytest.mark.parametrize(("kind", "api_version"), [
    ("Rollout", "example.com/v1"), ("ReplicaSet", "apps/v1"), ("StatefulSet", "apps/v1"),
], ids=["rollout", "replicaset", "statefulset"])
def test_scale_view_of_every_workload(apiserver_manual: SimApiServer, kind: str,
                                      api_version: str) -> None:
    """Every workload kind shows replicas and the selector string through /scale."""
    api = apiserver_manual
    api.create_workload(kind, "default", "w", replicas=2, labels={"app": "w"},
                        extra_spec={"podManagementPolicy": "Parallel"} if kind == "StatefulSet"
                        else None)
    rt = api.resource(api_version, kind)
    scale = api.rest.get(rt, "default", "w", "scale")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=w"}


def test_no_op_update_keeps_the_resource_version(apiserver_manual: SimApiServer) -> None:
    """Writing the same object back commits nothing: same resourceVersion, no event."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=1)
    before = api.get("apps/v1", "Deployment", "default", "web")
    rv = api.store.resource_version
    after = api.rest.update(api.resource("apps/v1", "Deployment"), "default", "web", before)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert api.store.resource_version == rv


def test_spec_change_bumps_generation_but_status_does_not(apiserver_manual: SimApiServer) -> None:
    """metadata.generation counts spec changes only."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=1)
    assert api.get("apps/v1", "Deployment", "default", "web")["metadata"]["generation"] == 1
    api.set_replicas("Deployment", "default", "web", 2)
    api.settle()
    dep = api.get("apps/v1", "Deployment", "default", "web")
    assert (dep["metadata"]["generation"], dep["status"]["observedGeneration"]) == (2, 2)


def test_failed_pod_is_replaced_but_kept(apiserver_manual: SimApiServer) -> None:
    """A Failed pod stays listed, not Ready, and the controller adds a replacement."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=1)
    name = api.pods("default", "app=web")[0]["metadata"]["name"]
    api.set_pod_phase("default", name, "Failed")
    phases = sorted(p["status"]["phase"] for p in api.pods("default", "app=web"))
    assert phases == ["Failed", "Running"]
    failed = next(p for p in api.pods("default", "app=web") if p["metadata"]["name"] == name)
    assert not _ready(failed)


async def test_real_clock_readiness_delay(apiserver: SimApiServer) -> None:
    """On the wall clock, a ready_delay of 0.5 s turns pods Ready without any test action."""
    apiserver.create_deployment("default", "web", replicas=2, ready_delay=0.5)
    assert not any(_ready(p) for p in apiserver.pods("default", "app=web"))
    await wait_until(lambda: all(_ready(p) for p in apiserver.pods("default", "app=web")), 5)


def test_invalid_template_is_reported_as_an_event(apiserver_manual: SimApiServer) -> None:
    """A template the pod validation refuses gives one FailedCreate event, no pods, no crash."""
    api = apiserver_manual
    api.create_workload("ReplicaSet", "default", "bad", replicas=2,
                        extra_spec={"template": {"metadata": {"labels": {"app": "bad"}},
                                                 "spec": {"containers": []}}})
    api.settle()
    events = api.store.list(("", "events"), "default")
    assert [(e["reason"], e["involvedObject"]["name"]) for e in events] == [
        ("FailedCreate", "bad")]
    assert api.pods("default", "app=bad") == []


def test_argo_rollout_scale_reads_hpa_replicas(apiserver_manual: SimApiServer) -> None:
    """Argo's CRD keeps the Scale's status.replicas in status.HPAReplicas; the Scale shows it."""
    api = apiserver_manual
    api.add_custom_resource(argo_rollout_type())
    api.create_workload("Rollout", "default", "r", replicas=3, api_version="argoproj.io/v1alpha1")
    rollout = api.get("argoproj.io/v1alpha1", "Rollout", "default", "r")
    scale = api.rest.get(api.resource("argoproj.io/v1alpha1", "Rollout"), "default", "r", "scale")
    assert rollout["status"]["HPAReplicas"] == 3
    assert scale["status"] == {"replicas": 3, "selector": "app=r"}


def _resources(pod: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The first container's spec requests, applied requests and allocated resources."""
    status = pod["status"]["containerStatuses"][0]
    return (pod["spec"]["containers"][0]["resources"]["requests"],
            status["resources"]["requests"], status["allocatedResources"])


def test_a_started_container_reports_its_resources(apiserver_manual: SimApiServer) -> None:
    """As a 1.35 kubelet: once running, status resources and allocatedResources are the spec's."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=1, requests={"cpu": "500m"})
    (pod,) = api.pods("default", "app=web")
    assert _resources(pod) == ({"cpu": "500m"},) * 3


def test_a_held_resize_keeps_the_old_requests_applied(apiserver_manual: SimApiServer) -> None:
    """/resize changes the spec at once; held InProgress, the new requests are allocated but
    the old ones applied (PodResizeInProgress) until the resize finishes."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=1, requests={"cpu": "1"})
    name = api.pods("default", "app=web")[0]["metadata"]["name"]
    api.resize_pod("default", name, {"app": {"cpu": "4"}})
    (pod,) = api.pods("default", "app=web")
    assert _resources(pod) == ({"cpu": "4"}, {"cpu": "1"}, {"cpu": "4"})
    assert _condition(pod, "PodResizeInProgress")["status"] == "True"
    api.advance(30)
    assert _resources(api.pods("default", "app=web")[0])[1] == {"cpu": "1"}
    api.finish_resize("default", name)
    (pod,) = api.pods("default", "app=web")
    assert _resources(pod) == ({"cpu": "4"},) * 3
    assert not [c for c in pod["status"]["conditions"] if c["type"].startswith("PodResize")]


@pytest.mark.parametrize("hold", ["Deferred", "Infeasible"])
def test_a_pending_resize_allocates_nothing(apiserver_manual: SimApiServer, hold: str) -> None:
    """Deferred or Infeasible: neither allocated nor applied, PodResizePending says why."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=1, requests={"cpu": "1"})
    name = api.pods("default", "app=web")[0]["metadata"]["name"]
    api.resize_pod("default", name, {"app": {"cpu": "4"}}, hold=hold)
    (pod,) = api.pods("default", "app=web")
    assert _resources(pod) == ({"cpu": "4"}, {"cpu": "1"}, {"cpu": "1"})
    assert _condition(pod, "PodResizePending")["reason"] == hold


def test_an_unheld_resize_is_applied_at_once(apiserver_manual: SimApiServer) -> None:
    """Without a hold the kubelet applies a resize in its next pass."""
    api = apiserver_manual
    api.create_deployment("default", "web", replicas=1, requests={"cpu": "1"})
    name = api.pods("default", "app=web")[0]["metadata"]["name"]
    api.resize_pod("default", name, {"app": {"cpu": "250m"}}, hold=None)
    assert _resources(api.pods("default", "app=web")[0]) == ({"cpu": "250m"},) * 3
