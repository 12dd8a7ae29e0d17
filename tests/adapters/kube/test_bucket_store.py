"""A bucket's history on its ConfigMap (adapters/kube/bucket_store.py), over real HTTPS
against the simulated API server: the claimant's stamp, writes that are a CAS on it and
never an overwrite (a stale owner is fenced), the size limit, and the migration from the
single-leader store, which is only read."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from autoscaler.adapters.kube.bucket_store import (
    EPOCH_ANNOTATION,
    MIGRATED_FROM_ANNOTATION,
    STATE_LIMIT,
    BucketStateStore,
    Legacy,
)
from autoscaler.adapters.kube.buckets import RING_LABEL
from autoscaler.adapters.kube.configmap_store import OWNER_ANNOTATION, STATE_KEY
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.errors import (
    FencedError,
    NotLeaderError,
    RejectedError,
    StateSetAsideError,
    StateUnavailableError,
    TransientError,
)
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.ring import Placement, target_bucket
from autoscaler.runtime.status import TargetState
from autoscaler.snapshot import SavedTarget, Snapshot, decode, encode
from tests.adapters.kube.conftest import apiserver, kube
from tests.sim.kube import SimApiServer

__all__ = ["apiserver", "kube"]
NAMESPACE = "autoscaler"
NAME = "autoscaler-state-1f"
HISTORY = History(recommendations=(Recommendation(replicas=4, timestamp=1.7e9),),
                  scale_down_events=(ScaleEvent(change=1, timestamp=1.7e9),))


def snapshot(*keys: str, clean: bool = False) -> Snapshot:
    return Snapshot(targets={key: SavedTarget(history=HISTORY) for key in keys}, clean=clean,
                    saved_at=1.7e9)


def store(kube: KubeSession, *, may_write: bool = True, legacy: Legacy | None = None,
          limit: int | None = None) -> BucketStateStore:
    return BucketStateStore(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                            bucket=0x1F, may_write=lambda: may_write, legacy=legacy,
                            request_timeout=2.0, limit=STATE_LIMIT if limit is None else limit)


async def stamped(kube: KubeSession, owner: str, epoch: int) -> BucketStateStore:
    bucket = store(kube)
    await bucket.stamp(owner, epoch, still_claimed=lambda: True)
    return bucket


def configmap(apiserver: SimApiServer, name: str = NAME) -> dict[str, Any]:
    found = apiserver.get("v1", "ConfigMap", NAMESPACE, name)
    assert found is not None
    return found


def content(apiserver: SimApiServer, name: str = NAME) -> Snapshot:
    return decode(base64.b64decode(configmap(apiserver, name)["binaryData"][STATE_KEY]))


def writes(apiserver: SimApiServer) -> int:
    return apiserver.count(verb="create", resource="configmaps") + apiserver.count(
        verb="update", resource="configmaps")


@pytest.fixture(autouse=True)
def namespace(apiserver: SimApiServer) -> None:
    apiserver.create_namespace(NAMESPACE)


async def test_a_stamp_of_no_state_creates_it_named_ours(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """404 is no state: the stamp creates the ConfigMap, empty, with owner, epoch and the
    ring's labels."""
    assert await store(kube).stamp("alpha-1", 1, still_claimed=lambda: True) is None
    metadata = configmap(apiserver)["metadata"]
    assert metadata["annotations"] == {OWNER_ANNOTATION: "alpha-1", EPOCH_ANNOTATION: "1"}
    assert metadata["labels"][RING_LABEL] == "autoscaler"
    assert "binaryData" not in configmap(apiserver)


