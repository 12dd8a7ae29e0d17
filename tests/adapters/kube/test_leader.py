"""Leader election on a Lease, over real HTTPS against the simulated API server."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import pytest

from autoscaler.adapters.kube.leader import LeaderElector, LeaseConfig
from autoscaler.adapters.kube.session import KubeSession
from tests.adapters.kube.conftest import Settings, apiserver, assert_rbac_covers, kube
from tests.sim.kube import SimApiServer, wait_until

__all__ = ["apiserver", "kube"]
NAMESPACE = "autoscaler"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def config(identity: str) -> LeaseConfig:
    return LeaseConfig(namespace=NAMESPACE, name="autoscaler", identity=identity,
                       lease_duration=2.0, renew_deadline=1.5, retry_period=0.2,
                       request_timeout=2.0)


def lease(api: SimApiServer) -> dict[str, object]:
    found = api.get("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler")
    assert found is not None
    spec: dict[str, object] = found["spec"]
    return spec


@contextlib.asynccontextmanager
async def running(elector: LeaderElector) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(elector.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def second(apiserver: SimApiServer) -> AsyncIterator[KubeSession]:
    async with KubeSession.connect(Settings(kubeconfig=apiserver.kubeconfig)) as session:
        yield session


async def test_acquires_a_missing_lease_with_micro_times(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """The first candidate creates the Lease, holds it, and stamps MicroTime (six digits, Z)."""
    apiserver.create_namespace(NAMESPACE)
    elector = LeaderElector(kube.api_client, config("alpha"))
    async with running(elector):
        await wait_until(lambda: elector.is_leader, timeout=5)
        spec = lease(apiserver)
        assert spec["holderIdentity"] == "alpha"
        assert spec["leaseDurationSeconds"] == 2
        assert MICRO_TIME.match(str(spec["renewTime"]))
        assert MICRO_TIME.match(str(spec["acquireTime"]))


async def test_standby_waits_then_takes_over_after_release(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession,
) -> None:
    """While the leader renews, the other stays standby; a release hands over at once."""
    apiserver.create_namespace(NAMESPACE)
    alpha = LeaderElector(kube.api_client, config("alpha"))
    beta = LeaderElector(second.api_client, config("beta"))
    async with running(alpha):
        await wait_until(lambda: alpha.is_leader, timeout=5)
        async with running(beta):
            await asyncio.sleep(2.5)  # longer than the lease: renewals keep it alpha's
            assert not beta.is_leader
            assert lease(apiserver)["holderIdentity"] == "alpha"
            await alpha.release()
            assert not alpha.is_leader
            await wait_until(lambda: beta.is_leader, timeout=2)
            assert lease(apiserver)["holderIdentity"] == "beta"
            assert lease(apiserver)["leaseTransitions"] == 1


async def test_a_crashed_leader_is_replaced_and_never_overlaps(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession,
) -> None:
    """A leader that stops renewing loses is_leader after renew_deadline, before the standby
    can take the lease after lease_duration: at no instant are both leaders."""
    apiserver.create_namespace(NAMESPACE)
    alpha = LeaderElector(kube.api_client, config("alpha"))
    beta = LeaderElector(second.api_client, config("beta"))
    both: list[bool] = []
    alpha_task = asyncio.create_task(alpha.run())
    try:
        await wait_until(lambda: alpha.is_leader, timeout=5)
        async with running(beta):
            await asyncio.sleep(0.5)
            assert not beta.is_leader
            alpha_task.cancel()  # a crash: no release
            for _ in range(40):
                both.append(alpha.is_leader and beta.is_leader)
                await asyncio.sleep(0.1)
            await wait_until(lambda: beta.is_leader, timeout=5)
    finally:
        alpha_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await alpha_task
    assert not alpha.is_leader
    assert not any(both)
    assert_rbac_covers(apiserver)
