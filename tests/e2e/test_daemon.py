"""The daemon end to end: a subprocess of the console script, a real Prometheus, the simulated
API server, and a workload whose per-pod load follows the number of Ready pods."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon, daemon_config, eventually

WEB = "default/Deployment/web"


def replicas(rig: Rig) -> int:
    return int(rig.api.get("apps/v1", "Deployment", "default", "web")["spec"]["replicas"])


def rescale_sizes(rig: Rig) -> list[int]:
    """The sizes of the SuccessfulRescale events the daemon recorded, oldest first."""
    events = [e for e in rig.api.store.list(("", "events"), "default")
              if e.get("reason") == "SuccessfulRescale"]
    events.sort(key=lambda e: e["metadata"]["creationTimestamp"] + e["metadata"]["name"])
    return [int(e["message"].split(";")[0].removeprefix("New size: ")) for e in events]


def config(rig: Rig, tmp_path: Path, **kwargs: object) -> str:
    return daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port="__PORT__", state_file=tmp_path / "state",  # type: ignore[arg-type]
                         **kwargs)  # type: ignore[arg-type]


async def test_scales_up_under_load_within_the_default_rate_limit(rig: Rig, tmp_path: Path) -> None:
    """800 req/s at 100 per pod: 2 -> 4 (max(2x, 4) limit) -> 8, then it holds at 8."""
    rig.load.demand = 800
    with daemon(config(rig, tmp_path), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 8, timeout=40, what="8 replicas")
        assert rescale_sizes(rig) == [4, 8]
        await eventually(lambda: proc.target().get("desiredReplicas") == 8, timeout=10,
                         what="status desired 8")
        status = proc.target()
        assert status["currentMetrics"][0]["proposal"] == 8
        assert proc.stop() == 0
