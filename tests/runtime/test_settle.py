"""A pass decides every target at once, then sends what some of them need, in order.

The ``Fleet`` double records every write and event in one log, so the order a target's
network work happens in is visible."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import pytest

from autoscaler.algorithm import MetricUnavailable
from autoscaler.observability.logs import configure_logging
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.pause import PAUSED_REPLICAS_ANNOTATION
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from tests.runtime.doubles import Depths, Fleet, NoPods, depth, targets


async def test_writes_and_events_follow_the_decisions_in_order() -> None:
    cluster = Fleet({"held": {PAUSED_REPLICAS_ANNOTATION: "3"}})
    metrics = Depths({"busy": depth(60), "calm": depth(20), "held": depth(60),
                      "blind": MetricUnavailable(reason="Prometheus unavailable: refused")})
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=metrics, events=cluster,
                            owners=cluster, options=ReconcileOptions(concurrency=2),
                            telemetry=DaemonMetrics())
    fleet = targets("busy", "calm", "held", "blind")
    async with asyncio.timeout(10):
        await reconciler.run_pass(fleet, deadline=time.monotonic() + 5)

    def done(name: str) -> list[str]:
        return [what for target, what in cluster.log if target == name]

    assert done("busy") == ["write 4", "SuccessfulRescale"]  # 6 wanted; 2 may only double
    assert done("held") == ["write 3", "SuccessfulRescale"]
    assert done("blind") == ["FailedGetExternalMetric", "FailedComputeMetricsReplicas"]
    assert done("calm") == []
    states = {t.scale_target_ref.name: reconciler.states[t.key] for t in fleet}
    assert {name: s.last_outcome for name, s in states.items()} == {
        "busy": "ok", "calm": "ok", "held": "paused", "blind": "invalid_metrics"}
    assert states["held"].pause == f"annotation {PAUSED_REPLICAS_ANNOTATION}"
    assert (states["busy"].expected_replicas, states["held"].expected_replicas) == (4, 3)
    assert (states["blind"].last_error or "").endswith("first error is: Prometheus unavailable: refused")
    histogram = reconciler.telemetry.reconcile_duration.collect()[0]
    [count] = [s.value for s in histogram.samples if s.name.endswith("_count")]
    assert count == len(fleet)  # one duration per target, sent work or not


class Broken:
    """Two values for the one metric of ``odd``: the core refuses them (ValueError), as it
    would any bug that hands it what it cannot decide on."""

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        return FetchedMetrics(values={
            w.target.key: (depth(60),) if w.target.scale_target_ref.name == "busy"
            else (depth(60), depth(60)) for w in wanted}, pods={})


async def test_a_target_that_fails_to_evaluate_is_held_and_said_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its evaluation raises every pass: the target is held with a FailedEvaluation
    condition, the log line and Event come once (no traceback outside debug), and the other
    targets are decided as usual."""
    cluster = Fleet({})
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=Broken(), events=cluster,
                            owners=cluster, options=ReconcileOptions(concurrency=2),
                            telemetry=DaemonMetrics())
    fleet = targets("busy", "odd")
    configure_logging(log_format="json", level="info")  # as the daemon runs: no debug
    capsys.readouterr()
    for _ in range(3):
        async with asyncio.timeout(10):
            await reconciler.run_pass(fleet, deadline=time.monotonic() + 5)
        await asyncio.sleep(0.01)  # the Event is sent in the background
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()
             if line.startswith("{")]
    failures = [e for e in lines if e["event"] == "target evaluation failed: holding it"]
    assert len(failures) == 1
    assert "exception" not in failures[0]
    assert "ValueError: got 2 metric values" in failures[0]["error"]
    assert [what for name, what in cluster.log if name == "odd"] == ["FailedEvaluation"]
    odd = reconciler.states[fleet[1].key]
    assert odd.last_outcome == "error"
    assert next((c.reason, c.status) for c in odd.conditions) == ("FailedEvaluation", False)
    assert [what for name, what in cluster.log if name == "busy"][:2] == [
        "write 4", "SuccessfulRescale"]


class Flapping(Fleet):
    """A lease that flaps: lost while Prometheus answers, won back (an API server blip) by
    the time the pass sends its first Event."""

    leader = True

    async def record(self, namespace: str, ref: object, *, warning: bool, reason: str,
                     message: str) -> None:
        self.leader = True
        await super().record(namespace, ref, warning=warning,  # type: ignore[arg-type]
                             reason=reason, message=message)

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        self.leader = False
        return await Depths({"blind": MetricUnavailable(reason="Prometheus unavailable"),
                             "busy": depth(60)}).fetch_metrics(wanted, deadline=deadline)


async def test_a_write_not_put_on_record_is_not_sent_when_leadership_comes_back() -> None:
    """Leadership lost before the pass put its writes on record (so it put none) and won
    back while the pass sends its Events: the writes of that pass are not sent, since none
    is on record (a crash, or the restore the regained lease starts, would forget them)."""
    cluster = Flapping({})
    persisted: list[int] = []

    async def persist() -> None:
        persisted.append(len(cluster.log))

    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=cluster, events=cluster,
                            owners=cluster, telemetry=DaemonMetrics(), options=ReconcileOptions(
                                concurrency=1, persist=persist, may_write=lambda key: cluster.leader))
    async with asyncio.timeout(10):
        await reconciler.run_pass(targets("blind", "busy"), deadline=time.monotonic() + 5)
    assert ("blind", "FailedGetExternalMetric") in cluster.log  # leadership came back here
    writes = [entry for entry in cluster.log if entry[1].startswith("write")]
    assert writes == [] or persisted, f"sent without being on record: {writes}"
