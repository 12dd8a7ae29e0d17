"""Fixtures: a KubeSession on the simulated API server, whose every request must pass RBAC.

Each test that uses ``kube`` ends by replaying the simulator's request log against
deploy/rbac.yaml: a call the adapter makes that the shipped rules would refuse fails the
test that made it. Tests check results through the simulator's state, not through extra
HTTP calls, so the log holds only the adapter's own requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from autoscaler.adapters.kube.session import KubeSession
from autoscaler.config import KubernetesSettings, ScaleTargetRef
from tests.adapters.kube.rbac import allows, custom_resource_template, granted
from tests.sim.kube import SimApiServer, apiserver

__all__ = ["Ref", "Settings", "apiserver", "assert_rbac_covers", "kube"]


def Settings(*, in_cluster: bool | None = False, kubeconfig: Path | None = None,
             context: str | None = None, request_timeout: float = 5.0) -> KubernetesSettings:
    """The daemon's Kubernetes settings, defaulting to the kubeconfig and a short timeout."""
    return KubernetesSettings(in_cluster=in_cluster, kubeconfig=kubeconfig, context=context,
                              request_timeout=request_timeout)


def Ref(*, api_version: str = "apps/v1", kind: str = "Deployment",
        name: str = "web") -> ScaleTargetRef:
    """A scaleTargetRef, defaulting to Deployment web."""
    return ScaleTargetRef(api_version=api_version, kind=kind, name=name)


DISCOVERY_PREFIXES = ("/api", "/apis")  # system:discovery, granted to every authenticated user
_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "POST": "create", "DELETE": "delete"}


def _as_resource_request(method: str, path: str) -> tuple[str, str, str, str] | None:
    """(verb, group, resource, namespace) of a path to a resource the server does not serve:
    RBAC authorizes such a request like any other before the server answers 404."""
    parts = path.strip("/").split("/")
    group_version = parts[1:2] if parts[0] == "api" else parts[1:3]
    rest = parts[1 + len(group_version):]
    if len(rest) < 3 or rest[0] != "namespaces":
        return None
    namespace, plural, tail = rest[1], rest[2], rest[3:]
    verb = "list" if method == "GET" and not tail else _VERBS[method]
    resource = f"{plural}/{tail[1]}" if len(tail) > 1 else plural
    group = group_version[0] if parts[0] == "apis" else ""
    return verb, group, resource, namespace


def assert_rbac_covers(api: SimApiServer) -> None:
    """Every request in the simulator's log is allowed by deploy/rbac.yaml."""
    permissions, template = granted(), custom_resource_template()
    refused = []
    for record in api.log.records:
        if record.resource is None:
            unserved = _as_resource_request(record.method, record.path)
            if unserved is not None:
                verb, group, resource, namespace = unserved
                if not allows(permissions, verb=verb, group=group, resource=resource,
                              namespace=namespace):
                    refused.append(f"{verb} {group}/{resource} in {namespace} (unserved)")
            elif not record.path.startswith(DISCOVERY_PREFIXES):
                refused.append(f"{record.method} {record.path} (non-resource)")
            continue
        if record.group == "example.com":
            # A custom resource: covered once the user adds the commented template rules.
            part = "/scale" if record.resource.endswith("/scale") else ""
            if record.verb not in template[part]:
                refused.append(f"{record.verb} {record.resource} (custom resource template)")
            continue
        if not allows(permissions, verb=record.verb, group=record.group or "",
                      resource=record.resource, namespace=record.namespace):
            refused.append(f"{record.verb} {record.group}/{record.resource} in "
                           f"{record.namespace} ({record.method} {record.path})")
    assert not refused, "deploy/rbac.yaml does not allow: " + "; ".join(refused)


@pytest.fixture
async def kube(apiserver: SimApiServer) -> AsyncIterator[KubeSession]:
    """A session from the simulator's kubeconfig; afterwards, its requests must pass RBAC."""
    async with KubeSession.connect(Settings(kubeconfig=apiserver.kubeconfig)) as session:
        yield session
    assert_rbac_covers(apiserver)
