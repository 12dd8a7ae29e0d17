"""Ring membership (design §4.3 M1-M7), over real HTTPS against the simulated API server,
with short timings (LD 1.5 s, RD 1 s, RP 0.25 s)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from autoscaler.adapters.kube.leader import LeaderElector, LeaseConfig
from autoscaler.adapters.kube.membership import (
    EVICTED_BY_ANNOTATION,
    WALL_OFFSET_ANNOTATION,
    MemberConfig,
    Membership,
    MembershipThread,
    client_factory,
)
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.errors import InvalidConfigError
from autoscaler.runtime import ring
from autoscaler.runtime.ring import Timings
from tests.adapters.kube.conftest import Settings, apiserver, assert_rbac_covers
from tests.sim.kube import SimApiServer, run_apiserver, wait_until

__all__ = ["apiserver"]
NS = "autoscaler"
RING = "ring"
FAST = Timings(lease_duration=1.5, renew_deadline=1.0, retry_period=0.25)
LD, RD, RP = FAST.lease_duration, FAST.renew_deadline, FAST.retry_period


def config(timings: Timings = FAST, **changes: Any) -> MemberConfig:
    return MemberConfig(namespace=NS, ring=RING, timings=timings, **changes)


def lease_path(member: Membership) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{member.name}"


def lease(api: SimApiServer, name: str) -> dict[str, Any] | None:
    return api.get("coordination.k8s.io/v1", "Lease", NS, name)


def holder(api: SimApiServer, member: Membership) -> str | None:
    found = lease(api, member.name)
    return None if found is None else str(found["spec"].get("holderIdentity") or "")


@contextlib.asynccontextmanager
async def running(api: SimApiServer, timings: Timings = FAST, *,
                  wall_offset: Callable[[], float | None] = lambda: None,
                  monotonic: Callable[[], float] = time.monotonic,
                  **changes: Any) -> AsyncIterator[tuple[Membership, asyncio.Task[None]]]:
    """A member on its own client, its loop running; cancelled (not stopped) at the end."""
    api.create_namespace(NS)
    async with KubeSession.connect(Settings(kubeconfig=api.kubeconfig)) as session:
        member = Membership(session.api_client, config(timings, **changes),
                            wall_offset=wall_offset, monotonic=monotonic)
        task = asyncio.create_task(member.run())
        try:
            yield member, task
        finally:
            await cancel(task)


async def cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def valid_for(member: Membership, seconds: float) -> float:
    """Seconds from now until ``member`` is no longer valid (at most ``seconds``)."""
    start = time.monotonic()
    while member.valid() and time.monotonic() - start < seconds:  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    return time.monotonic() - start


def test_timings_that_cannot_fence_are_refused() -> None:
    """A renew deadline not shorter than the lease duration is a config error, not a ring."""
    with pytest.raises(InvalidConfigError, match="renewDeadline: must be shorter"):
        config(Timings(lease_duration=2, renew_deadline=2, retry_period=0.5)).check()


async def test_join_creates_the_lease_and_renews_once_per_retry_period(
    apiserver: SimApiServer,
) -> None:
    """The member Lease is created with the ring's labels and renewed ~1/RP, by PUTs."""
    async with running(apiserver) as (member, _):
        await wait_until(member.valid, timeout=5)
        found = lease(apiserver, member.name)
        assert found is not None
        assert member.name == f"{RING}-member-{member.incarnation}"
        assert found["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "autoscaler", "autoscaler.dev/ring": RING,
            "autoscaler.dev/role": "member"}
        assert found["spec"]["holderIdentity"] == member.incarnation
        assert found["spec"]["leaseDurationSeconds"] == 2
        before = apiserver.count(method="PUT", name=member.name, status=200)
        await asyncio.sleep(2.0)
        renewals = apiserver.count(method="PUT", name=member.name, status=200) - before
        assert 2.0 / RP - 3 <= renewals <= 2.0 / RP + 1, renewals
        assert apiserver.count(method="POST", resource="leases") == 1
        puts = apiserver.count(method="PUT", name=member.name, status=200)
        assert member.counters.writes["join"] == 1
        # Counted only once answered: one may be in flight, one may have landed after its
        # timeout on a loaded machine (never more than the server applied).
        assert puts - 2 <= member.counters.writes["renew"] <= puts
        age = member.renewal_age()
        assert age is not None
        assert 0 <= age < RD


