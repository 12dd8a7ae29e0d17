"""A fleet with a target in each mode the daemon has, and the check that what ``/status`` and
``/metrics`` say of a target is one state, and the cluster's.

``MODE_TARGETS``: ``pinned`` (decided, then held by the paused-replicas annotation),
``shadowed`` (shadow mode beside an HPA that wants another count), ``fallback`` (every
metric invalid: its fallback count), ``worker`` (scaled to zero), ``predicted`` (a
``prediction`` in forecastOnly); ``dry`` is run by a second daemon with ``--dry-run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

from tests.e2e.conftest import Rig
from tests.e2e.harness import LoadModel

QUEUE = {"queue": "jobs"}
WORKLOADS = {  # name -> (replicas, total demand), each with app=<name> pods
    "pinned": (2, 150.0),
    "shadowed": (2, 400.0),
    "fallback": (2, 0.0),
    "worker": (1, 0.0),
    "predicted": (2, 150.0),
    "dry": (2, 400.0),
}
PINNED_AT = 3


def _target(name: str, extra: str = "", metric: str = "") -> str:
    metric = metric or (
        'type = "Pods"\npods = { metric = { name = "app_load" }, target = { type = '
        '"AverageValue", averageValue = "100" }, query = \'app_load{${pod_selector}}\', '
        'window = "1s" }')
    return f"""
[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "{name}" }}
minReplicas = 1
maxReplicas = 10
{extra}
[[autoscaler.metrics]]
{metric}
"""


PREDICTION = ('prediction = { model = "seasonalNaive", season = "10m", step = "10s", '
              'horizon = "60s", maxErrorPercent = 50, forecastOnly = true }')
QUEUE_METRIC = ('type = "External"\nexternal.metric.name = "queue_messages"\n'
                'external.target = { type = "AverageValue", averageValue = "10" }\n'
                "external.query = 'sum(queue_messages{queue=\"jobs\"})'\n"
                'external.whenEmpty = "zero"')
BAD_METRIC = ('type = "Pods"\npods = { metric = { name = "app_load" }, target = { type = '
              '"AverageValue", averageValue = "100" }, query = \'no_such_metric{${pod_selector}}\' }')


def mode_targets(*, shadow: bool = True) -> str:
    """The targets of the main daemon (``dry`` is the dry-run daemon's, ``dry_target``)."""
    return "".join([
        _target("pinned"),
        _target("shadowed", "shadow = true" if shadow else ""),
        _target("fallback", "fallback = { failureThreshold = 3, replicas = 5 }", BAD_METRIC),
        _target("worker", "cooldownPeriod = \"3s\"", QUEUE_METRIC).replace(
            "minReplicas = 1", "minReplicas = 0"),
        _target("predicted", metric=(
            'type = "Pods"\npods = { metric = { name = "app_load" }, target = { type = '
            '"AverageValue", averageValue = "100" }, query = \'app_load{${pod_selector}}\', '
            'window = "1s" }\n' + PREDICTION)),
    ])


def dry_target() -> str:
    return _target("dry")


MODE_NAMES = ("pinned", "shadowed", "fallback", "worker", "predicted")


def daemon_section(*, prometheus: str, kubeconfig: str, state: str) -> str:
    return f"""
[daemon]
syncPeriod = "1s"
downscaleStabilization = "6s"
listenAddress = "127.0.0.1:__PORT__"
stateFile = "{state}"
logFormat = "json"
logLevel = "info"

[prometheus]
url = "{prometheus}"
timeout = "2s"

[kubernetes]
kubeconfig = "{kubeconfig}"
requestTimeout = "3s"
"""


@contextlib.asynccontextmanager
async def mode_fleet(rig: Rig) -> AsyncIterator[dict[str, LoadModel]]:
    """The deployments of every mode with their load exported, and the HPA beside
    ``shadowed`` (it wants 3 where the load asks for 4)."""
    loads: dict[str, LoadModel] = {}
    for name, (replicas, demand) in WORKLOADS.items():
        rig.api.create_deployment("default", name, replicas=replicas, labels={"app": name},
                                  requests={"cpu": "500m"})
        loads[name] = LoadModel(api=rig.api, exporter=rig.load.exporter,
                                selector=f"app={name}", demand=demand)
    rig.api.create_hpa("default", "shadowed-hpa", target_name="shadowed")
    rt = rig.api.resource("autoscaling/v2", "HorizontalPodAutoscaler")
    rig.api.rest.patch(rt, "default", "shadowed-hpa", content_type="application/merge-patch+json",
                       body={"status": {"desiredReplicas": 3, "currentReplicas": 2}},
                       subresource="status")
    tasks = [asyncio.create_task(load.run()) for load in loads.values()]
    try:
        yield loads
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def replicas(rig: Rig, name: str) -> int:
    obj = rig.api.get("apps/v1", "Deployment", "default", name)
    assert obj is not None
    return int(obj["spec"]["replicas"])


def key(name: str) -> str:
    return f"default/Deployment/{name}"


# --- one state: /status against /metrics against the cluster ---------------------------------


def series(text: str, family: str, name: str) -> dict[str, float]:
    """The samples of ``family`` for target ``name``: extra labels -> value."""
    found = {}
    pattern = re.compile(rf'^{family}\{{namespace="default",kind="Deployment",'
                         rf'name="{re.escape(name)}"(?P<rest>[^}}]*)\}} (?P<value>\S+)$', re.M)
    for match in pattern.finditer(text):
        found[match["rest"].lstrip(",")] = float(match["value"])
    return found


def one(text: str, family: str, name: str) -> float | None:
    values = series(text, family, name)
    assert len(values) <= 1, (family, values)
    return next(iter(values.values()), None)


def disagreements(body: dict[str, Any], metrics: str, name: str) -> list[str]:
    """Where the target's ``/metrics`` series say something its ``/status`` body does not."""
    problems = []

    def same(family: str, value: float | None) -> None:
        shown = one(metrics, family, name)
        if shown != (None if value is None else float(value)):
            problems.append(f"{family}: /metrics {shown}, /status {value}")

    same("autoscaler_current_replicas", body.get("currentReplicas"))
    same("autoscaler_desired_replicas", body.get("desiredReplicas"))
    same("autoscaler_recommended_replicas", body.get("stabilized"))
    same("autoscaler_paused", int("paused" in body))
    same("autoscaler_fallback_active", int(bool(body.get("fallbackActive"))))
    agree = (body.get("shadow") or {}).get("agree")
    same("autoscaler_shadow_agreement", None if agree is None else int(agree))
    forecast = body.get("forecast")
    same("autoscaler_forecast_reactive_replicas",
         None if forecast is None else forecast["reactiveReplicas"])
    metrics_shown = {m["name"] for m in body.get("currentMetrics", ()) if "current" in m}
    valued = {rest.split('"')[1] for rest in series(metrics, "autoscaler_metric_value", name)}
    if valued != metrics_shown:
        problems.append(f"metric values: /metrics {sorted(valued)}, /status {sorted(metrics_shown)}")
    return problems
