"""Each API request's verb and answer, as the API server's audit log names them, reported to
the session's observer: over real HTTPS to the simulated API server."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import AppsV1Api, CoreV1Api

from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.verbs import request_verb
from tests.adapters.kube.conftest import Settings
from tests.sim.kube import SimApiServer

API = "https://10.0.0.1:6443"


@pytest.mark.parametrize(("method", "path", "query", "verb"), [
    ("GET", "/api/v1/namespaces/shop/pods", [("labelSelector", "app=web")], "list"),
    ("GET", "/api/v1/pods", None, "list"),
    ("GET", "/api/v1/namespaces/shop/pods", [("watch", True)], "watch"),
    ("GET", "/apis/apps/v1/namespaces/shop/deployments", {"watch": "true"}, "watch"),
    ("GET", "/apis/apps/v1/namespaces/shop/deployments/web", None, "get"),
    ("GET", "/apis/apps/v1/namespaces/shop/deployments/web/scale", None, "get"),
    ("GET", "/api/v1/namespaces", None, "list"),
    ("GET", "/api/v1/namespaces/shop", None, "get"),
    ("GET", "/apis/apps/v1", None, "get"),
    ("GET", "/api", None, "get"),
    ("PUT", "/apis/apps/v1/namespaces/shop/deployments/web/scale", None, "update"),
    ("POST", "/api/v1/namespaces/shop/events", None, "create"),
    ("PATCH", "/api/v1/namespaces/shop/events/e", None, "patch"),
    ("DELETE", "/api/v1/namespaces/shop/pods/p", None, "delete"),
], ids=["list", "list-all-namespaces", "watch", "watch-dict", "get", "get-subresource",
        "list-namespaces", "get-namespace", "discovery-group", "discovery-root", "update",
        "create", "patch", "delete"])
def test_request_verb(method: str, path: str, query: object, verb: str) -> None:
    """GET is get, list or watch by its path and query; writes by their method."""
    assert request_verb(method, API + path, query) == verb  # type: ignore[arg-type]


async def test_every_request_is_reported_with_its_verb_and_code(
    apiserver: SimApiServer,
) -> None:
    """A list, a get, a missing object and a watch: each reported once, with its HTTP code."""
    apiserver.create_deployment("default", "web", replicas=2, labels={"app": "web"})
    seen: list[tuple[str, str]] = []
    settings = Settings(kubeconfig=apiserver.kubeconfig)
    async with KubeSession.connect(settings, on_request=lambda *r: seen.append(r)) as session:
        core, apps = CoreV1Api(session.api_client), AppsV1Api(session.api_client)
        await core.list_namespaced_pod("default")
        await apps.read_namespaced_deployment("web", "default")
        with pytest.raises(Exception, match="404"):
            await apps.read_namespaced_deployment("absent", "default")
        async with watch.Watch() as stream:
            async for _ in stream.stream(core.list_namespaced_pod, "default", timeout_seconds=1):
                break
    assert seen == [("list", "200"), ("get", "200"), ("get", "404"), ("watch", "200")]