async def test_a_missing_namespace_delays_the_join_and_is_no_eviction(
    apiserver: SimApiServer,
) -> None:
    """A create answered 404 (the namespace does not exist yet) is retried, not taken for a
    deleted Lease: once the namespace exists the member joins."""
    async with KubeSession.connect(Settings(kubeconfig=apiserver.kubeconfig)) as session:
        member = Membership(session.api_client, config())
        task = asyncio.create_task(member.run())
        try:
            await wait_until(lambda: apiserver.count(method="POST", status=404) >= 2, timeout=3)
            assert not member.evicted
            apiserver.create_namespace(NS)
            await wait_until(member.valid, timeout=2)
        finally:
            await cancel(task)


def test_the_runner_reports_a_bad_kubeconfig_in_one_line(tmp_path: Path) -> None:
    """A kubeconfig that cannot be loaded: start() raises the config error itself."""
    factory = client_factory(Settings(kubeconfig=tmp_path / "missing"))
    with pytest.raises(InvalidConfigError, match="kubeconfig"):
        MembershipThread(factory, config()).start()


async def test_a_join_that_landed_unanswered_is_taken_up(apiserver: SimApiServer) -> None:
    """The create lands but its answer comes after the timeout: the retry's 409 is read as
    our own Lease, the chain goes on from it, and "joined" is said once."""
    apiserver.create_namespace(NS)
    apiserver.after_next(verb="create", resource="leases", answer_after=2 * RP)
    with structlog.testing.capture_logs() as logs:
        async with running(apiserver) as (member, _):
            await wait_until(member.valid, timeout=3)
            await asyncio.sleep(2 * RP)
    assert apiserver.count(method="POST", resource="leases", status=201) == 1
    assert apiserver.count(method="POST", resource="leases", status=409) >= 1
    events = [entry["event"] for entry in logs if entry["log_level"] != "debug"]
    assert events == ["ring member joined"], events


async def test_renewals_carry_the_wall_offset_when_known(apiserver: SimApiServer) -> None:
    """autoscaler.dev/wall-offset-ms (design §4.1): absent while unknown, then carried by
    the next renewal, in milliseconds."""
    offset: list[float | None] = [None]
    async with running(apiserver, wall_offset=lambda: offset[0]) as (member, _):
        await wait_until(member.valid, timeout=5)
        await asyncio.sleep(2 * RP)

        def annotations() -> dict[str, str]:
            found = lease(apiserver, member.name)
            assert found is not None
            return dict(found["metadata"].get("annotations") or {})

        assert WALL_OFFSET_ANNOTATION not in annotations()
        offset[0] = -0.25
        await wait_until(lambda: annotations().get(WALL_OFFSET_ANNOTATION) == "-250",
                         timeout=RP + 0.5)


async def test_two_members_see_each_other_and_their_readiness(apiserver: SimApiServer) -> None:
    """Each lists the other as live; a ready flag travels with the next renewal."""
    async with running(apiserver) as (alpha, _), running(apiserver) as (beta, _):
        both = {alpha.incarnation: False, beta.incarnation: False}
        await wait_until(lambda: alpha.members() == both == beta.members(), timeout=5)
        alpha.ready = True
        await wait_until(lambda: beta.members()[alpha.incarnation], timeout=2 * RP + 0.5)
        assert alpha.evicted_members() == beta.evicted_members() == set()


