"""Server-side apply in the simulated API server, with the real kubectl and raw requests."""

from __future__ import annotations

import shutil
import ssl
from pathlib import Path

import aiohttp
import pytest

from tests.sim.apiserver.tls import server_tls
from tests.sim.kube import SimApiServer, apiserver, http, kubectl, wait_until

__all__ = ["apiserver"]

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None,
                                reason="LOUD: the real kubectl is not on PATH; fidelity unproven")

DEPLOY = Path(__file__).parents[2] / "deploy"
APPLY = "application/apply-patch+yaml"
CONFIGMAP = "/api/v1/namespaces/default/configmaps/settings"


def configmap(**data: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "default"}, "data": data}


async def apply_yaml(api: SimApiServer, path: str, text: str) -> tuple[int, str]:
    """One apply PATCH whose body is YAML (kubectl sends JSON, which is YAML too)."""
    context = ssl.create_default_context(cafile=str(server_tls().ca_cert))
    headers = {"Authorization": f"Bearer {api.token}", "Content-Type": APPLY}
    async with aiohttp.ClientSession() as session, session.patch(
            f"{api.url}{path}?fieldManager=test", data=text.encode(), headers=headers,
            ssl=context) as response:
        return response.status, await response.text()


async def test_kubectl_server_side_apply_of_deploy(apiserver: SimApiServer,
                                                   tmp_path: Path) -> None:
    """`kubectl apply --server-side` of the rendered deploy/ creates every object (each a
    201 to an apply PATCH naming its field manager); applied again, it writes nothing."""
    rendered = (await kubectl(apiserver, "kustomize", str(DEPLOY))).check().stdout
    (tmp_path / "deploy.yaml").write_text(rendered)
    first = await kubectl(apiserver, "apply", "--server-side", "-f", str(tmp_path / "deploy.yaml"))
    assert first.returncode == 0, first.stderr
    applied = first.stdout.splitlines()
    assert len(applied) == rendered.count("\nkind: ") + rendered.startswith("kind: ")
    assert all(line.endswith(" serverside-applied") for line in applied)
    patches = apiserver.requests(method="PATCH")
    assert {(r.status, r.content_type, r.query.get("fieldManager")) for r in patches} == {
        (201, APPLY, "kubectl")}
    assert apiserver.get("policy/v1", "PodDisruptionBudget", "autoscaler", "autoscaler")
    await wait_until(lambda: len(apiserver.pods("autoscaler")) == 2)
    before = apiserver.store.resource_version
    again = await kubectl(apiserver, "apply", "--server-side", "-f", str(tmp_path / "deploy.yaml"))
    assert again.returncode == 0, again.stderr
    assert apiserver.store.resource_version == before


async def test_apply_merges_into_the_existing_object(apiserver: SimApiServer) -> None:
    """A second apply changes what it names and keeps the rest; a new resourceVersion."""
    created = await http(apiserver, "PATCH", CONFIGMAP + "?fieldManager=test",
                         body=configmap(a="1", b="2"), content_type=APPLY)
    assert created.status == 201
    changed = await http(apiserver, "PATCH", CONFIGMAP + "?fieldManager=test",
                         body=configmap(b="3"), content_type=APPLY)
    assert changed.status == 200
    assert changed.json()["data"] == {"a": "1", "b": "3"}
    assert changed.json()["metadata"]["resourceVersion"] != \
        created.json()["metadata"]["resourceVersion"]


async def test_apply_merges_containers_by_name(apiserver: SimApiServer) -> None:
    """On a built-in kind, lists of named items merge item by item (strategic merge)."""
    apiserver.create_deployment("default", "web", replicas=1)
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "registry.example/app:2.0"}]}}}}
    result = await http(apiserver, "PATCH", "/apis/apps/v1/namespaces/default/deployments/web"
                        "?fieldManager=test", body=body, content_type=APPLY)
    assert result.status == 200, result.text
    (container,) = result.json()["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/app:2.0"
    assert result.json()["spec"]["replicas"] == 1


async def test_apply_takes_a_yaml_body(apiserver: SimApiServer) -> None:
    """The apply content type is YAML: a YAML body is read as such."""
    status, _ = await apply_yaml(apiserver, CONFIGMAP, (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\n"
        "data: {greeting: hello}\n"))
    assert status == 201
    assert apiserver.get("v1", "ConfigMap", "default", "settings")["data"] == {
        "greeting": "hello"}


@pytest.mark.parametrize(("path", "body", "status"), [
    (CONFIGMAP, configmap(a="1"), 422),
    (CONFIGMAP + "?fieldManager=test", {"data": {"a": "1"}}, 400),
    ("/api/v1/namespaces/default/configmaps/other?fieldManager=test", configmap(a="1"), 400),
    ("/apis/apps/v1/namespaces/default/deployments/web/scale?fieldManager=test",
     {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}}, 415),
], ids=["no-field-manager", "no-kind", "other-name", "subresource"])
async def test_apply_refuses_what_upstream_refuses_or_is_not_modelled(
        apiserver: SimApiServer, path: str, body: dict[str, object], status: int) -> None:
    """No fieldManager (422), a body that is not a whole object or names another object
    (400), apply to a subresource (415, not modelled); nothing is written."""
    apiserver.create_deployment("default", "web", replicas=1)
    before = apiserver.store.resource_version
    result = await http(apiserver, "PATCH", path, body=body, content_type=APPLY)
    assert result.status == status, result.text
    assert apiserver.store.resource_version == before


async def test_apply_server_dry_run_commits_nothing(apiserver: SimApiServer) -> None:
    """dryRun=All answers as the apply would, and stores nothing."""
    result = await http(apiserver, "PATCH", CONFIGMAP + "?fieldManager=test&dryRun=All",
                        body=configmap(a="1"), content_type=APPLY)
    assert result.status == 201
    assert apiserver.get("v1", "ConfigMap", "default", "settings") is None
