"""Fidelity of the simulated API server, proven with the real kubectl (v1.32) as a client."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from tests.sim.kube import SimApiServer, apiserver, kubectl, wait_until

__all__ = ["apiserver"]

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None,
                                reason="LOUD: the real kubectl is not on PATH; fidelity unproven")


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()[1:]]


async def test_get_deployments_prints_the_server_side_table(apiserver: SimApiServer) -> None:
    """kubectl get deployments shows READY from the simulated status."""
    apiserver.create_deployment("default", "web", replicas=2)
    await wait_until(lambda: all(p["status"].get("conditions") for p in apiserver.pods()))
    await wait_until(lambda: apiserver.get("apps/v1", "Deployment", "default", "web")[
        "status"].get("readyReplicas") == 2)
    result = (await kubectl(apiserver, "get", "deployments")).check()
    assert _rows(result.stdout)[0][:4] == ["web", "2/2", "2", "2"]
    assert apiserver.count(verb="list", resource="deployments") == 1
    assert "as=Table" in apiserver.requests(verb="list", resource="deployments")[0].accept


async def test_get_pods_by_label(apiserver: SimApiServer) -> None:
    """kubectl get pods -l app=web lists exactly the web pods."""
    apiserver.create_deployment("default", "web", replicas=2)
    apiserver.create_deployment("default", "db", replicas=1)
    result = (await kubectl(apiserver, "get", "pods", "-l", "app=web")).check()
    names = [row[0] for row in _rows(result.stdout)]
    assert len(names) == 2
    assert all(name.startswith("web-") for name in names)


async def test_scale_deployment_creates_pods(apiserver: SimApiServer) -> None:
    """kubectl scale --replicas=5 goes through /scale and the simulated pods follow."""
    apiserver.create_deployment("default", "web", replicas=2)
    result = (await kubectl(apiserver, "scale", "deployment/web", "--replicas=5")).check()
    assert result.stdout.strip() == "deployment.apps/web scaled"
    await wait_until(lambda: len(apiserver.pods("default", "app=web")) == 5)
    assert apiserver.count(verb="patch", resource="deployments/scale") == 1


async def test_scale_with_a_stale_resource_version_is_refused(apiserver: SimApiServer) -> None:
    """kubectl scale --resource-version with an old version fails and changes nothing."""
    apiserver.create_deployment("default", "web", replicas=2)
    result = await kubectl(apiserver, "scale", "deployment/web", "--replicas=3",
                           "--resource-version=1")
    assert result.returncode != 0
    assert apiserver.get("apps/v1", "Deployment", "default", "web")["spec"]["replicas"] == 2


async def test_resize_a_pod_in_place(apiserver: SimApiServer) -> None:
    """kubectl patch --subresource resize changes the pod's requests through /resize; the
    kubelet applies them (a held resize leaves the old ones applied until released)."""
    apiserver.create_deployment("default", "web", replicas=1, requests={"cpu": "1"})
    await wait_until(lambda: apiserver.pods("default", "app=web")[0]["status"].get("phase")
                     == "Running")
    name = apiserver.pods("default", "app=web")[0]["metadata"]["name"]
    apiserver.workloads.kubelet.hold_resize("default", name, "InProgress")
    patch = '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"4"}}}]}}'
    (await kubectl(apiserver, "patch", "pod", name, "--subresource", "resize",
                   "--patch", patch)).check()
    assert apiserver.count(verb="patch", resource="pods/resize") == 1

    def applied() -> str:
        status = apiserver.pods("default", "app=web")[0]["status"]["containerStatuses"][0]
        return str(status["resources"]["requests"]["cpu"])

    pod = apiserver.pods("default", "app=web")[0]
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "4"}
    await wait_until(lambda: any(c["type"] == "PodResizeInProgress" for c in apiserver.pods(
        "default", "app=web")[0]["status"]["conditions"]))
    assert applied() == "1"
    apiserver.finish_resize("default", name)
    await wait_until(lambda: applied() == "4")


async def test_get_raw_scale(apiserver: SimApiServer) -> None:
    """kubectl get --raw of /scale returns an autoscaling/v1 Scale with a selector string."""
    apiserver.create_deployment("default", "web", replicas=3, labels={"app": "web", "tier": "fe"})
    result = (await kubectl(apiserver, "get", "--raw",
                            "/apis/apps/v1/namespaces/default/deployments/web/scale")).check()
    scale = json.loads(result.stdout)
    assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"]["selector"] == "app=web,tier=fe"


async def test_scale_custom_resource(apiserver: SimApiServer) -> None:
    """kubectl scale rollout/x finds the CR's /scale through discovery; pods follow."""
    apiserver.create_workload("Rollout", "default", "x", replicas=1)
    result = (await kubectl(apiserver, "scale", "rollout/x", "--replicas=3")).check()
    assert result.stdout.strip() == "rollout.example.com/x scaled"
    await wait_until(lambda: len(apiserver.pods("default", "app=x")) == 3)
    rollout = apiserver.get("example.com/v1", "Rollout", "default", "x")
    assert rollout["spec"]["replicas"] == 3


