"""The history kept on a ConfigMap, over real HTTPS against the simulated API server: a read
is a snapshot, proven absent (404) or an error; never a guess."""

from __future__ import annotations

import base64
import gzip

import pytest

from autoscaler.adapters.kube.configmap_store import (
    OWNER_ANNOTATION,
    SET_ASIDE_ANNOTATION,
    STATE_KEY,
    ConfigMapStateStore,
)
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.errors import (
    ConflictError,
    StateInUseError,
    StateSetAsideError,
    StateUnavailableError,
)
from autoscaler.snapshot import SavedTarget, Snapshot, decode, encode
from tests.adapters.kube.conftest import apiserver, kube
from tests.sim.kube import SimApiServer

__all__ = ["apiserver", "kube"]
NAMESPACE = "autoscaler"
HISTORY = History(recommendations=(Recommendation(replicas=4, timestamp=1.7e9),),
                  scale_down_events=(ScaleEvent(change=1, timestamp=1.7e9),))


def snapshot(key: str = "shop/Deployment/web", *, clean: bool = False) -> Snapshot:
    return Snapshot(targets={key: SavedTarget(history=HISTORY)}, clean=clean, saved_at=1.7e9)


def store(kube: KubeSession) -> ConfigMapStateStore:
    return ConfigMapStateStore(kube.api_client, namespace=NAMESPACE, name="autoscaler-state",
                               request_timeout=2.0, clock=lambda: 1_764_000_000.0)


def stored(apiserver: SimApiServer, name: str = "autoscaler-state") -> bytes:
    configmap = apiserver.get("v1", "ConfigMap", NAMESPACE, name)
    assert configmap is not None
    return base64.b64decode(configmap["binaryData"][STATE_KEY])


async def test_round_trip_through_a_configmap(apiserver: SimApiServer, kube: KubeSession) -> None:
    """Nothing saved is proven absent (404); a save creates the ConfigMap; a new store loads
    it back."""
    apiserver.create_namespace(NAMESPACE)
    assert await store(kube).load() is None
    await store(kube).save(encode(snapshot()))
    assert await store(kube).load() == snapshot()