async def test_a_paused_member_is_evicted_after_a_lease_duration_and_learns_it(
    apiserver: SimApiServer,
) -> None:
    """A member that stops renewing without leaving is evicted by its peer about a lease
    duration (its declared ceil(LD) = 2 s) after its last renewal (never before it stopped trusting itself), by a CAS carrying evicted-by; its
    next renewal then finds it evicted: invalid for good, its Lease untouched."""
    async with running(apiserver) as (alpha, alpha_task), running(apiserver) as (beta, _):
        await wait_until(lambda: len(beta.members()) == 2 and alpha.valid()
                         and alpha.counters.writes["renew"] > 0, timeout=5)
        await cancel(alpha_task)  # paused: no renewal, no release
        evicted_while_valid: list[bool] = []
        apiserver.after_next(verb="update", path_prefix=lease_path(alpha),
                             action=lambda: evicted_while_valid.append(alpha.valid()))
        await wait_until(lambda: holder(apiserver, alpha) == "", timeout=LD + 2)
        assert evicted_while_valid == [False]
        # From alpha's last renewal to the eviction, both as the server applied them.
        *_, last_renewal, eviction = [r for r in apiserver.requests(method="PUT",
                                                                    name=alpha.name)
                                      if r.status == 200]
        assert last_renewal.applied is not None
        assert eviction.applied is not None
        took = eviction.applied - last_renewal.applied
        stood = max(LD, math.ceil(LD))  # the Lease declares ceil(LD) = 2 s: peers respect it
        assert stood <= took <= stood + RP / 4 + 0.4, took
        found = lease(apiserver, alpha.name)
        assert found is not None
        assert found["metadata"]["annotations"][EVICTED_BY_ANNOTATION] == beta.incarnation
        assert found["spec"]["leaseTransitions"] == 1
        await wait_until(lambda: beta.evicted_members() == {alpha.incarnation}, timeout=1)
        assert beta.counters.writes["evict"] == 1
        assert alpha.incarnation not in beta.members()
        version = found["metadata"]["resourceVersion"]
        resumed = asyncio.create_task(alpha.run())
        try:
            await wait_until(lambda: alpha.evicted, timeout=2)
        finally:
            await cancel(resumed)
        assert alpha.evicted_by == beta.incarnation
        assert not alpha.valid()
        after = lease(apiserver, alpha.name)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == version


async def test_a_suspended_observer_evicts_no_one_until_it_is_valid_again(
    apiserver: SimApiServer,
) -> None:
    """M4 needs a valid evictor: while beta's own renewals fail it leaves the expired alpha
    alone; within a retry period or so of being valid again, it evicts alpha."""
    async with running(apiserver) as (alpha, alpha_task), running(apiserver) as (beta, _):
        await wait_until(lambda: len(beta.members()) == 2, timeout=5)
        failing = apiserver.fail_next(1000, status=503, path_prefix=lease_path(beta))
        await cancel(alpha_task)
        await asyncio.sleep(LD + 4 * RP)  # alpha long expired, beta long invalid
        assert not beta.valid()
        assert holder(apiserver, alpha) == alpha.incarnation
        failing.remaining = 0
        healed = time.monotonic()
        await wait_until(lambda: holder(apiserver, alpha) == "", timeout=3)
        assert time.monotonic() - healed <= 2 * RP + 0.3


async def test_holder_view_tells_bucket_claims_when_a_holder_is_gone(
    apiserver: SimApiServer,
) -> None:
    """ring.claimable over holder_view: a live holder's bucket never; an evicted one's at
    once; one whose Lease was deleted, emptied by a graceful leave, or never seen, only a
    lease duration after that was observed (our clock)."""
    def claimable(observer: Membership, holder_of: str) -> bool:
        return ring.claimable(ring.BucketLease(holder=holder_of), observer.holder_view(holder_of),
                              now=time.monotonic(), lease_duration=LD)

    async with running(apiserver) as (alpha, _), running(apiserver) as (beta, beta_task), \
            running(apiserver) as (gamma, _), running(apiserver) as (delta, _):
        await wait_until(lambda: len(alpha.members()) == 4, timeout=5)
        assert not any(claimable(alpha, m.incarnation) for m in (alpha, beta, gamma, delta))
        synced = alpha.view_synced_at
        assert synced is not None
        assert claimable(alpha, "never-seen-00000000") == (time.monotonic() - synced >= LD)
        await cancel(beta_task)
        await gamma.stop()
        left = time.monotonic()
        apiserver.delete("coordination.k8s.io/v1", "Lease", NS, delta.name)
        deleted = time.monotonic()
        await wait_until(lambda: not {gamma.incarnation, delta.incarnation} & set(
            alpha.members()), timeout=1)
        assert not claimable(alpha, gamma.incarnation), "left: claimable before LD"
        assert not claimable(alpha, delta.incarnation), "deleted: claimable before LD"
        await wait_until(lambda: claimable(alpha, delta.incarnation), timeout=LD + 0.5)
        assert time.monotonic() - deleted >= LD - 0.02
        await wait_until(lambda: claimable(alpha, gamma.incarnation), timeout=0.5)
        assert time.monotonic() - left >= LD - 0.1
        await wait_until(lambda: claimable(alpha, beta.incarnation), timeout=3)
        assert alpha.holder_view(beta.incarnation).evicted
        assert claimable(alpha, "never-seen-00000000")  # absent since the view synced


