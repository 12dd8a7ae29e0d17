"""The history kept on a ConfigMap, over real HTTPS against the simulated API server: a read
is a snapshot, proven absent (404) or an error; never a guess."""

from __future__ import annotations

import base64
import gzip

import pytest

from autoscaler.adapters.kube.configmap_store import (
    SET_ASIDE_ANNOTATION,
    STATE_KEY,
    ConfigMapStateStore,
)
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.errors import ConflictError, StateSetAsideError, StateUnavailableError
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
