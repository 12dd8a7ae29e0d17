"""``autoscaler plan`` against the simulated API server and a real Prometheus: it explains and
changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoscaler.plan import command
from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon_config, eventually
from tests.sim.prometheus import free_port


def write_config(rig: Rig, tmp_path: Path, **kwargs: object) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(daemon_config(
        prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
        listen_port=free_port(), state_file=tmp_path / "state", **kwargs))  # type: ignore[arg-type]
    return path


async def scraped(rig: Rig) -> None:
    await eventually(lambda: len(rig.prometheus.query("app_load")) == 2, timeout=20,
                     what="both pods' load scraped")


async def run_plan(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    import asyncio

    code = await asyncio.to_thread(command, argv)
    assert code == 0
    return capsys.readouterr().out


async def test_plan_table_shows_the_decision_and_writes_nothing(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """800 req/s over 2 pods at a 100 target: desired 4 (the max(2x, 4) limit), no write."""
    rig.load.demand = 800
    await scraped(rig)
    out = await run_plan(["--config", str(write_config(rig, tmp_path))], capsys)
    header, row = out.strip().splitlines()[:2]
    assert header.split()[:2] == ["TARGET", "METRICS"]
    assert row.startswith("default/Deployment/web")
    assert "app_load: 400/100" in row
    cells = row.split("  ")
    assert [c.strip() for c in cells if c.strip()][3:6] == ["10", "2", "4"]
    assert "PolicyLimited" in row
    assert "ScaleUpLimit" in row
    assert rig.api.count(verb="update", resource="deployments/scale") == 0
    assert rig.api.count(verb="create", resource="events") == 0


async def test_plan_explain_and_json(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """--explain shows the ratio and pod counts; --output json carries the same decision."""
    rig.load.demand = 300
    await scraped(rig)
    config = str(write_config(rig, tmp_path))
    explained = await run_plan(["--config", config, "--explain"], capsys)
    assert "ratio 1.5000" in explained
    assert "pods ready 2, unready 0, missing 0, ignored 0 -> proposes 3" in explained
    body = json.loads(await run_plan(["--config", config, "--output", "json"], capsys))
    (target,) = body["targets"]
    assert (target["currentReplicas"], target["desiredReplicas"]) == (2, 3)
    assert target["currentMetrics"][0]["current"] == {"averageValue": 150000}
    assert target["steps"] == ["MetricRecommendation"]


async def test_plan_reports_invalid_metrics(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """With Prometheus gone the plan says the metrics are invalid and that it would hold."""
    rig.prometheus.kill()
    out = await run_plan(["--config", str(write_config(rig, tmp_path)), "--explain"], capsys)
    assert "InvalidMetrics" in out
    assert "FailedGetPodsMetric" in out