async def test_failing_renewals_suspend_then_resume_the_same_incarnation(
    apiserver: SimApiServer,
) -> None:
    """Renewals answered 503: invalid within RD of the last success; once they succeed again,
    valid again at once, same incarnation and Lease, no rejoin (M5)."""
    async with running(apiserver) as (member, _):
        await wait_until(member.valid, timeout=5)
        incarnation = member.incarnation
        failing = apiserver.fail_next(1000, status=503, path_prefix=lease_path(member))
        took = await valid_for(member, RD + 1)
        assert not member.valid()
        assert took <= RD + 0.25, took
        failing.remaining = 0
        await wait_until(member.valid, timeout=RP + 0.5)
        assert member.incarnation == incarnation
        assert not member.evicted
        assert apiserver.count(method="POST", resource="leases") == 1
        assert member.counters.renewals["error"] >= 3


def hand_edit(api: SimApiServer, member: Membership) -> None:
    api.touch("coordination.k8s.io/v1", "Lease", NS, member.name)


def own_write_answered_too_late(api: SimApiServer, member: Membership) -> None:
    """The next renewal lands but its answer comes after the request timeout (RP)."""
    api.after_next(verb="update", path_prefix=lease_path(member), answer_after=2 * RP)


@pytest.mark.parametrize("edit", [hand_edit, own_write_answered_too_late],
                         ids=["annotation-by-hand", "own-renewal-landed-unanswered"])
async def test_a_conflict_on_a_lease_still_ours_goes_on_with_the_chain(
    apiserver: SimApiServer, edit: Any,
) -> None:
    """M1: a 409 whose re-read shows our holder and no evicted-by is no eviction: the chain
    goes on from the fresh version, same incarnation, the other writer's annotation kept."""
    async with running(apiserver) as (member, _):
        await wait_until(member.valid, timeout=5)
        incarnation = member.incarnation
        edit(apiserver, member)
        await wait_until(lambda: apiserver.count(method="PUT", name=member.name,
                                                 status=409) == 1, timeout=2)
        before = apiserver.count(method="PUT", name=member.name, status=200)
        await wait_until(lambda: apiserver.count(method="PUT", name=member.name,
                                                 status=200) >= before + 2, timeout=2)
        assert member.valid()
        assert not member.evicted
        assert member.incarnation == incarnation
        assert holder(apiserver, member) == incarnation
        if edit is hand_edit:
            found = lease(apiserver, member.name)
            assert found is not None
            assert "sim.example.com/touched" in found["metadata"]["annotations"]


async def test_a_peer_declaring_a_longer_duration_is_given_it(apiserver: SimApiServer) -> None:
    """A peer Lease declaring leaseDurationSeconds 4 (mid-rollout, longer timings) is evicted
    4 s after it was last seen to change, not after our 1.5 s (nor its 2 s ceiling)."""
    async with running(apiserver) as (observer, _):
        await wait_until(observer.valid, timeout=5)
        name = f"{RING}-member-ghost-00000000"
        apiserver.create({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"autoscaler.dev/ring": RING, "autoscaler.dev/role": "member"}},
            "spec": {"holderIdentity": "ghost-00000000", "leaseDurationSeconds": 4}})
        created = time.monotonic()
        await wait_until(lambda: "ghost-00000000" in observer.members(), timeout=2)
        ghost = lease(apiserver, name)
        await wait_until(lambda: (lease(apiserver, name) or {}).get("spec", {})
                         .get("holderIdentity") == "", timeout=6)
        took = time.monotonic() - created
        assert 4.0 <= took <= 4.0 + RP / 4 + 0.5, took
        assert ghost is not None


