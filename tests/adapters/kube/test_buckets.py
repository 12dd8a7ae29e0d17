"""The ring's bucket Leases (adapters/kube/buckets.py), over real HTTPS against the simulated
API server: a claim is a CAS that exactly one claimant wins, a release hands the bucket on,
a Lease of another ring's settings is refused and left alone, and nothing is sent while the
member may not write."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from autoscaler.adapters.kube.bucket_store import BucketStateStore
from autoscaler.adapters.kube.buckets import (
    BUCKETS_ANNOTATION,
    HANDED_TO_ANNOTATION,
    PLACEMENT_ANNOTATION,
    RING_LABEL,
    ROLE_LABEL,
    VALIDITY,
    VALIDITY_ANNOTATION,
    BucketLeases,
)
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.errors import FencedError, InvalidConfigError, NotLeaderError, TransientError
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.ring import BucketLease, Placement
from autoscaler.runtime.status import TargetState
from tests.adapters.kube.conftest import Settings, apiserver, assert_rbac_covers
from tests.adapters.kube.waiting import eventually
from tests.sim.kube import SimApiServer

__all__ = ["apiserver"]
NAMESPACE = "autoscaler"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
HISTORY = History(recommendations=(Recommendation(replicas=4, timestamp=1.7e9),),
                  scale_down_events=(ScaleEvent(change=1, timestamp=1.7e9),))


@pytest.fixture
async def kube(apiserver: SimApiServer) -> AsyncIterator[KubeSession]:
    """A session whose every request deploy/rbac.yaml must allow (checked at the end)."""
    apiserver.create_namespace(NAMESPACE)
    async with KubeSession.connect(Settings(kubeconfig=apiserver.kubeconfig)) as session:
        yield session
    assert_rbac_covers(apiserver)


@pytest.fixture
async def second(apiserver: SimApiServer) -> AsyncIterator[KubeSession]:
    async with KubeSession.connect(Settings(kubeconfig=apiserver.kubeconfig)) as session:
        yield session


def leases(kube: KubeSession, identity: str, *, placement: Placement = "namespace",
           may_write: bool = True) -> BucketLeases:
    return BucketLeases(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                        identity=identity, placement=placement, lease_duration=3.0,
                        may_write=lambda: may_write, request_timeout=2.0)


def bucket_store(kube: KubeSession, may_write: Callable[[], bool]) -> BucketStateStore:
    return BucketStateStore(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                            bucket=0x1F, may_write=may_write, request_timeout=2.0)


def stored(apiserver: SimApiServer, bucket: int = 0x1F) -> dict[str, Any]:
    found = apiserver.get("coordination.k8s.io/v1", "Lease", NAMESPACE,
                          f"autoscaler-bucket-{bucket:02x}")
    assert found is not None
    return found


async def test_a_claim_of_an_absent_bucket_creates_it_at_epoch_1(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """The Lease is created naming us, epoch 1, with the ring's labels and annotations and
    MicroTime stamps; the view shows it."""
    alpha = leases(kube, "alpha-1")
    assert await alpha.claim(0x1F, None) == 1
    lease = stored(apiserver)
    assert lease["metadata"]["labels"][RING_LABEL] == "autoscaler"
    assert lease["metadata"]["labels"][ROLE_LABEL] == "bucket"
    assert lease["metadata"]["annotations"] == {
        BUCKETS_ANNOTATION: "256", PLACEMENT_ANNOTATION: "namespace",
        VALIDITY_ANNOTATION: VALIDITY}
    spec = lease["spec"]
    assert spec["holderIdentity"] == "alpha-1"
    assert spec["leaseTransitions"] == 1
    assert spec["leaseDurationSeconds"] == 3
    assert MICRO_TIME.match(spec["acquireTime"])
    assert MICRO_TIME.match(spec["renewTime"])
    seen = await leases(kube, "beta-1").refresh()
    assert seen[0x1F].lease == BucketLease(holder="alpha-1")
    assert seen[0x1F].epoch == 1


@pytest.mark.parametrize("existing", [False, True], ids=["absent", "released"])
async def test_two_claimants_on_the_same_observation_give_exactly_one_epoch(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession, existing: bool,
) -> None:
    """Both saw the same version (or no Lease): exactly one claim lands, the other is told
    it lost (None), and the Lease names the winner at the next epoch."""
    alpha, beta = leases(kube, "alpha-1"), leases(second, "beta-1")
    observed = None
    if existing:
        assert await alpha.claim(0x1F, None) == 1
        assert await alpha.release(0x1F, 1, handed_to="")
        observed = (await alpha.refresh())[0x1F]
    won = await asyncio.gather(alpha.claim(0x1F, observed), beta.claim(0x1F, observed))
    epoch = 2 if existing else 1
    assert sorted(won, key=str) == sorted([epoch, None], key=str)
    winner = "alpha-1" if won[0] == epoch else "beta-1"
    assert stored(apiserver)["spec"]["holderIdentity"] == winner
    assert stored(apiserver)["spec"]["leaseTransitions"] == epoch


async def test_a_release_then_a_claim_by_another_is_the_next_epoch(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession,
) -> None:
    """The release empties the holder and names the member it hands to; that member sees
    it and its claim is epoch + 1, which clears the hand-over mark."""
    alpha, beta = leases(kube, "alpha-1"), leases(second, "beta-1")
    assert await alpha.claim(0x1F, None) == 1
    assert await alpha.release(0x1F, 1, handed_to="beta-1")
    observed = (await beta.refresh())[0x1F]
    assert observed.lease == BucketLease(holder="", handed_to="beta-1")
    assert observed.epoch == 1
    assert await beta.claim(0x1F, observed) == 2
    lease = stored(apiserver)
    assert lease["spec"]["holderIdentity"] == "beta-1"
    assert HANDED_TO_ANNOTATION not in lease["metadata"]["annotations"]


async def test_a_claim_counts_on_from_a_later_stamp(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A Lease deleted and made again restarts at epoch 1; a claim told the epoch its state
    was stamped with (``after``) takes the next one instead."""
    alpha = leases(kube, "alpha-1")
    assert await alpha.claim(0x1F, None, after=6) == 7
    assert stored(apiserver)["spec"]["leaseTransitions"] == 7


