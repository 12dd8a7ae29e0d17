"""The shared list-and-watch machinery: a LIST into the sink, then events in order."""

import asyncio
import json

import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.adapters.kube.informer import (
    Backoff,
    Informer,
    PlainWatch,
    RawObject,
    WatchCounters,
    WatchOptions,
)
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.adapters.kube.watch_cache import Informers
from tests.adapters.kube.waiting import eventually
from tests.sim.kube import SimApiServer

OPTIONS = WatchOptions(watch_timeout=5, page_size=2, backoff=Backoff(initial=0.01, maximum=0.05))


class Recorder:
    """A sink that keeps what it was told, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def convert(self, obj: RawObject) -> str:
        return str(obj["metadata"]["name"])

    def replace(self, converted: list[str]) -> None:
        names = ",".join(sorted(converted))
        self.calls.append(("replace", names))

    def upsert(self, obj: RawObject) -> None:
        self.calls.append(("upsert", obj["metadata"]["name"]))

    def delete(self, obj: RawObject) -> None:
        self.calls.append(("delete", obj["metadata"]["name"]))


def pod_names(api: SimApiServer) -> set[str]:
    return {pod["metadata"]["name"] for pod in api.pods("shop")}


async def test_list_then_events(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Every page of the LIST reaches the sink at once; later changes arrive one by one."""
    apiserver.create_deployment("shop", "web", replicas=3)
    listed = pod_names(apiserver)
    sink, counters = Recorder(), WatchCounters()
    informer = Informer(resource="pods", namespace="shop",
                        list_call=CoreV1Api(kube.api_client).list_namespaced_pod,
                        sink=sink, counters=counters, options=OPTIONS)
    informer.start()
    try:
        async with asyncio.timeout(5):
            await informer.synced.wait()
        apiserver.set_replicas("Deployment", "shop", "web", 4)
        apiserver.settle()
        (added,) = pod_names(apiserver) - listed
        await eventually(lambda: ("upsert", added) in sink.calls)
    finally:
        await informer.stop()
    assert sink.calls[0] == ("replace", ",".join(sorted(listed)))
    assert {verb for verb, _ in sink.calls[1:]} == {"upsert"}
    assert (counters.lists, counters.watches) == (2, 1)  # three pods, pages of two
    assert counters.events == len(sink.calls) - 1


async def test_plain_watch_sets_what_the_library_watch_sets() -> None:
    """PlainWatch skips the library's __init__: it must set the same attributes, or a
    release of kubernetes-asyncio that adds one breaks the watch at run time, not here."""
    library = watch.Watch(return_type="object")
    try:
        assert set(vars(PlainWatch())) == set(vars(library))
    finally:
        await library.close()


def test_plain_watch_events_stay_parsed_dicts_and_keep_errors() -> None:
    stream = PlainWatch()
    pod = {"metadata": {"name": "web-1", "resourceVersion": "41"}, "spec": {}}
    event = stream.unmarshal_event(json.dumps({"type": "MODIFIED", "object": pod}), "object")
    assert event["raw_object"] == pod
    assert event["object"] is event["raw_object"]  # not a dumped-and-parsed copy
    assert stream.resource_version == "41"  # the library resumes from it
    gone = {"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "old"}}
    with pytest.raises(ApiException) as error:
        stream.unmarshal_event(json.dumps(gone), "object")
    assert error.value.status == 410


async def test_unknown_namespace_names_the_cache() -> None:
    """Asking about a namespace never added is a KeyError saying which cache and what to do."""
    informers = Informers([], owner="the test cache", scope="cluster",
                          counters=WatchCounters(), options=OPTIONS)
    with pytest.raises(KeyError, match="not in the test cache; add it first"):
        await informers.wait_synced("shop")
    assert not informers.is_synced("shop")