async def test_a_single_leader_of_the_ring_name_is_seen_until_it_releases_or_expires(
        apiserver: SimApiServer) -> None:
    """The single-leader Lease of the ring's name (a leader-mode replica still acting, as in
    a rolling update from leader mode): held while its leader renews it, free at once when
    it releases it, and, when its holder stops renewing, free only once it has stood
    unchanged for its own duration by our clock (4 s here, longer than our 1.5 s)."""
    async with running(apiserver) as (member, _), KubeSession.connect(
            Settings(kubeconfig=apiserver.kubeconfig)) as session:
        await wait_until(lambda: member.single_leader() is None, timeout=5)  # none yet
        elector = LeaderElector(session.api_client, LeaseConfig(
            namespace=NS, name=RING, identity="old-leader", lease_duration=LD,
            renew_deadline=RD, retry_period=RP))
        campaign = asyncio.create_task(elector.run())
        try:
            await wait_until(lambda: member.single_leader() == "old-leader", timeout=5)
            await asyncio.sleep(3 * LD)  # renewed: still held past its duration
            assert member.single_leader() == "old-leader"
            await elector.release()
            released = time.monotonic()
            await wait_until(lambda: member.single_leader() is None, timeout=2)
            assert time.monotonic() - released < 1.0
        finally:
            await cancel(campaign)
        apiserver.patch("coordination.k8s.io/v1", "Lease", NS, RING, {"spec": {
            "holderIdentity": "frozen-leader", "leaseDurationSeconds": 4}})
        written = time.monotonic()
        await wait_until(lambda: member.single_leader() == "frozen-leader", timeout=2)
        await wait_until(lambda: member.single_leader() is None, timeout=6)
        took = time.monotonic() - written
        assert 4.0 <= took <= 4.0 + 0.5, took


async def test_one_log_line_per_state_change_none_per_renewal(apiserver: SimApiServer) -> None:
    """joined, suspended, resumed, left: one line each, nothing for the renewals between."""
    with structlog.testing.capture_logs() as logs:
        async with running(apiserver) as (member, _):
            await wait_until(member.valid, timeout=5)
            await asyncio.sleep(4 * RP)
            failing = apiserver.fail_next(1000, status=503, path_prefix=lease_path(member))
            await wait_until(lambda: not member.valid(), timeout=RD + 0.5)
            failing.remaining = 0
            await wait_until(member.valid, timeout=RP + 0.5)
            await asyncio.sleep(4 * RP)
            await member.stop()
    events = [entry["event"] for entry in logs if entry["log_level"] != "debug"]
    assert events == ["ring member joined", "ring member suspended", "ring member resumed",
                      "ring member left"], events


async def test_a_lapse_while_a_renewal_is_in_flight_is_said_too(
        apiserver: SimApiServer) -> None:
    """The process pauses while a renewal is in flight, past its last renewal's deadline
    but not past this one's: its fence was closed for that moment, so it says "suspended"
    before the answer mends it, then "resumed" (once said only if a renewal attempt began
    or ended inside the lapse)."""
    timings = Timings(lease_duration=3.0, renew_deadline=2.0, retry_period=1.0)
    paused = 0.0
    with structlog.testing.capture_logs() as logs:
        async with running(apiserver, timings,
                           monotonic=lambda: time.monotonic() + paused) as (member, _):
            await wait_until(member.valid, timeout=5)
            held = apiserver.hold_next(1, verb="update", path_prefix=lease_path(member))
            await wait_until(lambda: held.arrived == 1, timeout=timings.retry_period + 1)
            age = member.renewal_age()
            assert age is not None
            paused = timings.renew_deadline - age + timings.retry_period / 2
            assert not member.valid()
            held.release()
            await wait_until(member.valid, timeout=1)
            await member.stop()
    events = [entry["event"] for entry in logs if entry["log_level"] != "debug"]
    assert events == ["ring member joined", "ring member suspended", "ring member resumed",
                      "ring member left"], events