async def test_a_new_owners_stamp_keeps_the_content_and_gives_it_back(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """History round trip: what one owner saved, the next one's stamp returns, and the stored
    bytes are unchanged by the stamp."""
    alpha = await stamped(kube, "alpha-1", 1)
    await alpha.save(encode(snapshot("shop/Deployment/web")))
    before = configmap(apiserver)["binaryData"]
    beta = store(kube)
    assert await beta.stamp("beta-1", 2, still_claimed=lambda: True) == snapshot(
        "shop/Deployment/web")
    assert configmap(apiserver)["binaryData"] == before
    assert configmap(apiserver)["metadata"]["annotations"][OWNER_ANNOTATION] == "beta-1"
    assert await beta.load() == snapshot("shop/Deployment/web")


@pytest.mark.parametrize("new_owner_saved", [False, True], ids=["stamp-only", "saved"])
async def test_a_stale_owners_save_after_a_new_stamp_is_fenced_never_written(
    apiserver: SimApiServer, kube: KubeSession, new_owner_saved: bool,
) -> None:
    """F2: the old owner's next write meets the new stamp (409): FencedError, and the state
    stays the new owner's; a read by the old owner is fenced too."""
    alpha = await stamped(kube, "alpha-1", 1)
    await alpha.save(encode(snapshot("old")))
    beta = await stamped(kube, "beta-1", 2)
    if new_owner_saved:
        await beta.save(encode(snapshot("new")))
    with pytest.raises(FencedError, match="stamped by beta-1 at epoch 2 since alpha-1"):
        await alpha.save(encode(snapshot("stale")))
    assert content(apiserver) == snapshot("new" if new_owner_saved else "old")
    assert configmap(apiserver)["metadata"]["annotations"][OWNER_ANNOTATION] == "beta-1"
    with pytest.raises(FencedError):
        await alpha.load()


async def test_a_stamp_never_writes_over_a_later_epoch(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A claimant whose epoch is older than the stamp found is fenced before any write."""
    await stamped(kube, "beta-1", 2)
    sent = writes(apiserver)
    with pytest.raises(FencedError, match="stamped by beta-1 at epoch 2, not older") as error:
        await store(kube).stamp("alpha-1", 1, still_claimed=lambda: True)
    assert writes(apiserver) == sent
    assert error.value.later_epoch == 2  # the claimant counts on from there


@pytest.mark.parametrize("claimed", [True, False], ids=["still-claimed", "claim-lost"])
async def test_a_stamp_raced_by_another_write_is_read_and_sent_again_only_while_claimed(
    apiserver: SimApiServer, kube: KubeSession, claimed: bool,
) -> None:
    """Someone writes between our read and our stamp (409): while our claim holds, read
    again and stamp; once it is lost, FencedError and the other write stays."""
    await (await stamped(kube, "alpha-1", 1)).save(encode(snapshot("web")))
    apiserver.after_next(verb="get", resource="configmaps", action=lambda: apiserver.touch(
        "v1", "ConfigMap", NAMESPACE, NAME))
    beta = store(kube)
    if claimed:
        assert await beta.stamp("beta-1", 2, still_claimed=lambda: True) == snapshot("web")
        assert configmap(apiserver)["metadata"]["annotations"][EPOCH_ANNOTATION] == "2"
    else:
        with pytest.raises(FencedError, match="no longer ours"):
            await beta.stamp("beta-1", 2, still_claimed=lambda: False)
        assert configmap(apiserver)["metadata"]["annotations"][EPOCH_ANNOTATION] == "1"


@pytest.mark.parametrize("edit", [
    {"metadata": {"labels": {"team": "platform"}}},
    {"metadata": {"annotations": {"note": "looked at it"}}},
], ids=["label", "annotation"])
async def test_a_save_after_someone_edited_another_field_is_retried_and_lands(
    apiserver: SimApiServer, kube: KubeSession, edit: dict[str, Any],
) -> None:
    """409 with our stamp still there (a label or annotation edited by hand): sent again,
    once, and the edit is kept."""
    alpha = await stamped(kube, "alpha-1", 1)
    await alpha.save(encode(snapshot("one")))
    apiserver.patch("v1", "ConfigMap", NAMESPACE, NAME, edit)
    await alpha.save(encode(snapshot("two")))
    assert content(apiserver) == snapshot("two")
    field, value = next(iter(edit["metadata"].items()))
    assert value.items() <= configmap(apiserver)["metadata"][field].items()
    assert apiserver.count(verb="update", resource="configmaps", status=409) == 1


async def test_nothing_is_sent_while_the_bucket_may_not_be_written(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """may_write() false right before the PUT: neither a stamp nor a save is sent."""
    await stamped(kube, "alpha-1", 1)
    sent = writes(apiserver)
    invalid = store(kube, may_write=False)
    with pytest.raises(NotLeaderError, match="not sent"):
        await invalid.stamp("alpha-1", 2, still_claimed=lambda: True)
    assert writes(apiserver) == sent
    assert configmap(apiserver)["metadata"]["annotations"][EPOCH_ANNOTATION] == "1"


async def test_a_save_is_not_sent_once_the_bucket_may_no_longer_be_written(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Checked right before the PUT, not once at the stamp: the owner that stops being
    valid sends nothing more, and sends again once it is valid again."""
    valid = [True]
    alpha = BucketStateStore(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                             bucket=0x1F, may_write=lambda: valid[0], request_timeout=2.0)
    await alpha.stamp("alpha-1", 1, still_claimed=lambda: True)
    await alpha.save(encode(snapshot("one")))
    sent = writes(apiserver)
    valid[0] = False
    with pytest.raises(NotLeaderError, match="not sent"):
        await alpha.save(encode(snapshot("two")))
    assert writes(apiserver) == sent
    valid[0] = True
    await alpha.save(encode(snapshot("two")))
    assert content(apiserver) == snapshot("two")


async def test_an_unstamped_store_neither_reads_nor_writes(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Before the claim's stamp there is nothing this member may read as its own or write."""
    with pytest.raises(StateUnavailableError, match="not stamped"):
        await store(kube).save(encode(snapshot("web")))
    with pytest.raises(StateUnavailableError, match="not stamped"):
        await store(kube).load()
    assert writes(apiserver) == 0


async def test_a_state_over_the_limit_is_refused_before_it_is_sent(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """700 KiB of state is 955,736 bytes as stored (base64): over 900 KiB, refused with the
    sizes; the stored state is the last one that fit."""
    alpha = await stamped(kube, "alpha-1", 1)
    await alpha.save(encode(snapshot("web")))
    sent = writes(apiserver)
    with pytest.raises(RejectedError, match=r"955,736 bytes as stored, over the 921,600"):
        await alpha.save(os.urandom(700 * 1024))
    assert writes(apiserver) == sent
    assert content(apiserver) == snapshot("web")


async def test_a_state_of_exactly_the_limit_is_written(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """The limit is inclusive: a state whose stored form is that size is sent."""
    data = encode(snapshot("web"))
    limited = store(kube, limit=len(base64.b64encode(data)))
    await limited.stamp("alpha-1", 1, still_claimed=lambda: True)
    await limited.save(data)
    assert content(apiserver) == snapshot("web")


async def test_the_history_keeper_restores_and_persists_through_it(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """The StateStore port unchanged: one owner's keeper writes a target's history, the next
    owner's keeper, after its stamp, restores the same history."""
    key = "shop/Deployment/web"
    alpha = await stamped(kube, "alpha-1", 1)
    written = {key: TargetState(key=key)}
    first = HistoryKeeper(alpha, written, leader=lambda: True)
    await first.restore([key])
    written[key].history = HISTORY  # what a pass would have decided
    await first.persist(clean=True)
    beta = await stamped(kube, "beta-1", 2)
    states = {key: TargetState(key=key)}
    await HistoryKeeper(beta, states, leader=lambda: True).restore([key])
    assert states[key].history == HISTORY
    assert configmap(apiserver)["metadata"]["annotations"][OWNER_ANNOTATION] == "beta-1"


def legacy_store(apiserver: SimApiServer, data: Snapshot) -> str:
    created = apiserver.create({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "autoscaler-state", "namespace": NAMESPACE},
        "binaryData": {STATE_KEY: base64.b64encode(encode(data)).decode()}})
    return str(created["metadata"]["resourceVersion"])


async def test_a_bucket_without_state_takes_its_targets_from_the_legacy_store(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Migration: only the bucket's targets are taken, the new state names the legacy
    version it came from, and the legacy ConfigMap is never written."""
    version = legacy_store(apiserver, snapshot("a/Deployment/in", "b/Deployment/out",
                                               "a/Deployment/also", clean=True))
    legacy = Legacy(name="autoscaler-state", in_bucket=lambda key: key.startswith("a/"))
    taken = await store(kube, legacy=legacy).stamp("alpha-1", 1, still_claimed=lambda: True)
    assert taken == snapshot("a/Deployment/in", "a/Deployment/also", clean=True)
    assert content(apiserver) == taken
    annotations = configmap(apiserver)["metadata"]["annotations"]
    assert annotations[MIGRATED_FROM_ANNOTATION] == version
    assert apiserver.count(name="autoscaler-state", verb="update") + apiserver.count(
        name="autoscaler-state", verb="create") == 0
    assert configmap(apiserver, "autoscaler-state")["metadata"]["resourceVersion"] == version


async def test_a_bucket_with_state_of_its_own_ignores_the_legacy_store(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Migration happens once: a bucket state that exists is the bucket's history."""
    await (await stamped(kube, "alpha-1", 1)).save(encode(snapshot("a/Deployment/own")))
    legacy_store(apiserver, snapshot("a/Deployment/in"))
    legacy = Legacy(name="autoscaler-state", in_bucket=lambda key: True)
    taken = await store(kube, legacy=legacy).stamp("beta-1", 2, still_claimed=lambda: True)
    assert taken == snapshot("a/Deployment/own")
    assert apiserver.count(name="autoscaler-state", verb="get") == 0


async def test_an_undecodable_state_is_copied_aside_stamped_then_replaced_by_the_keeper(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """The bytes go to ``<name>.unreadable-<UTC time>`` before anything may replace them;
    the bucket is stamped ours all the same (StateSetAsideError says so), a later read says
    it again without a second copy, and the keeper starts afresh and writes over it."""
    apiserver.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": NAME, "namespace": NAMESPACE},
                      "binaryData": {STATE_KEY: base64.b64encode(b"garbage").decode()}})
    alpha = BucketStateStore(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                             bucket=0x1F, may_write=lambda: True, request_timeout=2.0,
                             clock=lambda: 1_764_000_000.0)
    with pytest.raises(StateSetAsideError) as caught:
        await alpha.stamp("alpha-1", 1, still_claimed=lambda: True)
    kept = f"{NAME}.unreadable-20251124t160000z"
    assert caught.value.kept_as == f"ConfigMap {NAMESPACE}/{kept}"
    assert base64.b64decode(configmap(apiserver, kept)["binaryData"][STATE_KEY]) == b"garbage"
    assert configmap(apiserver)["metadata"]["annotations"][OWNER_ANNOTATION] == "alpha-1"
    key = "shop/Deployment/web"
    keeper = HistoryKeeper(alpha, {key: TargetState(key=key)}, leader=lambda: True)
    restored = await keeper.restore([key])
    assert restored.set_aside is not None
    assert apiserver.count(verb="create", resource="configmaps") == 1
    assert content(apiserver).targets == {}  # decodes: the keeper's claim replaced the bytes


@pytest.mark.parametrize("placement", ["namespace", "target"])
async def test_the_legacy_entries_of_a_bucket_are_those_its_keys_hash_to(
    apiserver: SimApiServer, kube: KubeSession, placement: Placement,
) -> None:
    """``Legacy.of_bucket``: by namespace, every target of the namespace; by target, each
    key's own hash (retired keys too: the key alone says where it goes)."""
    keys = [f"{ns}/Deployment/{name}" for ns in ("shop", "payments", "search")
            for name in ("web", "api", "worker")]
    legacy_store(apiserver, snapshot(*keys))
    bucket = target_bucket(namespace="shop", key=keys[0], placement=placement)
    mine = BucketStateStore(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                            bucket=bucket, may_write=lambda: True, request_timeout=2.0,
                            legacy=Legacy.of_bucket("autoscaler-state", bucket, placement))
    taken = await mine.stamp("alpha-1", 1, still_claimed=lambda: True)
    assert taken is not None
    # FNV-1a-64 of these: shop 0x46, payments 0xe1, search 0x22; by key, shop's web 0xd7
    # and the others elsewhere.
    assert set(taken.targets) == ({key for key in keys if key.startswith("shop/")}
                                  if placement == "namespace" else {"shop/Deployment/web"})


async def test_a_stamp_whose_answer_never_came_is_sent_again_and_lands(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Our stamp applied but answered too late: the claimant's retry finds its own stamp
    (same owner and epoch, not a newer one) and stamps again; the content is unchanged."""
    await (await stamped(kube, "alpha-1", 1)).save(encode(snapshot("web")))
    beta = BucketStateStore(kube.api_client, namespace=NAMESPACE, ring="autoscaler",
                            bucket=0x1F, may_write=lambda: True, request_timeout=0.3)
    apiserver.after_next(verb="update", resource="configmaps", answer_after=1.0)
    with pytest.raises(TransientError, match="timed out"):
        await beta.stamp("beta-1", 2, still_claimed=lambda: True)
    assert configmap(apiserver)["metadata"]["annotations"][OWNER_ANNOTATION] == "beta-1"
    assert await beta.stamp("beta-1", 2, still_claimed=lambda: True) == snapshot("web")
    await beta.save(encode(snapshot("web", "api")))
    assert content(apiserver) == snapshot("web", "api")


async def test_the_keeper_of_a_fenced_bucket_neither_folds_in_nor_retries(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """FencedError is a StateInUseError: the old owner's keeper raises it from persist at
    once (no fold-in, no second write), and the new owner's state stays."""
    key = "shop/Deployment/web"
    alpha = await stamped(kube, "alpha-1", 1)
    written = {key: TargetState(key=key)}
    keeper = HistoryKeeper(alpha, written, leader=lambda: True)
    await keeper.restore([key])
    await (await stamped(kube, "beta-1", 2)).save(encode(snapshot("new")))
    sent = writes(apiserver)
    written[key].history = HISTORY
    with pytest.raises(FencedError):
        await keeper.persist()
    assert keeper.conflicts == 0
    assert writes(apiserver) == sent + 1  # the one refused PUT, nothing after it
    assert content(apiserver) == snapshot("new")


async def test_the_read_right_after_a_stamp_is_the_stamps_own(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A claim reads the state once: the keeper's load right after the stamp is answered by
    the stamp's read (one GET fewer per move); any later load reads the server again."""
    first = await stamped(kube, "alpha-1", 1)
    await first.save(encode(snapshot("kept")))
    second = store(kube)
    await second.stamp("beta-1", 2, still_claimed=lambda: True)
    gets = apiserver.count(verb="get", resource="configmaps")
    assert await second.load() == snapshot("kept")
    assert apiserver.count(verb="get", resource="configmaps") == gets
    assert await second.load() == snapshot("kept")
    assert apiserver.count(verb="get", resource="configmaps") == gets + 1
