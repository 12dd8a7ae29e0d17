"""A queue worker scaled to and from zero, end to end: the real daemon, a real Prometheus
scraping a queue whose series disappears when it is empty, the simulated API server."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon, eventually
from tests.sim.prometheus import CountingProxy, StubRequest, StubResponse, prometheus_error

QUEUE = {"queue": "jobs"}


def worker_config(rig: Rig, tmp_path: Path) -> str:
    return f"""
[daemon]
syncPeriod = "1s"
listenAddress = "127.0.0.1:__PORT__"
stateFile = "{tmp_path / "state"}"
logFormat = "json"

[prometheus]
url = "{rig.prometheus.url}"
timeout = "2s"

[kubernetes]
kubeconfig = "{rig.api.kubeconfig}"
requestTimeout = "3s"

[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "worker" }}
minReplicas = 0
maxReplicas = 10
cooldownPeriod = "5s"

[[autoscaler.metrics]]
type = "External"
external.metric.name = "queue_messages"
external.target = {{ type = "AverageValue", averageValue = "10" }}
external.query = 'sum(queue_messages{{queue="jobs"}})'
external.whenEmpty = "zero"
"""


def worker_replicas(rig: Rig) -> int:
    obj = rig.api.get("apps/v1", "Deployment", "default", "worker")
    assert obj is not None
    return int(obj["spec"]["replicas"])


def scaled_to_zero(status: dict[str, object]) -> str | None:
    for condition in status.get("conditions", []):  # type: ignore[union-attr]
        if condition["type"] == "ScaledToZero":  # type: ignore[index]
            return str(condition["status"])  # type: ignore[index]
    return None


async def test_a_queue_worker_goes_to_zero_and_wakes_on_the_next_pass(
    rig: Rig, tmp_path: Path,
) -> None:
    """30 messages: 1 -> 3. The queue drains and its series disappears: after the 5 s
    cooldown the worker is at 0 (ScaledToZero True). The daemon restarts while the worker is
    at 0 and still knows that zero is its own. 25 messages arrive: the next pass wakes it
    (to 3), then the HPA rules take it further up as the queue grows."""
    rig.api.create_deployment("default", "worker", replicas=1, labels={"app": "worker"})
    exporter = rig.load.exporter
    exporter.set_gauge("queue_messages", QUEUE, 30)
    text = worker_config(rig, tmp_path)
    key = "default/Deployment/worker"
    with daemon(text, tmp_path, name="first") as first:
        await eventually(lambda: worker_replicas(rig) == 3, timeout=40, what="3 workers")
        exporter.remove("queue_messages", QUEUE)
        await eventually(lambda: worker_replicas(rig) == 0, timeout=30, what="0 workers")
        await eventually(lambda: scaled_to_zero(first.target(key)) == "True", timeout=10,
                         what="ScaledToZero True in /status")
        assert await first.stop_async() == 0
    with daemon(text, tmp_path, name="second") as second:
        await eventually(lambda: second.target(key).get("lastOutcome") == "ok", timeout=20,
                         what="a pass after the restart")
        await asyncio.sleep(2)
        assert worker_replicas(rig) == 0, "woken without a message"
        exporter.set_gauge("queue_messages", QUEUE, 25)
        await eventually(lambda: worker_replicas(rig) == 3, timeout=20, what="woken to 3")
        await eventually(lambda: scaled_to_zero(second.target(key)) == "False", timeout=10,
                         what="NotScaledToZero after waking")
        exporter.set_gauge("queue_messages", QUEUE, 95)
        await eventually(lambda: worker_replicas(rig) == 10, timeout=30,
                         what="up to 10 by the HPA rules")


class FlakyProxy(CountingProxy):
    """A real Prometheus behind a proxy that answers 503 while ``down``."""

    down = False

    def _forward(self, request: StubRequest) -> StubResponse:
        if self.down:
            return prometheus_error(503, "unavailable", "unavailable")
        return super()._forward(request)


async def test_time_without_a_reading_does_not_count_toward_the_cooldown(
    rig: Rig, tmp_path: Path,
) -> None:
    """A busy worker at 5, cooldownPeriod 10 s; Prometheus answers 503 for 16 s, during which
    the queue's series disappears (whenEmpty = "zero": inactive). The first reading after the
    outage starts the cooldown instead of ending it: 5 kept for 10 s, then 0. (Before issue
    40: 5 -> 0 at the first reading.)"""
    rig.api.create_deployment("default", "worker", replicas=5, labels={"app": "worker"})
    exporter = rig.load.exporter
    exporter.set_gauge("queue_messages", QUEUE, 50)
    with FlakyProxy(rig.prometheus.url) as proxy:
        text = worker_config(rig, tmp_path).replace(rig.prometheus.url, proxy.url).replace(
            'cooldownPeriod = "5s"', 'cooldownPeriod = "10s"')
        with daemon(text, tmp_path) as proc:
            key = "default/Deployment/worker"
            await eventually(lambda: proc.target(key).get("lastOutcome") == "ok", timeout=30,
                             what="a pass with the queue busy")
            proxy.down = True
            exporter.remove("queue_messages", QUEUE)
            await asyncio.sleep(16)
            proxy.down = False
            back = time.monotonic()
            while time.monotonic() < back + 8:
                assert worker_replicas(rig) == 5, "to zero before a cooldown of readings"
                await asyncio.sleep(0.2)
            await eventually(lambda: worker_replicas(rig) == 0, timeout=10,
                             what="zero once the cooldown has been read")
            print(f"to zero {time.monotonic() - back:.1f}s after the outage ended "
                  "(cooldownPeriod 10 s)")


async def test_a_worker_someone_else_set_to_zero_stays_at_zero(
    rig: Rig, tmp_path: Path,
) -> None:
    """At 0 without this daemon having put it there: paused by hand, not woken up."""
    rig.api.create_deployment("default", "worker", replicas=0, labels={"app": "worker"})
    rig.load.exporter.set_gauge("queue_messages", QUEUE, 50)
    with daemon(worker_config(rig, tmp_path), tmp_path) as proc:
        key = "default/Deployment/worker"
        await eventually(lambda: "ScalingDisabled" in proc.target(key).get("steps", []),
                         timeout=30, what="ScalingDisabled")
        await asyncio.sleep(3)
        assert worker_replicas(rig) == 0


def set_hpa_desired(rig: Rig, desired: int) -> None:
    """What the HPA controller would write: its status's desiredReplicas."""
    rt = rig.api.resource("autoscaling/v2", "HorizontalPodAutoscaler")
    rig.api.rest.patch(rt, "default", "web-hpa", content_type="application/merge-patch+json",
                       body={"status": {"desiredReplicas": desired, "currentReplicas": 2}},
                       subresource="status")