async def test_a_late_answer_does_not_extend_validity(apiserver: SimApiServer) -> None:
    """A renewal applied at once but answered 1.5 x RD late, no renewal after it: validity
    ends RD after the renewal was sent (at most RD after it was applied), and the late
    answer, when it comes, does not make the member valid again."""
    async with running(apiserver) as (member, _):
        await wait_until(member.valid, timeout=5)
        applied: list[float] = []

        def renewal_applied() -> None:
            applied.append(time.monotonic())
            apiserver.fail_next(1000, status=503, path_prefix=lease_path(member))

        apiserver.after_next(verb="update", path_prefix=lease_path(member),
                             action=renewal_applied, answer_after=1.5 * RD)
        await wait_until(lambda: bool(applied), timeout=2)
        await valid_for(member, 3 * RD)
        assert time.monotonic() - applied[0] <= RD + 0.25
        again = []
        while time.monotonic() - applied[0] < 1.5 * RD + 0.5:  # the late answer comes
            again.append(member.valid())
            await asyncio.sleep(0.005)
        assert not any(again), "the late answer made the member valid again"
        assert member.counters.renewals["timeout"] >= 1  # the late one (a 503 may be late too)


async def test_a_slow_answer_inside_the_timeout_does_not_extend_validity(
    apiserver: SimApiServer,
) -> None:
    """LD 3 s, RD 2 s, RP 1 s (timeout 1 s): a renewal answered 0.8 s late still counts, from
    its send: validity ends at most RD after it was applied, not RD after its answer."""
    timings = Timings(lease_duration=3.0, renew_deadline=2.0, retry_period=1.0)
    async with running(apiserver, timings) as (member, _):
        await wait_until(member.valid, timeout=5)
        applied: list[float] = []

        def renewal_applied() -> None:
            applied.append(time.monotonic())
            apiserver.fail_next(1000, status=503, path_prefix=lease_path(member))

        apiserver.after_next(verb="update", path_prefix=lease_path(member),
                             action=renewal_applied, answer_after=0.8)
        await wait_until(lambda: bool(applied), timeout=3)
        await valid_for(member, 4.0)
        assert time.monotonic() - applied[0] <= 2.0 + 0.3


async def test_a_lease_deleted_by_hand_discontinues_then_rejoin_starts_anew(
    apiserver: SimApiServer,
) -> None:
    """404 on renewal: discontinued (evicted, by no one) and invalid at once; rejoin() makes
    a new incarnation with a new Lease (M6); each step said once in the log."""
    with structlog.testing.capture_logs() as logs:
        async with running(apiserver) as (member, _):
            await wait_until(member.valid, timeout=5)
            old = member.incarnation
            apiserver.delete("coordination.k8s.io/v1", "Lease", NS, member.name)
            await wait_until(lambda: member.evicted, timeout=RP + 0.5)
            assert member.evicted_by == ""
            assert not member.valid()
            member.rejoin(old)
            await wait_until(member.valid, timeout=2)
            assert member.incarnation != old
            assert holder(apiserver, member) == member.incarnation
    events = [entry["event"] for entry in logs if entry["log_level"] != "debug"]
    assert events == ["ring member joined", "ring member discontinued: its Lease was deleted",
                      "ring member rejoins as a new incarnation", "ring member joined"], events


async def test_a_start_over_never_shows_the_new_incarnation_evicted(
    apiserver: SimApiServer,
) -> None:
    """The ring's thread reads ``incarnation``, then ``evicted``, and asks a rejoin in the
    name it read if evicted. So no moment of a start over may show the new incarnation
    with the old eviction: a read there would ask a rejoin for the new one, and the loop
    would start over twice."""
    states: list[tuple[str, bool]] = []

    class Watched(Membership):
        def __setattr__(self, name: str, value: Any) -> None:
            super().__setattr__(name, value)
            if name in ("incarnation", "evicted") and "evicted" in self.__dict__:
                states.append((self.incarnation, self.evicted))

    async with KubeSession.connect(Settings(kubeconfig=apiserver.kubeconfig)) as session:
        member = Watched(session.api_client, config())
        old = member.incarnation
        member.evicted = True
        member._start_over()
    assert member.incarnation != old
    assert states[-1] == (member.incarnation, False)
    assert (member.incarnation, True) not in states, states


