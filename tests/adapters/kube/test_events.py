"""core/v1 Events on targets: upstream's reasons, client-go's aggregation, never raising."""

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from autoscaler.adapters.kube.discovery import Discovery
from autoscaler.adapters.kube.events import EventRecorder, SpamPolicy
from autoscaler.adapters.kube.scale import ScaleClient
from autoscaler.adapters.kube.session import KubeSession
from autoscaler.algorithm import EventReason, rescale_message
from tests.adapters.kube.conftest import Ref
from tests.sim.kube import SimApiServer

EVENTS = ("", "events")


class Clock:
    """Wall-clock stand-in that moves a minute per reading, so timestamps differ."""

    def __init__(self) -> None:
        self.ticks: Iterator[int] = iter(range(1000))

    def __call__(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=next(self.ticks))


@pytest.fixture
async def recorder(kube: KubeSession, apiserver: SimApiServer) -> AsyncIterator[EventRecorder]:
    apiserver.create_deployment("shop", "web", replicas=2)
    scales = ScaleClient(kube.api_client, Discovery(kube.api_client))
    await scales.get_scale("shop", Ref())  # learns the uid that events carry
    async with EventRecorder(kube.api_client, uid_of=scales.uid_of, clock=Clock(),
                             instance="test-1") as events:
        yield events


def stored(api: SimApiServer) -> list[dict[str, Any]]:
    return api.store.list(EVENTS, "shop")


async def rescale(recorder: EventRecorder, size: int = 5, warning: bool = False) -> None:
    await recorder.record("shop", Ref(), warning=warning, reason=EventReason.SUCCESSFUL_RESCALE,
                          message=rescale_message(size, "cpu above target"))


async def test_event_on_the_target(recorder: EventRecorder, apiserver: SimApiServer) -> None:
    """An event names the target (with its uid, as kubectl describe matches), upstream's
    reason and message, and our component."""
    await rescale(recorder)
    await recorder.flush()
    [event] = stored(apiserver)
    deployment = apiserver.get("apps/v1", "Deployment", "shop", "web")
    assert deployment is not None
    assert event["involvedObject"] == {
        "apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web",
        "uid": deployment["metadata"]["uid"]}
    assert (event["reason"], event["message"], event["type"]) == (
        "SuccessfulRescale", "New size: 5; reason: cpu above target", "Normal")
    assert (event["source"], event["count"]) == ({"component": "autoscaler"}, 1)


async def test_repeats_are_aggregated(recorder: EventRecorder, apiserver: SimApiServer) -> None:
    """The same event three times is one Event with count 3 and a later lastTimestamp."""
    for _ in range(3):
        await rescale(recorder)
    await rescale(recorder, size=6)
    await recorder.flush()
    events = sorted(stored(apiserver), key=lambda e: e["message"])
    assert [(e["message"][:11], e["count"]) for e in events] == [
        ("New size: 5", 3), ("New size: 6", 1)]
    assert events[0]["lastTimestamp"] > events[0]["firstTimestamp"]
    assert apiserver.count(verb="patch", resource="events") == 2
    assert apiserver.count(verb="create", resource="events") == 2


async def test_expired_event_is_created_again(recorder: EventRecorder,
                                              apiserver: SimApiServer) -> None:
    """If the Event we would update is gone (TTL), a new one is created."""
    await rescale(recorder)
    await recorder.flush()
    [event] = stored(apiserver)
    apiserver.store.delete(EVENTS, "shop", event["metadata"]["name"])
    await rescale(recorder)
    await recorder.flush()
    [again] = stored(apiserver)
    assert again["count"] == 1
    assert again["metadata"]["name"] != event["metadata"]["name"]


async def test_failures_never_raise(recorder: EventRecorder, apiserver: SimApiServer) -> None:
    """A 500 or a 403 while recording is counted and logged; the caller never sees it."""
    apiserver.fail_next(1, status=500, verb="create", resource="events")
    await rescale(recorder, warning=True)
    await recorder.flush()
    apiserver.deny("create", "events")
    await rescale(recorder, size=7)
    await recorder.flush()
    assert recorder.counters.failed == 2
    assert stored(apiserver) == []


async def test_full_queue_drops(kube: KubeSession) -> None:
    """record never blocks: beyond the queue's size, events are dropped and counted."""
    events = EventRecorder(kube.api_client, queue_size=1)  # worker not started
    await rescale(events)
    await rescale(events, size=6)
    assert events.counters.dropped == 1


async def test_spam_is_throttled(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Beyond the burst, a repeating event is sent once per refill period."""
    apiserver.create_deployment("shop", "web", replicas=2)
    now = [0.0]
    async with EventRecorder(kube.api_client, spam=SpamPolicy(burst=2, refill_seconds=60),
                             monotonic=lambda: now[0]) as events:
        for _ in range(5):
            await rescale(events)
        now[0] = 60.0
        await rescale(events)
        await rescale(events)
        await events.flush()
        assert events.counters.throttled == 4
    [event] = stored(apiserver)
    assert event["count"] == 3


async def test_close_sends_what_is_queued(kube: KubeSession, apiserver: SimApiServer) -> None:
    """Leaving the context flushes pending events before stopping."""
    apiserver.create_deployment("shop", "web", replicas=2)
    async with EventRecorder(kube.api_client) as events:
        await rescale(events)
    assert len(stored(apiserver)) == 1
