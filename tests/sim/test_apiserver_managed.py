"""``metadata.managedFields`` for the replicas: whoever last set the count owns
``f:spec.f:replicas``, as upstream records it (kubernetes#98377): through ``/scale`` in an
entry marked ``subresource: scale``, through the object without it; a write that leaves the
count as it was takes nothing over."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.kube import SimApiServer, apiserver, http, kubectl

__all__ = ["apiserver"]

SCALE = "/apis/apps/v1/namespaces/default/deployments/web/scale"


def owners(api: SimApiServer) -> list[tuple[str, str, str | None]]:
    """(manager, operation, subresource) of each entry owning spec.replicas."""
    obj = api.get("apps/v1", "Deployment", "default", "web")
    assert obj is not None
    return [(e["manager"], e["operation"], e.get("subresource"))
            for e in obj["metadata"].get("managedFields", [])
            if "f:replicas" in e["fieldsV1"].get("f:spec", {})]


def scale_body(api: SimApiServer, replicas: int) -> dict[str, Any]:
    obj = api.get("apps/v1", "Deployment", "default", "web")
    assert obj is not None
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web", "namespace": "default",
                         "resourceVersion": obj["metadata"]["resourceVersion"]},
            "spec": {"replicas": replicas}}


async def test_a_scale_update_names_its_field_manager(apiserver: SimApiServer) -> None:
    """The creator owns the count; a PUT /scale with fieldManager=autoscaler takes it over
    (subresource scale); a PUT of the same count changes nothing."""
    apiserver.create_deployment("default", "web", replicas=2, labels={"app": "web"})
    assert owners(apiserver) == [("sim", "Update", None)]
    result = await http(apiserver, "PUT", SCALE + "?fieldManager=autoscaler",
                        body=scale_body(apiserver, 0))
    assert result.status == 200
    assert owners(apiserver) == [("autoscaler", "Update", "scale")]
    entry = apiserver.get("apps/v1", "Deployment", "default", "web")["metadata"][
        "managedFields"][0]  # type: ignore[index]
    assert entry["apiVersion"] == "apps/v1"
    assert entry["time"].endswith("Z")
    apiserver.set_replicas("Deployment", "default", "web", 0, manager="kubectl")
    assert owners(apiserver) == [("autoscaler", "Update", "scale")]


@pytest.mark.parametrize(("args", "manager"), [
    (("scale", "deployment/web", "--replicas=0"), "kubectl"),
    (("patch", "deployment/web", "-p", '{"spec":{"replicas":3}}'), "kubectl-patch"),
], ids=["kubectl-scale", "kubectl-patch"])
async def test_kubectl_takes_the_count_over_under_its_own_name(
    apiserver: SimApiServer, args: tuple[str, ...], manager: str,
) -> None:
    """The real kubectl, as a person runs it: its manager owns the count afterwards."""
    apiserver.create_deployment("default", "web", replicas=2, labels={"app": "web"})
    await http(apiserver, "PUT", SCALE + "?fieldManager=autoscaler",
               body=scale_body(apiserver, 1))
    done = await kubectl(apiserver, *args)
    assert done.returncode == 0, done.stderr
    assert [(name, operation) for name, operation, _ in owners(apiserver)] == [
        (manager, "Update")]


async def test_without_a_field_manager_the_user_agent_names_the_writer(
    apiserver: SimApiServer,
) -> None:
    apiserver.create_deployment("default", "web", replicas=2, labels={"app": "web"})
    await http(apiserver, "PUT", SCALE, body=scale_body(apiserver, 4),
               headers={"User-Agent": "OpenAPI-Generator/36.1.0/python"})
    assert owners(apiserver) == [("OpenAPI-Generator", "Update", "scale")]
