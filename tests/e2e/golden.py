"""Golden files for what ``status`` and ``plan`` print, and the scenario they are taken on.

``assert_golden`` compares a command's output with ``tests/e2e/golden/NAME.txt`` once the
parts that differ from run to run are replaced: times (``<time>``), distances from now
(``<when>``), the random part of pod names (``web-<pod>``). ``UPDATE_GOLDEN=1`` rewrites the
files instead; review the diff before committing it.

``FLEET`` is one config with a target in each situation the pages must explain: a scale-up
cut by a policy, a scale-down held by its window, an invalid metric, a target that cannot be
read, a paused target and a scheduled floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import LoadModel

GOLDEN = Path(__file__).parent / "golden"

_REPLACEMENTS = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "<time>"),
    (re.compile(r"\((?:in [0-9hms]+|[0-9hms]+ ago|now)\)"), "(<when>)"),
    (re.compile(r"(?<= )(?:in [0-9][0-9hms]*|[0-9][0-9hms]* ago|now)(?= |$)"), "<when>"),
    (re.compile(r"\b([a-z]+)-[a-z0-9]{10}-[a-z0-9]{5}\b"), r"\1-<pod>"),
)


def normalize(text: str, *, collapse: bool = False) -> str:
    """``text`` without what changes between runs; ``collapse``: runs of spaces made two
    (a table whose column widths follow a changing cell)."""
    for pattern, replacement in _REPLACEMENTS:
        text = pattern.sub(replacement, text)
    if collapse:
        text = "\n".join(re.sub(r" {2,}", "  ", line) for line in text.splitlines())
    return text.rstrip() + "\n"


def assert_golden(name: str, text: str, *, collapse: bool = False) -> None:
    path = GOLDEN / f"{name}.txt"
    got = normalize(text, collapse=collapse)
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    assert got == path.read_text(), f"{name}: output differs from {path}\n{got}"


WORKLOADS = {  # name -> (replicas, total demand), each with app=<name> pods
    "down": (4, 100.0),
    "bad": (2, 100.0),
    "held": (2, 100.0),
    "floor": (1, 10.0),
}


def fleet_targets() -> str:
    """Targets beside the rig's ``web`` (which ``daemon_config`` writes, given ``BEHAVIOR``)."""
    def target(name: str, extra: str, query: str = "app_load{${pod_selector}}") -> str:
        return f"""
[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "{name}" }}
minReplicas = 1
maxReplicas = 10
{extra}
[[autoscaler.metrics]]
type = "Pods"
pods = {{ metric = {{ name = "app_load" }}, target = {{ type = "AverageValue", averageValue = "100" }}, query = '{query}', window = "1s" }}
"""
    return "".join([
        target("down", "behavior.scaleDown = { stabilizationWindowSeconds = 600 }"),
        target("bad", "", query="no_such_metric{${pod_selector}}"),
        # A slower period for the two whose conditions no later pass replaces: a first read
        # that misses its observation budget on a busy machine would stay on their page.
        target("gone", 'syncPeriod = "3s"'),
        target("held", 'paused = true\nsyncPeriod = "3s"'),
        target("floor", 'schedules = [{ name = "always", start = "2000-01-01T00:00", '
                        'end = "2100-01-01T00:00", minReplicas = 3 }]'),
    ])


BEHAVIOR = """[autoscaler.behavior.scaleUp]
policies = [{ type = "Pods", value = 1, periodSeconds = 600 }]"""
"""``web``: a scale-up of one pod per 10 minutes, so its second step is held long enough."""


@contextlib.asynccontextmanager
async def fleet(rig: Rig) -> AsyncIterator[dict[str, LoadModel]]:
    """The rig plus the fleet's other deployments, each with its load exported."""
    loads = {"web": rig.load}
    rig.load.demand = 800
    for name, (replicas, demand) in WORKLOADS.items():
        rig.api.create_deployment("default", name, replicas=replicas, labels={"app": name},
                                  requests={"cpu": "500m"})
        loads[name] = LoadModel(api=rig.api, exporter=rig.load.exporter,
                                selector=f"app={name}", demand=demand)
    tasks = [asyncio.create_task(load.run()) for name, load in loads.items() if name != "web"]
    try:
        yield loads
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def exported(rig: Rig, loads: dict[str, LoadModel]) -> bool:
    """Every Ready pod of the fleet has its load in Prometheus."""
    ready = sum(len(load.ready_pods()) for load in loads.values())
    return ready > 0 and len(rig.prometheus.query("app_load")) == ready
