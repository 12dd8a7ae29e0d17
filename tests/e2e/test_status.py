"""``autoscaler status`` against a running daemon (a subprocess), the simulated API server and
a real Prometheus: the table and each target's page, as golden files."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.golden import BEHAVIOR, assert_golden, exported, fleet, fleet_targets
from tests.e2e.harness import DaemonProcess, daemon, daemon_config, eventually
from tests.sim.prometheus import free_port

ROOT = Path(__file__).parents[2]
PAGES = ("web", "down", "bad", "gone", "held", "floor")


async def status(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "autoscaler", "status", *args],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)


def settled(proc: DaemonProcess) -> bool:
    """The fleet's steady state: web stepped once and is held by its policy, the floor is
    reached and no longer held by the downscale window, every target reconciled."""
    targets = (proc.status() or {}).get("targets", {})
    if len(targets) != len(PAGES):
        return False
    web, floor = targets["default/Deployment/web"], targets["default/Deployment/floor"]
    limited = {c["type"]: c["reason"] for c in floor.get("conditions", [])}
    return (web.get("currentReplicas") == 3 and web.get("desiredReplicas") == 3
            and floor.get("currentReplicas") == 3
            and limited.get("ScalingLimited") == "TooFewReplicas"
            and all(t.get("lastReconcileTime") for t in targets.values()))


async def test_status_table_and_pages_golden(rig: Rig, tmp_path: Path) -> None:
    """Each situation's page says why the target is at N: a policy-limited step, a window
    holding a scale-down (and when it lets go), an invalid metric, an unreadable target, a
    pause, a scheduled floor; -o json is the daemon's own body."""
    port = free_port()
    text = daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port=port, state_file=tmp_path / "state",
                         behavior=BEHAVIOR) + fleet_targets()
    async with fleet(rig) as loads:
        await eventually(lambda: exported(rig, loads), timeout=30, what="the fleet's load")
        with daemon(text, tmp_path, port=port) as proc:
            await eventually(lambda: settled(proc), timeout=60, what="the fleet settled")
            await eventually(lambda: exported(rig, loads), timeout=30, what="the new pods' load")
            url = f"http://127.0.0.1:{port}"
            table = await status("--url", url)
            pages = {name: await status("--url", url, name) for name in PAGES}
            as_json = await status("--url", url, "default/Deployment/down", "-o", "json")
    assert table.returncode == 0, table.stderr
    assert_golden("status-table", table.stdout, collapse=True)
    for name, page in pages.items():
        assert page.returncode == 0, page.stderr
        assert_golden(f"status-{name}", page.stdout, collapse=True)
    body = json.loads(as_json.stdout)
    assert body["decision"]["stabilization"]["reason"] == "ScaleDownStabilized"
    assert body["decision"]["stabilization"]["releasesAt"].endswith("Z")


async def test_status_without_a_daemon_fails_in_one_line(tmp_path: Path) -> None:
    """Nothing listening: one line naming the URL and what to check, exit 1."""
    port = free_port()
    done = await status("--url", f"127.0.0.1:{port}")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"autoscaler status: cannot reach the daemon at http://127.0.0.1:{port}/status: "
        "Connection refused; is it running? Give its address with --url (or --config), "
        "e.g. through kubectl port-forward"]


async def test_run_listen_moves_every_endpoint(rig: Rig, tmp_path: Path) -> None:
    """`run --listen` overrides listenAddress for all the daemon's listeners, /status
    included (the same rule as the config's address): status reaches it there, and the
    config's own address is not bound."""
    configured, overridden = free_port(), free_port()
    text = daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port=configured, state_file=tmp_path / "state")
    with daemon(text, tmp_path, port=overridden,
                extra_args=("--listen", f"127.0.0.1:{overridden}")) as proc:
        await eventually(lambda: proc.status() is not None, timeout=30, what="/status served")
        found = await status("--url", f"127.0.0.1:{overridden}", "-o", "json")
        unbound = await status("--url", f"127.0.0.1:{configured}")
    assert found.returncode == 0, found.stderr
    assert "default/Deployment/web" in json.loads(found.stdout)["targets"]
    assert "Connection refused" in unbound.stderr


async def test_run_names_what_it_cannot_reach_at_start(rig: Rig, tmp_path: Path) -> None:
    """A Prometheus down at start is named once, clearly; the daemon starts and keeps trying."""
    rig.prometheus.kill()
    port = free_port()
    text = daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port=port, state_file=tmp_path / "state")
    with daemon(text, tmp_path, port=port) as proc:
        await eventually(lambda: proc.status() is not None, timeout=30, what="/status served")
        said = [e["event"] for e in proc.logs() if "cannot reach" in str(e.get("event"))]
        assert said == [f"cannot reach Prometheus server 'default' at {rig.prometheus.url}: "
                        "connection refused; check its url in the [prometheus] table; starting "
                        "anyway and retrying in the background"]
