"""Dynamic sharding end to end: three real daemons in one ring (``[daemon.sharding] mode =
"dynamic"``), each with its own token, against the simulated API server and a real
Prometheus, six targets in six namespaces. The oracle reads the simulated server's log:
every scale write names its writer, and the bucket Leases' history says who held what when.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, LoadModel, eventually
from tests.sim.prometheus import free_port

NAMESPACES = [f"r{i}" for i in range(6)]
RING = """
[daemon.leaderElection]
leaseName = "autoscaler"
leaseNamespace = "default"

[daemon.sharding]
mode = "dynamic"
"""
UP_TWO_PODS_PER_20S = """
[autoscaler.behavior.scaleUp]
stabilizationWindowSeconds = 0
policies = [{ type = "Pods", value = 2, periodSeconds = 20 }]
"""


def ring_config(rig: Rig, kubeconfig: Path) -> str:
    targets = "".join(f"""
[[autoscaler]]
namespace = "{ns}"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
minReplicas = 1
maxReplicas = 10
{UP_TWO_PODS_PER_20S}
[[autoscaler.metrics]]
type = "Pods"
pods = {{ metric = {{ name = "app_load" }}, target = {{ type = "AverageValue", averageValue = "100" }}, query = 'app_load{{${{pod_selector}}}}', window = "1s" }}
""" for ns in NAMESPACES)
    return f"""
[daemon]
syncPeriod = "1s"
downscaleStabilization = "0s"
listenAddress = "127.0.0.1:__PORT__"
logFormat = "json"
{RING}
[prometheus]
url = "{rig.prometheus.url}"
timeout = "2s"

[kubernetes]
kubeconfig = "{kubeconfig}"
requestTimeout = "3s"
{targets}"""


@dataclass
class Member:
    name: str
    user: str
    process: DaemonProcess

    def status(self) -> dict[str, Any]:
        return self.process.status() or {}

    def owned(self) -> set[str]:
        return set(self.status().get("targets") or {})


def key(namespace: str) -> str:
    return f"{namespace}/Deployment/web"


def replicas(rig: Rig, namespace: str) -> int:
    return int(rig.api.get("apps/v1", "Deployment", namespace, "web")["spec"]["replicas"])


@pytest.fixture
async def loads(rig: Rig) -> AsyncIterator[dict[str, LoadModel]]:
    models = {}
    for namespace in NAMESPACES:
        rig.api.create_deployment(namespace, "web", replicas=2, labels={"app": "web"},
                                  requests={"cpu": "500m"})
        models[namespace] = LoadModel(api=rig.api, exporter=rig.load.exporter,
                                      namespace=namespace)
    tasks = [asyncio.create_task(m.run()) for m in models.values()]
    try:
        yield models
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def start_member(rig: Rig, tmp_path: Path, name: str) -> Member:
    user = f"system:serviceaccount:ring:{name}"
    rig.api.add_token(f"{name}-token", user)
    kubeconfig = rig.api.write_kubeconfig(tmp_path / f"{name}.kubeconfig", token=f"{name}-token")
    config = tmp_path / f"{name}.toml"
    port = free_port()
    config.write_text(ring_config(rig, kubeconfig).replace("__PORT__", str(port)))
    process = DaemonProcess(config, port=port, log=tmp_path / f"{name}.log")
    process.start()
    return Member(name=name, user=user, process=process)


@contextlib.asynccontextmanager
async def members(rig: Rig, tmp_path: Path,
                  names: list[str]) -> AsyncIterator[dict[str, Member]]:
    """Members started at once; stopped by SIGTERM together at the end, without blocking
    the loop the simulated API server answers on (their hand-overs need it)."""
    running = {name: start_member(rig, tmp_path, name) for name in names}
    try:
        yield running
    finally:
        await asyncio.gather(*(m.process.stop_async() for m in running.values()))


def owners(running: dict[str, Member]) -> dict[str, list[str]]:
    """Target key -> the members whose /status shows it (ideally exactly one each)."""
    found: dict[str, list[str]] = {key(ns): [] for ns in NAMESPACES}
    for member in running.values():
        if member.process.process is not None and member.process.process.poll() is None:
            for target in member.owned():
                found.setdefault(target, []).append(member.name)
    return found


def every_target_has_one_owner(running: dict[str, Member]) -> bool:
    return all(len(names) == 1 for names in owners(running).values())


def scale_writes(rig: Rig, user: str, since: float = 0.0) -> list[Any]:
    """Successful PUTs of /scale (or the Deployment) by ``user`` applied after ``since``
    (the sim's clock)."""
    return [r for r in rig.api.log.records
            if r.user == user and r.verb in ("update", "patch") and r.status < 300
            and (r.resource or "").startswith("deployments")
            and (r.applied or 0.0) >= since]


async def test_three_members_share_the_targets_and_scale_them(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path,
) -> None:
    """Every target gets exactly one owner, each member holds some, and every target
    scales 2 -> 4 under load (the step its policy allows), written by its owner only."""
    async with members(rig, tmp_path, ["a", "b", "c"]) as running:
        def balanced() -> bool:
            counts = [len(m.owned()) for m in running.values()]
            return every_target_has_one_owner(running) and max(counts) <= 3
        # One member may take every bucket before the others are ready; then it hands over
        # down to the bound (ceil(1.15 * 6 / 3) = 3 targets).
        await eventually(balanced, timeout=40, what="each target owned by exactly one member, "
                         "none holding more than 3")
        held = {name: m.owned() for name, m in running.items()}
        for model in loads.values():
            model.demand = 400
        await eventually(lambda: all(replicas(rig, ns) == 4 for ns in NAMESPACES),
                         timeout=30, what="every target 2 -> 4")
        for name, member in running.items():
            namespaces = {r.namespace for r in scale_writes(rig, member.user)}
            assert namespaces <= {k.split("/")[0] for k in held[name]}, (name, namespaces)