async def test_a_rejoin_asked_twice_for_one_eviction_starts_over_once(
    apiserver: SimApiServer,
) -> None:
    """The ring's thread asks for a rejoin at every tick that sees ``evicted``; one may
    read it just before the membership loop started over and ask again just after. That
    late request names the evicted incarnation, so it is ignored: a second start over
    would leave a Lease held and never renewed (a phantom member in every view for a lease
    duration, preferred for buckets no one then claims)."""
    async with running(apiserver) as (member, _):
        await wait_until(member.valid, timeout=5)
        old = member.incarnation
        apiserver.delete("coordination.k8s.io/v1", "Lease", NS, member.name)
        await wait_until(lambda: member.evicted, timeout=RP + 0.5)
        member.rejoin(old)
        await wait_until(lambda: member.incarnation != old, timeout=2)
        new = member.incarnation
        member.rejoin(old)  # the late request
        await wait_until(member.valid, timeout=2)
        await asyncio.sleep(4 * RP)
        assert member.incarnation == new
        leases = apiserver.rest.list(apiserver.resource("coordination.k8s.io/v1", "Lease"), NS)
        held = [item for item in leases
                if item["metadata"]["name"].startswith(f"{RING}-member-")
                and item["spec"].get("holderIdentity")]
        assert [item["spec"]["holderIdentity"] for item in held] == [new]


async def test_two_observers_evicting_at_once_exactly_one_write_succeeds(
    apiserver: SimApiServer,
) -> None:
    """Both peers send their eviction of the same version at once: one 200, one 409."""
    async with running(apiserver) as (alpha, alpha_task), \
            running(apiserver) as (beta, _), running(apiserver) as (gamma, _):
        await wait_until(lambda: len(beta.members()) == len(gamma.members()) == 3, timeout=5)
        await cancel(alpha_task)
        held = apiserver.hold_next(2, verb="update", path_prefix=lease_path(alpha))
        await wait_until(lambda: held.arrived == 2, timeout=LD + 2)
        held.release()
        await wait_until(lambda: holder(apiserver, alpha) == "", timeout=2)
        await asyncio.sleep(0.2)
        writes = apiserver.requests(method="PUT", name=alpha.name)[-2:]
        assert sorted(r.status for r in writes) == [200, 409]
        found = lease(apiserver, alpha.name)
        assert found is not None
        assert found["spec"]["leaseTransitions"] == 1


async def test_a_refused_eviction_is_tried_again_once_per_retry_period(
    apiserver: SimApiServer,
) -> None:
    """Evictions answered 409 (say, a stale view) are retried at most once per RP per peer,
    not at every judging tick (RP/4), and go on being retried; once one is let through, the
    peer is evicted. (The gaps, not a count: a loaded machine stretches each judging tick.)"""
    async with running(apiserver) as (alpha, alpha_task), running(apiserver) as (beta, _):
        await wait_until(lambda: len(beta.members()) == 2, timeout=5)
        await cancel(alpha_task)
        refused = apiserver.fail_next(1000, status=409, verb="update",
                                      path_prefix=lease_path(alpha))
        await wait_until(lambda: refused.arrived >= 1, timeout=LD + 2)
        await asyncio.sleep(8 * RP)
        tries = [r.arrived for r in apiserver.requests(method="PUT", name=alpha.name)
                 if r.status == 409]
        gaps = [later - sooner for sooner, later in itertools.pairwise(tries)]
        assert len(tries) >= 4, gaps
        assert min(gaps) >= 0.75 * RP, gaps
        refused.remaining = 0
        await wait_until(lambda: holder(apiserver, alpha) == "", timeout=RP + 0.5)


async def test_graceful_stop_empties_the_holder_at_once(apiserver: SimApiServer) -> None:
    """stop(): the holder is "" as soon as it returns, no evicted-by, and the peer no longer
    counts the leaver as live."""
    async with running(apiserver) as (alpha, _), running(apiserver) as (beta, _):
        await wait_until(lambda: len(beta.members()) == 2, timeout=5)
        await alpha.stop()
        assert holder(apiserver, alpha) == ""
        assert not alpha.valid()
        found = lease(apiserver, alpha.name)
        assert found is not None
        assert EVICTED_BY_ANNOTATION not in (found["metadata"].get("annotations") or {})
        await wait_until(lambda: alpha.incarnation not in beta.members(), timeout=RP + 0.5)
        assert beta.evicted_members() == set()
        assert alpha.counters.writes["leave"] == 1
        assert alpha.renewal_age() is None


