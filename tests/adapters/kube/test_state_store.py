"""The history kept on a ConfigMap, over real HTTPS against the simulated API server."""

from __future__ import annotations

from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.state import STATE_KEY, ConfigMapStateStore
from autoscaler.algorithm import History, Recommendation, ScaleEvent
from tests.adapters.kube.conftest import apiserver, kube
from tests.sim.kube import SimApiServer

__all__ = ["apiserver", "kube"]
NAMESPACE = "autoscaler"
HISTORY = History(recommendations=(Recommendation(replicas=4, timestamp=1.7e9),),
                  scale_down_events=(ScaleEvent(change=1, timestamp=1.7e9),))


def store(kube: KubeSession) -> ConfigMapStateStore:
    return ConfigMapStateStore(kube.api_client, namespace=NAMESPACE, name="autoscaler-state")


async def test_round_trip_through_a_configmap(apiserver: SimApiServer, kube: KubeSession) -> None:
    """Nothing saved loads empty; a save creates the ConfigMap; a new store loads it back."""
    apiserver.create_namespace(NAMESPACE)
    assert await store(kube).load() == {}
    await store(kube).save({"shop/Deployment/web": HISTORY})
    configmap = apiserver.get("v1", "ConfigMap", NAMESPACE, "autoscaler-state")
    assert configmap is not None
    assert STATE_KEY in configmap["binaryData"]
    assert await store(kube).load() == {"shop/Deployment/web": HISTORY}


async def test_an_unchanged_state_is_not_written_again(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Saving the same histories twice makes one write."""
    apiserver.create_namespace(NAMESPACE)
    keeper = store(kube)
    await keeper.save({"k": HISTORY})
    await keeper.save({"k": HISTORY})
    writes = apiserver.count(verb="create", resource="configmaps") + apiserver.count(
        verb="update", resource="configmaps")
    assert writes == 1


async def test_a_write_after_someone_elses_recovers(
    apiserver: SimApiServer, kube: KubeSession,
) -> None:
    """Another instance wrote since we read (409): re-read the version and write ours."""
    apiserver.create_namespace(NAMESPACE)
    ours, theirs = store(kube), store(kube)
    await ours.save({"k": HISTORY})
    assert await theirs.load() == {"k": HISTORY}
    await theirs.save({"other": HISTORY})
    await ours.save({"mine": HISTORY})
    assert apiserver.count(verb="update", resource="configmaps", status=409) == 1
    assert await store(kube).load() == {"mine": HISTORY}
