"""Fixtures: a KubeSession on the simulated API server, whose every request must pass RBAC.

Each test that uses ``kube`` ends by replaying the simulator's request log against
deploy/rbac.yaml: a call the adapter makes that the shipped rules would refuse fails the
test that made it. Tests check results through the simulator's state, not through extra
HTTP calls, so the log holds only the adapter's own requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoscaler.adapters.kube.session import KubeSession
from tests.adapters.kube.rbac import allows, custom_scale_template, granted
from tests.sim.kube import SimApiServer, apiserver

__all__ = ["Ref", "Settings", "apiserver", "assert_rbac_covers", "kube"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Shaped like autoscaler.config.KubernetesSettings."""

    in_cluster: bool | None = False
    kubeconfig: Path | None = None
    context: str | None = None
    request_timeout: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Ref:
    """Shaped like autoscaler.config.ScaleTargetRef."""

    api_version: str = "apps/v1"
    kind: str = "Deployment"
    name: str = "web"


DISCOVERY_PREFIXES = ("/api", "/apis")  # system:discovery, granted to every authenticated user


def assert_rbac_covers(api: SimApiServer) -> None:
    """Every request in the simulator's log is allowed by deploy/rbac.yaml."""
    permissions, template = granted(), custom_scale_template()
    refused = []
    for record in api.log.records:
        if record.resource is None:
            if record.path == "/" or not record.path.startswith(DISCOVERY_PREFIXES) or \
                    "/namespaces/" in record.path:
                refused.append(f"{record.method} {record.path} (non-resource)")
            continue
        if record.group == "example.com" and record.resource.endswith("/scale"):
            # A custom resource: covered once the user adds the commented template rule.
            if record.verb not in template:
                refused.append(f"{record.verb} {record.resource} (custom /scale template)")
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