async def test_a_released_lease_is_collected_after_the_grace_not_before(
    apiserver: SimApiServer,
) -> None:
    """A peer's released Lease is deleted once it stayed released for the grace (1 s here)."""
    async with running(apiserver, gc_grace=1.0) as (alpha, _), \
            running(apiserver) as (beta, _):
        await wait_until(lambda: len(alpha.members()) == 2, timeout=5)
        await beta.stop()
        await wait_until(lambda: lease(apiserver, beta.name) is None, timeout=3)
        # From the leave to the deletion, both as the server applied them.
        *_, leave = apiserver.requests(method="PUT", name=beta.name, status=200)
        (deletion,) = apiserver.requests(method="DELETE", name=beta.name)
        assert leave.applied is not None
        assert deletion.applied is not None
        took = deletion.applied - leave.applied
        assert 1.0 <= took <= 1.0 + 2 * RP + 0.3, took
        assert lease(apiserver, alpha.name) is not None
        assert alpha.counters.writes["delete"] == 1


async def test_deploy_rbac_allows_what_membership_does(apiserver: SimApiServer) -> None:
    """Every request of a join, a watch, an eviction and a collection passes deploy/rbac.yaml."""
    async with running(apiserver, gc_grace=0.2) as (alpha, _), \
            running(apiserver) as (beta, beta_task), running(apiserver) as (gamma, _):
        await wait_until(lambda: len(alpha.members()) == 3, timeout=5)
        await cancel(beta_task)
        await gamma.stop()
        await wait_until(lambda: holder(apiserver, beta) == "", timeout=4)
        await wait_until(lambda: lease(apiserver, gamma.name) is None, timeout=3)
    assert_rbac_covers(apiserver)


@contextlib.contextmanager
def apiserver_in_a_thread() -> Iterator[SimApiServer]:
    """The simulator on a loop of its own, so the test's main thread may block."""
    ready: list[SimApiServer] = []
    loop_box: list[asyncio.AbstractEventLoop] = []

    async def serve() -> None:
        stop = asyncio.Event()
        loop_box.append(asyncio.get_running_loop())
        async with run_apiserver() as api:
            api.create_namespace(NS)
            ready.append(api)
            stopper.append(stop)
            await stop.wait()

    stopper: list[asyncio.Event] = []
    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not ready and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ready, "the simulator did not start"
    try:
        yield ready[0]
    finally:
        loop_box[0].call_soon_threadsafe(stopper[0].set)
        thread.join(10)


async def test_the_thread_runner_keeps_renewing_while_the_main_loop_is_blocked() -> None:
    """Two members in their own threads (the simulator in a third); this test's event loop
    blocked for 2 x LD by time.sleep: both stay valid, neither is evicted, renewals went on
    meanwhile; stop() leaves gracefully."""
    with apiserver_in_a_thread() as api:
        factory = client_factory(Settings(kubeconfig=api.kubeconfig))
        runners = [MembershipThread(factory, config()) for _ in range(2)]
        alpha, beta = (runner.start() for runner in runners)
        try:
            await wait_until(lambda: len(alpha.members()) == len(beta.members()) == 2,
                             timeout=5)
            before = api.count(method="PUT", name=alpha.name, status=200)
            time.sleep(2 * LD)  # noqa: ASYNC251  # the main loop is stuck, on purpose
            renewals = api.count(method="PUT", name=alpha.name, status=200) - before
            assert runners[0].valid()
            assert runners[1].valid()
            assert renewals >= 2 * LD / RP - 3, renewals
            # (Not "no 409": a renewal stalled past its timeout on a loaded machine may land
            # anyway, and the next one's 409 is how the member learns it was its own.)
            assert holder(api, alpha) == alpha.incarnation
            assert alpha.evicted_members() == beta.evicted_members() == set()
        finally:
            for runner in runners:
                runner.stop()
        assert holder(api, alpha) == ""
        assert holder(api, beta) == ""