async def test_scale_statefulset(apiserver: SimApiServer) -> None:
    """kubectl scale sts/db adds ordinals one by one until all are Ready."""
    apiserver.create_workload("StatefulSet", "default", "db", replicas=1)
    (await kubectl(apiserver, "scale", "statefulset/db", "--replicas=3")).check()
    await wait_until(lambda: sorted(p["metadata"]["name"] for p in apiserver.pods()) == [
        "db-0", "db-1", "db-2"])


async def test_get_hpa(apiserver: SimApiServer) -> None:
    """kubectl get hpa resolves the short name and prints REFERENCE and bounds."""
    apiserver.create_hpa("default", "web", target_name="web", min_replicas=2, max_replicas=7)
    result = (await kubectl(apiserver, "get", "hpa")).check()
    row = _rows(result.stdout)[0]
    assert (row[0], row[1]) == ("web", "Deployment/web")
    assert row[-4:-1] == ["2", "7", "0"]


async def test_describe_shows_recorded_events(apiserver: SimApiServer) -> None:
    """kubectl describe deployment lists an event recorded against it via events.k8s.io."""
    apiserver.create_deployment("default", "web", replicas=1)
    uid = apiserver.get("apps/v1", "Deployment", "default", "web")["metadata"]["uid"]
    apiserver.create({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                      "metadata": {"name": "web.1", "namespace": "default"},
                      "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal",
                      "reportingController": "autoscaler", "reportingInstance": "a",
                      "action": "Scale", "reason": "SuccessfulRescale", "note": "New size: 4",
                      "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                    "namespace": "default", "uid": uid}})
    result = (await kubectl(apiserver, "describe", "deployment", "web")).check()
    assert "SuccessfulRescale" in result.stdout
    assert "New size: 4" in result.stdout


async def test_create_and_apply_with_validation(apiserver: SimApiServer, tmp_path: Path) -> None:
    """kubectl create and apply pass client validation on the minimal OpenAPI v3 documents."""
    manifest = tmp_path / "api.json"
    manifest.write_text(json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}))
    (await kubectl(apiserver, "create", "-f", str(manifest))).check()
    (await kubectl(apiserver, "apply", "-f", str(manifest))).check()
    await wait_until(lambda: len(apiserver.pods("default", "app=api")) == 2)


async def test_unknown_token_is_refused(apiserver: SimApiServer, tmp_path: Path) -> None:
    """kubectl with a wrong token gets Unauthorized."""
    config = apiserver.write_kubeconfig(tmp_path / "bad", token="wrong")
    result = await kubectl(apiserver, "get", "pods", kubeconfig=config)
    assert result.returncode != 0
    assert "Unauthorized" in result.stderr or "provide credentials" in result.stderr


async def test_watch_streams_pod_changes(apiserver: SimApiServer) -> None:
    """kubectl get pods --watch prints a pod created while it watches."""
    apiserver.create_deployment("default", "web", replicas=1)
    task = asyncio.create_task(kubectl(apiserver, "get", "pods", "--watch",
                                       "--request-timeout=3s", timeout=10))
    await wait_until(lambda: apiserver.count(verb="watch", resource="pods") == 1)
    apiserver.set_replicas("Deployment", "default", "web", 2)
    result = await task
    names = {row[0] for row in _rows(result.stdout)}
    assert len(names) == 2


MANIFESTS = """\
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: app, namespace: shop}
rules: [{apiGroups: [""], resources: [pods], verbs: [list, watch]}]
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: shop}
spec: {selector: {app: app}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec: {containers: [{name: app, image: "registry.example/app:1"}]}
"""


async def test_apply_manifests_then_server_dry_run(apiserver: SimApiServer,
                                                   tmp_path: Path) -> None:
    """kubectl apply creates every kind of a deploy directory; a server dry run commits nothing."""
    (tmp_path / "all.yaml").write_text(MANIFESTS)
    result = (await kubectl(apiserver, "apply", "-f", str(tmp_path / "all.yaml"))).check()
    assert result.stdout.count(" created") == 5
    await wait_until(lambda: len(apiserver.pods("shop", "app=app")) == 2)
    service = apiserver.get("v1", "Service", "shop", "app")
    assert service["spec"]["clusterIP"].startswith("10.96.")
    assert service["spec"]["ports"][0]["targetPort"] == 80
    before = apiserver.store.resource_version
    (tmp_path / "all.yaml").write_text(MANIFESTS.replace("replicas: 2", "replicas: 4"))
    result = (await kubectl(apiserver, "apply", "-f", str(tmp_path / "all.yaml"),
                            "--dry-run=server")).check()
    assert "deployment.apps/app configured (server dry run)" in result.stdout
    assert apiserver.store.resource_version == before
    assert len(apiserver.pods("shop", "app=app")) == 2