async def test_a_release_after_another_write_is_refused(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A release is a CAS on our claim: the Lease written since (409), or not ours at that
    epoch, is not released."""
    alpha = leases(kube, "alpha-1")
    assert await alpha.claim(0x1F, None) == 1
    assert not await alpha.release(0x1F, 2, handed_to="beta-1")  # not ours at epoch 2
    apiserver.touch("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler-bucket-1f")
    assert not await alpha.release(0x1F, 1, handed_to="beta-1")
    assert stored(apiserver)["spec"]["holderIdentity"] == "alpha-1"


@pytest.mark.parametrize(("annotations", "said"), [
    ({BUCKETS_ANNOTATION: "64", PLACEMENT_ANNOTATION: "namespace"},
     "made with 64 buckets by placement=namespace"),
    ({BUCKETS_ANNOTATION: "256", PLACEMENT_ANNOTATION: "target"},
     "made with 256 buckets by placement=target"),
    ({}, "made with unknown buckets by placement=unknown"),
], ids=["buckets", "placement", "none"])
async def test_a_lease_of_other_ring_settings_is_refused_and_left_alone(
    apiserver: SimApiServer, kube: KubeSession, annotations: dict[str, str], said: str,
) -> None:
    """A bucket Lease whose buckets/placement differ from ours: one line naming the Lease,
    both settings and the way out; neither a refresh nor a claim writes it."""
    apiserver.create({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "autoscaler-bucket-1f", "namespace": NAMESPACE,
                     "labels": {RING_LABEL: "autoscaler", ROLE_LABEL: "bucket"},
                     "annotations": annotations},
        "spec": {"holderIdentity": "", "leaseTransitions": 4}})
    before = stored(apiserver)
    alpha = leases(kube, "alpha-1")
    with pytest.raises(InvalidConfigError) as refused:
        await alpha.refresh()
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Lease {NAMESPACE}/autoscaler-bucket-1f: ring autoscaler was {said}")
    assert "configured with 256 buckets by placement=namespace: use another leaseName" in message
    assert apiserver.count(verb="update", resource="leases") == 0
    assert stored(apiserver) == before


async def test_a_claim_on_another_rings_observation_sends_nothing(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A member configured with placement "target" refuses the "namespace" ring's Lease."""
    alpha = leases(kube, "alpha-1")
    assert await alpha.claim(0x1F, None) == 1
    assert await alpha.release(0x1F, 1, handed_to="")
    other = leases(kube, "beta-1")
    observed = (await other.refresh())[0x1F]
    targeted = leases(kube, "gamma-1", placement="target")
    with pytest.raises(InvalidConfigError, match="placement=namespace; this replica"):
        await targeted.claim(0x1F, observed)
    assert stored(apiserver)["spec"]["holderIdentity"] == ""


async def test_nothing_is_sent_while_the_member_may_not_write(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """may_write() false: neither a claim nor a release reaches the server."""
    assert await leases(kube, "alpha-1").claim(0x2A, None) == 1
    invalid = leases(kube, "alpha-1", may_write=False)
    observed = (await invalid.refresh())[0x2A]
    writes = apiserver.count(verb="create", resource="leases") + apiserver.count(
        verb="update", resource="leases")
    with pytest.raises(NotLeaderError, match="not sent"):
        await invalid.claim(0x1F, None)
    with pytest.raises(NotLeaderError, match="not sent"):
        await invalid.claim(0x2A, observed)
    with pytest.raises(NotLeaderError, match="not sent"):
        await invalid.release(0x2A, 1, handed_to="beta-1")
    assert apiserver.count(verb="create", resource="leases") + apiserver.count(
        verb="update", resource="leases") == writes


async def test_the_view_lists_only_this_rings_bucket_leases(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Members, other rings and stray names are not buckets of this ring."""
    await leases(kube, "alpha-1").claim(0x00, None)
    await leases(kube, "alpha-1").claim(0xFF, None)
    other = BucketLeases(kube.api_client, namespace=NAMESPACE, ring="other", identity="x",
                         placement="namespace", lease_duration=3.0, may_write=lambda: True)
    await other.claim(0x10, None)
    apiserver.create({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "autoscaler-member-pod-1", "namespace": NAMESPACE,
                     "labels": {RING_LABEL: "autoscaler", ROLE_LABEL: "member"}},
        "spec": {"holderIdentity": "pod-1"}})
    assert set(await leases(kube, "beta-1").refresh()) == {0x00, 0xFF}


@contextlib.asynccontextmanager
async def watching(view: BucketLeases) -> AsyncIterator[BucketLeases]:
    view.start()
    try:
        await asyncio.wait_for(view.synced.wait(), timeout=5)
        yield view
    finally:
        await view.stop()


async def test_the_watched_view_follows_claims_releases_and_deletions(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession,
) -> None:
    """LIST then WATCH: a claim, a release and a deletion by others reach the view, with
    the epoch, the holder and the hand-over mark."""
    await leases(second, "beta-1").claim(0x01, None)
    beta = leases(second, "beta-1")
    async with watching(leases(kube, "alpha-1")) as alpha:
        assert alpha.view[0x01].lease == BucketLease(holder="beta-1")
        assert await beta.claim(0x1F, None) == 1
        await eventually(lambda: 0x1F in alpha.view)
        assert await beta.release(0x1F, 1, handed_to="alpha-1")
        await eventually(lambda: alpha.view[0x1F].lease.handed_to == "alpha-1")
        assert await alpha.claim(0x1F, alpha.view[0x1F]) == 2
        apiserver.delete("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler-bucket-01")
        await eventually(lambda: 0x01 not in alpha.view)
        assert alpha.view[0x1F].lease == BucketLease(holder="alpha-1")
        assert alpha.problem is None


async def test_a_watched_lease_of_other_ring_settings_is_a_problem_not_a_bucket(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Seen by the watch: kept out of the view and named in ``problem`` (one line) until
    it is gone; nothing is written to it."""
    async with watching(leases(kube, "alpha-1")) as alpha:
        apiserver.create({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "autoscaler-bucket-1f", "namespace": NAMESPACE,
                         "labels": {RING_LABEL: "autoscaler", ROLE_LABEL: "bucket"},
                         "annotations": {BUCKETS_ANNOTATION: "64",
                                         PLACEMENT_ANNOTATION: "namespace"}},
            "spec": {"holderIdentity": "old-1", "leaseTransitions": 4}})
        await eventually(lambda: alpha.problem is not None)
        assert "ring autoscaler was made with 64 buckets" in str(alpha.problem)
        assert 0x1F not in alpha.view
        apiserver.delete("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler-bucket-1f")
        await eventually(lambda: alpha.problem is None)
    assert apiserver.count(verb="update", resource="leases") == 0


async def test_a_claim_whose_answer_never_came_is_seen_held_in_the_view(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Applied at once, answered after our timeout: the claim raises (its outcome unknown),
    and the next view shows it ours at its epoch; a lost claim is never shown held."""
    alpha = BucketLeases(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                         identity="alpha-1", placement="namespace", lease_duration=3.0,
                         may_write=lambda: True, request_timeout=0.3)
    await alpha.refresh()  # connected first: the 0.3 s covers the claim, not a handshake
    apiserver.after_next(verb="create", resource="leases", answer_after=1.0)
    with pytest.raises(TransientError, match="timed out"):
        await alpha.claim(0x1F, None)
    assert alpha.held(0x1F) is None
    await alpha.refresh()
    assert alpha.held(0x1F) == 1
    beta = leases(kube, "beta-1")
    assert await beta.claim(0x2A, None) == 1
    assert await alpha.claim(0x2A, None) is None
    await alpha.refresh()
    assert alpha.held(0x2A) is None


@pytest.mark.parametrize("seen", [False, True], ids=["never-seen", "seen-free"])
async def test_a_claim_lost_to_a_view_behind_the_server_reads_the_lease_again(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession, seen: bool,
) -> None:
    """A view behind the server (its watch lagging: here it is not watched at all) makes a
    claim a CAS on an old version (409), or a create of a Lease that exists (409). The loser
    reads the Lease again, so its next claim is on the version the server has and wins: a
    view behind costs one lost claim, not one per try until the watch catches up."""
    alpha, beta = leases(kube, "alpha-1"), leases(second, "beta-1")
    if seen:
        assert await beta.claim(0x1F, None) == 1
        assert await beta.release(0x1F, 1, handed_to="")
    await alpha.refresh()  # what alpha saw: the Lease free at epoch 1, or no Lease
    if not seen:
        assert await beta.claim(0x1F, None) == 1
        assert await beta.release(0x1F, 1, handed_to="")
    else:
        apiserver.touch("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler-bucket-1f")
    behind = alpha.get(0x1F)
    assert await alpha.claim(0x1F, behind) is None
    now = stored(apiserver)
    assert alpha.get(0x1F) is not None
    assert alpha.get(0x1F).resource_version == now["metadata"]["resourceVersion"]
    assert alpha.get(0x1F).lease == BucketLease(holder="")
    assert await alpha.claim(0x1F, alpha.get(0x1F)) == 2
    assert stored(apiserver)["spec"]["holderIdentity"] == "alpha-1"


async def test_a_lost_claims_read_leaves_a_view_that_moved_on_alone(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession,
) -> None:
    """The view changed while the write was out (its watch delivered): the read after the
    409 does not overwrite it, and a read that finds the Lease gone empties the bucket."""
    alpha, beta = leases(kube, "alpha-1"), leases(second, "beta-1")
    assert await beta.claim(0x1F, None) == 1
    observed = (await alpha.refresh())[0x1F]
    apiserver.touch("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler-bucket-1f")
    delivered = (await beta.refresh())[0x1F]
    # The watch delivers while the read after the 409 is out.
    apiserver.after_next(verb="get", resource="leases",
                         action=lambda: alpha.replace([(0x1F, delivered)]))
    assert await alpha.claim(0x1F, observed) is None
    assert alpha.get(0x1F) is delivered
    apiserver.delete("coordination.k8s.io/v1", "Lease", NAMESPACE, "autoscaler-bucket-1f")
    assert await alpha.claim(0x1F, alpha.get(0x1F)) is None
    assert alpha.get(0x1F) is None
    assert await alpha.claim(0x1F, None) == 1  # made again: the count restarts


async def test_a_hand_over_moves_the_history_and_fences_the_old_holder(
    apiserver: SimApiServer, kube: KubeSession, second: KubeSession,
) -> None:
    """Hand-over steps 3-4 then claim steps 1-3 (§4.4): the holder persists clean and
    releases to beta; beta claims the next epoch, stamps, and restores the same history.
    The old holder's late write is refused by its own check (nothing sent), and, had its
    check passed just before a pause, by the server (FencedError): it lands nowhere."""
    key = "shop/Deployment/web"
    alpha, beta = leases(kube, "alpha-1"), leases(second, "beta-1")
    epoch = await alpha.claim(0x1F, None)
    assert epoch == 1
    checked_then_paused = [False]
    old = bucket_store(kube, lambda: checked_then_paused[0] or alpha.held(0x1F) == epoch)
    await old.stamp("alpha-1", epoch, still_claimed=lambda: alpha.held(0x1F) == epoch)
    written = {key: TargetState(key=key)}
    keeper = HistoryKeeper(old, written, leader=lambda: True)
    await keeper.restore([key])
    written[key].history = HISTORY
    await keeper.persist(clean=True)
    assert await alpha.release(0x1F, epoch, handed_to="beta-1")

    observed = (await beta.refresh())[0x1F]
    assert observed.lease.handed_to == "beta-1"
    new_epoch = await beta.claim(0x1F, observed)
    assert new_epoch == 2
    new = bucket_store(second, lambda: beta.held(0x1F) == new_epoch)
    taken = await new.stamp("beta-1", 2, still_claimed=lambda: beta.held(0x1F) == new_epoch)
    assert taken is not None
    assert taken.clean
    states = {key: TargetState(key=key)}
    await HistoryKeeper(new, states, leader=lambda: True).restore([key])
    assert states[key].history == HISTORY

    with pytest.raises(NotLeaderError, match="not sent"):
        await old.save(b"a stale write")
    checked_then_paused[0] = True  # its check passed, then it paused past the hand-over
    with pytest.raises(FencedError, match="stamped by beta-1 at epoch 2"):
        await old.save(b"a stale write")
    after = await new.load()
    assert after is not None
    assert after.targets[key].history == HISTORY
