"""A reload whose config is valid but whose apply fails part way (a namespace watch that
cannot start, say, after the targets were set): said as such, not as "rejected: keeping
the running config", since the new config is in force as far as it got (review)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.config import Config, load_config
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.reload import ConfigReloader

pytestmark = pytest.mark.asyncio

BODY = """
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
maxReplicas = MAX
metrics = [{ type = "External", external = { metric = { name = "depth" }, target = { type = "AverageValue", averageValue = "10" }, query = "sum(depth)" } }]
"""


async def test_a_reload_whose_apply_fails_says_it_is_in_force_in_part(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "autoscaler.toml"
    path.write_text(BODY.replace("MAX", "10"))
    applied: list[int] = []

    async def apply(config: Config) -> int:
        applied.append(config.targets[0].spec.max_replicas)  # the targets are set...
        raise RuntimeError("the namespace watch could not start")  # ...then a step fails

    telemetry = DaemonMetrics()
    reloader = ConfigReloader(load_config(path), path=path, prepare=lambda c: c, apply=apply,
                              telemetry=telemetry)
    path.write_text(BODY.replace("MAX", "3"))
    assert await reloader.reload() is False
    assert applied == [3]
    assert reloader.config.targets[0].spec.max_replicas == 3  # what is in force
    out = capsys.readouterr().out
    assert "applied in part" in out
    assert "keeping the running config" not in out
    registry = telemetry.registry
    assert registry.get_sample_value("autoscaler_config_reloads_total",
                                     {"result": "failed"}) == 1
    assert registry.get_sample_value("autoscaler_config_last_reload_successful") == 0
