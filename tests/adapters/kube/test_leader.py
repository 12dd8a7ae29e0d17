"""Leader election on a Lease, over real HTTPS against the simulated API server."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable

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


LEASE = ("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler")


async def sample(electors: tuple[LeaderElector, ...], seconds: float) -> list[tuple[bool, ...]]:
    """Who says it leads, every 10 ms for ``seconds``."""
    seen = []
    for _ in range(int(seconds / 0.01)):
        seen.append(tuple(e.is_leader for e in electors))
        await asyncio.sleep(0.01)
    return seen


async def ended_within(elector: LeaderElector, seconds: float) -> float:
    """How long, from now, until ``elector`` says it no longer leads (at most ``seconds``)."""
    start = time.monotonic()
    while elector.is_leader and time.monotonic() - start < seconds:  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    return time.monotonic() - start


@pytest.mark.parametrize("edit", [
    lambda api: api.patch(*LEASE, {"spec": {"holderIdentity": "beta"}}),
    lambda api: api.patch(*LEASE, {"spec": {"holderIdentity": ""}}),
    lambda api: api.delete(*LEASE),
    lambda api: api.touch(*LEASE),
], ids=["another-holder", "holder-cleared", "deleted", "resource-version-moved"])
async def test_a_lease_written_by_someone_else_ends_leadership_at_its_next_read(
    apiserver: SimApiServer, kube: KubeSession, edit: Callable[[SimApiServer], object],
) -> None:
    """The leader's term ends at the first read that sees the hand edit (a retry period,
    0.2 s), not when its last renewal runs out (renew_deadline, 1.5 s); the daemon is told."""
    apiserver.create_namespace(NAMESPACE)
    alpha = LeaderElector(kube.api_client, config("alpha"))
    async with running(alpha):
        await wait_until(lambda: alpha.is_leader, timeout=5)
        alpha.changed.clear()
        edit(apiserver)
        took = await ended_within(alpha, 1.4)
        assert not alpha.is_leader, "still leading after the Lease was edited by hand"
        assert took < 0.2 + 0.3, f"leadership ended {took:.2f} s after the edit"
        assert alpha.changed.is_set()


async def test_a_hand_edit_naming_the_standby_never_gives_two_leaders(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession,
) -> None:
    """holderIdentity set by hand to the standby: the standby takes it only once it has
    stood for a lease duration (2 s; a change it did not write is a change like any other),
    the leader stops at its next read: at no instant do both lead, and one leads again."""
    apiserver.create_namespace(NAMESPACE)
    alpha = LeaderElector(kube.api_client, config("alpha"))
    beta = LeaderElector(second.api_client, config("beta"))
    async with running(alpha):
        await wait_until(lambda: alpha.is_leader, timeout=5)
        async with running(beta):
            await asyncio.sleep(0.5)
            edited = time.monotonic()
            apiserver.patch(*LEASE, {"spec": {"holderIdentity": "beta"}})
            seen = await sample((alpha, beta), 3.0)
            assert not any(a and b for a, b in seen), "both led at once"
            await wait_until(lambda: alpha.is_leader or beta.is_leader, timeout=3)
            assert time.monotonic() - edited >= 2.0, "taken before a lease duration"


async def test_a_slow_answer_does_not_stretch_leadership(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A renewal applied at once but answered 1 s late: leadership ends renew_deadline
    (1.5 s) after the renewal was sent, no later (the others time the lease from when they
    saw it change), not 1.5 s after the late answer."""
    apiserver.create_namespace(NAMESPACE)
    alpha = LeaderElector(kube.api_client, config("alpha"))
    applied: list[float] = []

    def renewal_applied() -> None:
        applied.append(time.monotonic())
        apiserver.fail_next(1000, verb="update", resource="leases")  # no renewal after it

    async with running(alpha):
        await wait_until(lambda: alpha.is_leader, timeout=5)
        apiserver.after_next(verb="update", resource="leases", action=renewal_applied,
                             answer_after=1.0)
        await wait_until(lambda: bool(applied), timeout=5)
        await ended_within(alpha, 4.0)
        ended = time.monotonic() - applied[0]
        assert ended <= 1.5 + 0.1, f"led {ended:.2f} s after the renewal was applied"


async def test_a_leader_frozen_past_its_lease_comes_back_in_a_new_term(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A leader whose clock jumps past renew_deadline (a process stopped and continued)
    and then renews the Lease nobody took starts a new term, and says so (``changed``):
    the daemon must read its history again before acting, as a fresh leader does."""
    apiserver.create_namespace(NAMESPACE)
    frozen = [0.0]
    alpha = LeaderElector(kube.api_client, config("alpha"),
                          monotonic=lambda: time.monotonic() + frozen[0])
    async with running(alpha):
        await wait_until(lambda: alpha.is_leader, timeout=5)
        await asyncio.sleep(0.3)
        alpha.changed.clear()
        frozen[0] += 3.0  # past renew_deadline and lease_duration
        await wait_until(lambda: alpha.is_leader, timeout=2)
        assert alpha.changed.is_set(), "leadership resumed without a word"
        assert alpha.term == 2
        assert not alpha.leads(1)
