"""``autoscaler plan`` against the simulated API server and a real Prometheus: it explains,
changes nothing, and fails in one line when a backend cannot be reached."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.golden import BEHAVIOR, assert_golden, exported, fleet, fleet_targets
from tests.e2e.harness import daemon_config, eventually
from tests.sim.prometheus import free_port

ROOT = Path(__file__).parents[2]


def write_config(rig: Rig, tmp_path: Path, *, extra: str = "", **kwargs: object) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(daemon_config(
        prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
        listen_port=free_port(), state_file=tmp_path / "state", **kwargs) + extra)  # type: ignore[arg-type]
    return path


async def scraped(rig: Rig) -> None:
    await eventually(lambda: len(rig.prometheus.query("app_load")) == 2, timeout=20,
                     what="both pods' load scraped")


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    seconds: float


async def plan(*args: str) -> Run:
    """``python -m autoscaler plan ARGS`` as a user runs it (the API server answers meanwhile)."""
    started = time.monotonic()
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "autoscaler", "plan", *args],
        capture_output=True, text=True, timeout=90, cwd=ROOT, check=False)
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


async def test_plan_table_shows_the_decision_and_writes_nothing(rig: Rig, tmp_path: Path) -> None:
    """800 req/s over 2 pods at a 100 target: desired 4 (the max(2x, 4) limit), no write."""
    rig.load.demand = 800
    await scraped(rig)
    run = await plan("--config", str(write_config(rig, tmp_path)))
    assert run.code == 0, run.err
    header, row = run.out.strip().splitlines()
    assert header.split()[:4] == ["NAMESPACE", "NAME", "REFERENCE", "TARGETS"]
    assert row.split() == ["default", "web", "Deployment/web", "app_load:", "400/100", "1",
                           "10", "2", "4", "<none>", "WouldScale,", "ScaleUpLimit"]
    assert run.err == ""  # the pass's warnings stay off unless -v
    assert rig.api.count(verb="update", resource="deployments/scale") == 0
    assert rig.api.count(verb="create", resource="events") == 0


async def test_plan_json_carries_quantities_as_hpa_status_does(rig: Rig, tmp_path: Path) -> None:
    """-o json: the /status body of each target, quantities as Kubernetes quantity strings."""
    rig.load.demand = 300
    await scraped(rig)
    run = await plan("--config", str(write_config(rig, tmp_path)), "-o", "json")
    assert run.code == 0, run.err
    (target,) = json.loads(run.out)["targets"]
    assert (target["currentReplicas"], target["desiredReplicas"]) == (2, 3)
    metric = target["currentMetrics"][0]
    assert metric["current"] == {"averageValue": "150"}
    assert metric["target"] == {"type": "AverageValue", "averageValue": "100"}
    assert metric["query"].startswith('app_load{namespace="default",pod=~"web-')
    assert sorted(metric["pods"]["values"].values()) == ["150", "150"]
    assert target["steps"] == ["MetricRecommendation"]
    able = next(c for c in target["conditions"] if c["type"] == "AbleToScale")
    assert (able["reason"], able["message"]) == (
        "WouldScale", "would rescale 2 -> 3: pods metric app_load above target")


async def test_plan_explain_golden(rig: Rig, tmp_path: Path) -> None:
    """--explain pages for each situation; exit 1 as two targets cannot be evaluated."""
    async with fleet(rig) as loads:
        await eventually(lambda: exported(rig, loads), timeout=30, what="the fleet's load")
        config = write_config(rig, tmp_path, behavior=BEHAVIOR, extra=fleet_targets())
        run = await plan("--config", str(config), "--explain")
        table = await plan("--config", str(config))
    assert run.code == 1
    assert run.err.splitlines() == [
        "autoscaler plan: 2 targets could not be evaluated: default/Deployment/bad, "
        "default/Deployment/gone"]
    assert_golden("plan-explain", run.out, collapse=True)
    assert_golden("plan-table", table.out, collapse=True)
    assert rig.api.count(verb="update", resource="deployments/scale") == 0


async def test_plan_fails_fast_when_prometheus_is_down(rig: Rig, tmp_path: Path) -> None:
    """A Prometheus that refuses connections: one line naming it, exit 1, in seconds."""
    rig.prometheus.kill()
    run = await plan("--config", str(write_config(rig, tmp_path)))
    assert run.code == 1
    assert run.err.splitlines() == [
        f"autoscaler plan: cannot reach Prometheus server 'default' at {rig.prometheus.url}: "
        "connection refused; check its url in the [prometheus] table"]
    assert run.seconds < 10