async def test_an_unchanged_state_is_not_written_again(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Saving the same snapshot twice makes one write."""
    apiserver.create_namespace(NAMESPACE)
    keeper = store(kube)
    await keeper.save(encode(snapshot()))
    await keeper.save(encode(snapshot()))
    writes = apiserver.count(verb="create", resource="configmaps") + apiserver.count(
        verb="update", resource="configmaps")
    assert writes == 1


async def test_a_write_after_someone_elses_is_a_conflict_never_an_overwrite(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Another instance wrote since we read (409): ours is refused (ConflictError) and
    theirs stays; once we have read it again, our next write carries its version."""
    apiserver.create_namespace(NAMESPACE)
    ours, theirs = store(kube), store(kube)
    await ours.save(encode(snapshot()))
    assert await theirs.load() == snapshot()
    await theirs.save(encode(snapshot("other")))
    with pytest.raises(ConflictError, match="409"):
        await ours.save(encode(snapshot("mine")))
    assert await store(kube).load() == snapshot("other")
    assert await ours.load() == snapshot("other")
    await ours.save(encode(snapshot("mine")))
    assert await store(kube).load() == snapshot("mine")


@pytest.mark.parametrize("first", ["create", "update"])
async def test_a_configmap_created_or_deleted_by_someone_else_is_a_conflict(
    apiserver: SimApiServer, kube: KubeSession, first: str,
) -> None:
    """Created by another instance after we found none (409 AlreadyExists), or deleted
    after we read it (404 on our PUT): a conflict, and nothing is written."""
    apiserver.create_namespace(NAMESPACE)
    ours = store(kube)
    if first == "create":
        assert await ours.load() is None
        await store(kube).save(encode(snapshot("other")))
    else:
        await ours.save(encode(snapshot()))
        apiserver.delete("v1", "ConfigMap", NAMESPACE, "autoscaler-state")
    with pytest.raises(ConflictError):
        await ours.save(encode(snapshot("mine")))
    assert await store(kube).load() == (snapshot("other") if first == "create" else None)


@pytest.mark.parametrize("status", [500, 503, 403, 429])
async def test_a_failed_read_is_unavailable_not_empty(
    apiserver: SimApiServer, kube: KubeSession, status: int,
) -> None:
    """Any failure but a 404 is an error to retry, never an empty history."""
    apiserver.create_namespace(NAMESPACE)
    await store(kube).save(encode(snapshot()))
    apiserver.fail_next(1, status=status, verb="get", resource="configmaps")
    with pytest.raises(StateUnavailableError, match=f"HTTP {status}"):
        await store(kube).load()
    assert await store(kube).load() == snapshot()


async def test_a_hung_read_is_unavailable(apiserver: SimApiServer, kube: KubeSession) -> None:
    """A read that times out is an error to retry."""
    apiserver.create_namespace(NAMESPACE)
    apiserver.delay_next(1, seconds=5, verb="get", resource="configmaps")
    with pytest.raises(StateUnavailableError, match="timed out"):
        await store(kube).load()


async def test_a_configmap_without_our_key_is_empty(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Created empty by someone else (for RBAC, say): nothing of ours to lose; our save
    replaces it."""
    apiserver.create_namespace(NAMESPACE)
    apiserver.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "autoscaler-state", "namespace": NAMESPACE}})
    keeper = store(kube)
    assert await keeper.load() is None
    await keeper.save(encode(snapshot()))
    assert decode(stored(apiserver)) == snapshot()


@pytest.mark.parametrize("data", [b"garbage", gzip.compress(b'{"version": 7, "targets": {}}'),
                                  b""], ids=["garbage", "future-version", "empty"])
async def test_an_undecodable_state_is_copied_aside_before_anything_replaces_it(
    apiserver: SimApiServer, kube: KubeSession, data: bytes,
) -> None:
    """The bytes go to ``<name>.unreadable-<UTC time>`` with the reason; the original stays
    until our next save replaces it."""
    apiserver.create_namespace(NAMESPACE)
    apiserver.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "autoscaler-state", "namespace": NAMESPACE},
                      "binaryData": {STATE_KEY: base64.b64encode(data).decode()}})
    keeper = store(kube)
    with pytest.raises(StateSetAsideError) as caught:
        await keeper.load()
    kept = "autoscaler-state.unreadable-20251124t160000z"
    assert caught.value.kept_as == f"ConfigMap {NAMESPACE}/{kept}"
    assert stored(apiserver, kept) == data
    copy = apiserver.get("v1", "ConfigMap", NAMESPACE, kept)
    assert copy is not None
    assert copy["metadata"]["annotations"][SET_ASIDE_ANNOTATION].startswith("autoscaler-state: ")
    assert stored(apiserver) == data
    await keeper.save(encode(snapshot()))
    assert decode(stored(apiserver)) == snapshot()


async def test_an_undecodable_state_that_cannot_be_copied_stays_unread(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """If the copy fails, the read fails (to be retried): nothing may overwrite the only
    copy of the bytes."""
    apiserver.create_namespace(NAMESPACE)
    apiserver.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "autoscaler-state", "namespace": NAMESPACE},
                      "binaryData": {STATE_KEY: base64.b64encode(b"garbage").decode()}})
    apiserver.fail_next(1, status=500, verb="create", resource="configmaps")
    with pytest.raises(StateUnavailableError, match="cannot be copied aside"):
        await store(kube).load()
    assert stored(apiserver) == b"garbage"


def owned_store(kube: KubeSession, owner: str, **kwargs: bool) -> ConfigMapStateStore:
    return ConfigMapStateStore(kube.api_client, namespace=NAMESPACE, name="autoscaler-state",
                               request_timeout=2.0, owner=owner, **kwargs)


def owner_of(apiserver: SimApiServer) -> str | None:
    configmap = apiserver.get("v1", "ConfigMap", NAMESPACE, "autoscaler-state")
    assert configmap is not None
    return (configmap["metadata"].get("annotations") or {}).get(OWNER_ANNOTATION)


async def test_each_write_names_the_owner_and_a_store_without_one_is_taken(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A ConfigMap written before owners (no annotation) is read and, at the next write,
    named ours; the same owner reads it back."""
    apiserver.create_namespace(NAMESPACE)
    await store(kube).save(encode(snapshot()))
    ours = owned_store(kube, "Lease autoscaler/autoscaler")
    assert await ours.load() == snapshot()
    await ours.save(encode(snapshot(clean=True)))
    assert owner_of(apiserver) == "Lease autoscaler/autoscaler"
    assert await owned_store(kube, "Lease autoscaler/autoscaler").load() == snapshot(clean=True)


async def test_another_owners_store_is_refused_naming_the_lease_holder(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Owned by another Lease: ``check`` and ``load`` refuse, naming the Lease and its
    holder, and nothing is written."""
    apiserver.create_namespace(NAMESPACE)
    apiserver.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": "other", "namespace": NAMESPACE},
                      "spec": {"holderIdentity": "pod-7_ab12"}})
    await owned_store(kube, "Lease autoscaler/other").save(encode(snapshot()))
    mine = owned_store(kube, "Lease autoscaler/autoscaler")
    for call in (mine.check, mine.load):
        with pytest.raises(StateInUseError, match="Lease autoscaler/other, held by pod-7_ab12"):
            await call()
    assert owner_of(apiserver) == "Lease autoscaler/other"


async def test_a_release_gives_the_store_up_for_another_pod(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Without leader election the owner is the pod; at a graceful stop it gives the store
    up, and another pod's daemon may take it."""
    apiserver.create_namespace(NAMESPACE)
    first = owned_store(kube, "host pod-a")
    assert await first.load() is None
    await first.save(encode(snapshot()))
    with pytest.raises(StateInUseError, match="host pod-a"):
        await owned_store(kube, "host pod-b").load()
    await first.release()
    assert owner_of(apiserver) is None
    assert await owned_store(kube, "host pod-b").load() == snapshot()


async def test_a_read_only_store_neither_writes_nor_sets_aside(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """A dry run's view of the live store: an undecodable one is an error (left in place,
    not copied), a save is refused, and no owner is checked."""
    apiserver.create_namespace(NAMESPACE)
    apiserver.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "autoscaler-state", "namespace": NAMESPACE,
                                   "annotations": {OWNER_ANNOTATION: "host pod-a"}},
                      "binaryData": {STATE_KEY: base64.b64encode(b"garbage").decode()}})
    reader = owned_store(kube, "host pod-b", read_only=True)
    with pytest.raises(StateUnavailableError, match="cannot be decoded"):
        await reader.load()
    with pytest.raises(StateUnavailableError, match="only read"):
        await reader.save(encode(snapshot()))
    assert apiserver.count(verb="create", resource="configmaps") == 0