async def test_shadow_mode_compares_with_the_live_hpa_and_never_writes(
    rig: Rig, tmp_path: Path,
) -> None:
    """Beside an HPA on the same Deployment, shadow = true: the daemon decides every pass,
    never writes, and reports whether it agrees with the HPA's desiredReplicas: a metric,
    and an Event with both numbers when they differ."""
    from tests.e2e.test_daemon import config

    rig.api.create_hpa("default", "web-hpa", target_name="web")
    set_hpa_desired(rig, 4)
    rig.load.demand = 400  # 4 pods at 100 each
    text = config(rig, tmp_path).replace("maxReplicas = 10", "maxReplicas = 10\nshadow = true")
    with daemon(text, tmp_path) as proc:
        await eventually(lambda: proc.target().get("shadow", {}).get("agree") is True,
                         timeout=40, what="agreement with the HPA")
        assert 'autoscaler_shadow_agreement{namespace="default",kind="Deployment",name="web"} 1\n' in (
            proc.metrics())
        set_hpa_desired(rig, 7)
        await eventually(lambda: proc.target().get("shadow", {}).get("agree") is False,
                         timeout=10, what="a disagreement")
        await eventually(lambda: any(
            e.get("reason") == "ShadowDisagreement" and "would scale to 4" in e["message"]
            and "wants 7" in e["message"]
            for e in rig.api.store.list(("", "events"), "default")), timeout=10,
            what="the ShadowDisagreement event")
        assert 'autoscaler_shadow_agreement{namespace="default",kind="Deployment",name="web"} 0\n' in (
            proc.metrics())
    assert rig.api.count(verb="update", resource="deployments/scale") == 0
