"""The daemon end to end: a subprocess of the console script, a real Prometheus, the simulated
API server, and a workload whose per-pod load follows the number of Ready pods."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import socket
import time
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon, daemon_config, eventually

WEB = "default/Deployment/web"


def replicas(rig: Rig) -> int:
    return int(rig.api.get("apps/v1", "Deployment", "default", "web")["spec"]["replicas"])


def rescale_messages(rig: Rig) -> list[str]:
    """The SuccessfulRescale events' messages, oldest first (a repeated one moves to the end)."""
    events = [e for e in rig.api.store.list(("", "events"), "default")
              if e.get("reason") == "SuccessfulRescale"]
    events.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [e["message"] for e in events]


def rescale_sizes(rig: Rig) -> list[int]:
    """The sizes of the SuccessfulRescale events the daemon recorded, oldest first."""
    return [int(m.split(";")[0].removeprefix("New size: ")) for m in rescale_messages(rig)]


async def rescales_through(rig: Rig, size: int) -> list[int]:
    """``rescale_sizes`` once the event of the rescale to ``size`` is in: the daemon records it
    just after the change, so a test that has seen the change can be ahead of the event."""
    await eventually(lambda: rescale_sizes(rig)[-1:] == [size], timeout=10,
                     what=f"the SuccessfulRescale event for {size}")
    return rescale_sizes(rig)


def config(rig: Rig, tmp_path: Path, **kwargs: object) -> str:
    return daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port="__PORT__", state_file=tmp_path / "state",  # type: ignore[arg-type]
                         **kwargs)  # type: ignore[arg-type]


async def test_scales_up_under_load_within_the_default_rate_limit(rig: Rig, tmp_path: Path) -> None:
    """800 req/s at 100 per pod: 2 -> 4 (max(2x, 4) limit) -> 8, then it holds at 8."""
    rig.load.demand = 800
    with daemon(config(rig, tmp_path), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 8, timeout=40, what="8 replicas")
        assert await rescales_through(rig, 8) == [4, 8]
        await eventually(lambda: proc.target().get("desiredReplicas") == 8, timeout=10,
                         what="status desired 8")
        status = proc.target()
        assert status["currentMetrics"][0]["proposal"] == 8
        exposition = proc.metrics()
        web = 'namespace="default",kind="Deployment",name="web"'
        assert f"autoscaler_desired_replicas{{{web}}} 8\n" in exposition
        assert f'autoscaler_scale_events_total{{{web},direction="up"}} 2\n' in exposition
        assert (f'autoscaler_metric_target{{{web},metric="app_load",metric_type="Pods"}} 100.0\n'
                in exposition)
        assert "autoscaler_reconcile_duration_seconds_count" in exposition
        assert proc.stop() == 0


async def test_scales_down_after_the_window_and_not_before(rig: Rig, tmp_path: Path) -> None:
    """After load drops, replicas hold for the 6 s downscale window, then follow the load."""
    rig.load.demand = 600
    with daemon(config(rig, tmp_path, downscale="6s"), tmp_path):
        await eventually(lambda: replicas(rig) == 6, timeout=40, what="6 replicas")
        await eventually(lambda: len(rig.load.ready_pods()) == 6, timeout=10, what="6 ready")
        rig.load.demand = 200
        dropped = time.monotonic()
        await eventually(lambda: replicas(rig) < 6, timeout=30, what="a scale-down")
        # The window counts from the last recommendation of 6, which the pass before the drop
        # made up to one sync period (1 s) earlier; scrape lag can only delay it further.
        # Without the window the scale-down would follow within a pass or two.
        assert time.monotonic() - dropped >= 6 - 1
        await eventually(lambda: replicas(rig) == 2, timeout=20, what="2 replicas")


async def test_noisy_load_does_not_flap(rig: Rig, tmp_path: Path) -> None:
    """Load jittering +-8% around the target stays within tolerance: no scale writes at all."""
    rng = random.Random(7)
    rig.load.demand = 200  # 2 pods at 100 each: exactly on target
    rig.load.noise = lambda: rng.uniform(-0.08, 0.08)
    with daemon(config(rig, tmp_path, downscale="2s"), tmp_path) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=30,
                         what="a pass with valid metrics")
        await asyncio.sleep(8)
        assert replicas(rig) == 2
        assert rig.api.count(verb="update", resource="deployments/scale") == 0
        assert "WithinTolerance" in proc.target()["steps"]


POLICY_ONE_POD_PER_12S = """
[autoscaler.behavior.scaleDown]
stabilizationWindowSeconds = 0
policies = [{ type = "Pods", value = 1, periodSeconds = 12 }]
"""


async def test_history_survives_a_restart(rig: Rig, tmp_path: Path) -> None:
    """A scale-down policy of 1 pod per 12 s still binds across a restart.

    Upstream forgets its scale events when it restarts and would remove the next pod at once;
    the daemon restores them from its state file.
    """
    rig.load.demand = 600
    text = config(rig, tmp_path, behavior=POLICY_ONE_POD_PER_12S)
    with daemon(text, tmp_path, name="first") as proc:
        await eventually(lambda: replicas(rig) == 6, timeout=40, what="6 replicas")
        # Scale-up events inside the period lower its starting count (upstream counts both
        # directions): let them age out so the policy allows exactly one pod down.
        await asyncio.sleep(13)
        rig.load.demand = 100
        await eventually(lambda: replicas(rig) == 5, timeout=20, what="the first scale-down")
        first_down = time.monotonic()
        assert proc.stop() == 0
    with daemon(text, tmp_path, name="second") as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=20,
                         what="a pass after the restart")
        while time.monotonic() - first_down < 10:
            assert replicas(rig) == 5, "scaled down again inside the policy's 12 s period"
            await asyncio.sleep(0.5)
        await eventually(lambda: replicas(rig) == 4, timeout=15, what="the next scale-down")
        assert (await rescales_through(rig, 4))[-2:] == [5, 4]


async def test_prometheus_outage_holds_and_never_scales_down(rig: Rig, tmp_path: Path) -> None:
    """With Prometheus gone every metric is invalid: the daemon holds, reports, stays up."""
    rig.load.demand = 400
    with daemon(config(rig, tmp_path, downscale="1s"), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 4, timeout=40, what="4 replicas")
        rig.prometheus.kill()
        await eventually(lambda: proc.target().get("lastOutcome") == "invalid_metrics",
                         timeout=20, what="invalid metrics reported")
        await asyncio.sleep(4)
        assert replicas(rig) == 4
        assert proc.status() is not None  # still serving
        reasons = {c["reason"] for c in proc.target()["conditions"]}
        assert "FailedGetPodsMetric" in reasons
        assert proc.stop() == 0


async def test_dry_run_decides_but_never_writes(rig: Rig, tmp_path: Path) -> None:
    """--dry-run: the decision is exported and evented as WouldScale, and /status's
    AbleToScale says what would be written (not upstream's text for a target at rest); /scale
    is never written."""
    rig.load.demand = 800
    with daemon(config(rig, tmp_path), tmp_path, extra_args=("--dry-run",)) as proc:
        await eventually(lambda: proc.target().get("desiredReplicas") == 4, timeout=40,
                         what="a would-be decision")
        await asyncio.sleep(2)
        able = next(c for c in proc.target()["conditions"] if c["type"] == "AbleToScale")
        assert (able["reason"], able["message"].split(":")[0]) == (
            "WouldScale", "would rescale 2 -> 4")
        assert replicas(rig) == 2
        assert rig.api.count(verb="update", resource="deployments/scale") == 0
        events = rig.api.store.list(("", "events"), "default")
        assert any(e.get("reason") == "WouldScale" for e in events)


async def test_another_autoscaler_owns_the_target(rig: Rig, tmp_path: Path) -> None:
    """An HPA on the same Deployment: the daemon refuses to act and says why."""
    rig.api.create_hpa("default", "web-hpa", target_name="web")
    rig.load.demand = 800
    with daemon(config(rig, tmp_path), tmp_path) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "blocked", timeout=30,
                         what="the target blocked")
        await asyncio.sleep(2)
        assert replicas(rig) == 2
        assert "HorizontalPodAutoscaler web-hpa" in " ".join(proc.target()["blockedBy"])
        events = rig.api.store.list(("", "events"), "default")
        assert any(e.get("reason") == "AutoscalerConflict" for e in events)


async def test_reload_applies_a_valid_config_and_keeps_the_old_one_on_errors(
    rig: Rig, tmp_path: Path,
) -> None:
    """SIGHUP: a broken file is rejected (the daemon keeps scaling), a valid one takes effect."""
    rig.load.demand = 800
    with daemon(config(rig, tmp_path, max_replicas=4), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 4, timeout=40, what="4 replicas (max)")
        good = proc.config.read_text()
        proc.config.write_text(good.replace("maxReplicas = 4", "maxReplicas = 0"))
        assert proc.process is not None
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: any(e.get("event", "").startswith("config reload rejected")
                                     for e in proc.logs()), timeout=10, what="the rejection")
        assert proc.process.poll() is None
        proc.config.write_text(good.replace("maxReplicas = 4", "maxReplicas = 8"))
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: replicas(rig) == 8, timeout=30, what="8 replicas after reload")
        assert proc.stop() == 0


HA = """
[daemon.leaderElection]
enabled = true
leaseName = "autoscaler"
leaseNamespace = "default"
leaseDuration = "4s"
renewDeadline = "3s"
retryPeriod = "1s"
"""


async def test_two_instances_only_the_leader_acts_and_the_other_takes_over(
    rig: Rig, tmp_path: Path,
) -> None:
    """Two replicas share a Lease: one writes; kill it and the standby takes over."""
    for user in ("alpha", "beta"):
        rig.api.add_token(f"{user}-token", user=user)
        rig.api.write_kubeconfig(tmp_path / f"{user}.kubeconfig", token=f"{user}-token")
    rig.load.demand = 400

    def instance_config(user: str) -> str:
        text = config(rig, tmp_path, extra_daemon=HA)
        text = text.replace(str(rig.api.kubeconfig), str(tmp_path / f"{user}.kubeconfig"))
        return text.replace(f'stateFile = "{tmp_path / "state"}"\n', "")

    def writers() -> set[str | None]:
        return {r.user for r in rig.api.requests(verb="update", resource="deployments/scale")}

    with daemon(instance_config("alpha"), tmp_path, name="alpha") as alpha, \
            daemon(instance_config("beta"), tmp_path, name="beta") as beta:
        await eventually(lambda: replicas(rig) == 4, timeout=40, what="4 replicas")
        assert len(writers()) == 1
        (leader_name,) = writers()
        leader, standby = (alpha, beta) if leader_name == "alpha" else (beta, alpha)
        assert standby.status() is not None
        assert (standby.status() or {})["leader"] is False
        leader.stop(signal.SIGKILL)
        rig.load.demand = 800
        await eventually(lambda: replicas(rig) == 8, timeout=40, what="8 replicas via standby")
        assert writers() == {"alpha", "beta"}
        assert (standby.status() or {})["leader"] is True


ALWAYS_FLOOR_6 = """
schedules = [{ name = "all-day", start = "00:00", end = "00:00", minReplicas = 6 }]
"""


async def test_a_scheduled_floor_is_reached_gradually_despite_low_load(
    rig: Rig, tmp_path: Path,
) -> None:
    """Load wants 1 replica; an active schedule's floor of 6 wins, reached 2 -> 4 -> 6."""
    rig.load.demand = 50
    with daemon(config(rig, tmp_path, behavior=ALWAYS_FLOOR_6), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 6, timeout=40, what="the floor of 6")
        assert await rescales_through(rig, 6) == [4, 6]
        schedules = proc.target()["schedules"]
        assert schedules["active"] == ["all-day"]
        assert schedules["minReplicas"] == 6
        assert schedules["next"]["all-day"]


async def test_systemd_notification(rig: Rig, tmp_path: Path) -> None:
    """Under systemd: READY=1 once serving, WATCHDOG=1 pings, STOPPING=1 on SIGTERM."""
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.setblocking(False)
        received: list[bytes] = []

        def drain() -> None:
            with contextlib.suppress(BlockingIOError):
                while True:
                    received.append(sock.recv(4096))

        env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"}
        with daemon(config(rig, tmp_path), tmp_path, env=env) as proc:
            await eventually(lambda: (drain(), any(m.startswith(b"READY=1") for m in received))[1],
                             timeout=30, what="READY=1")
            await eventually(lambda: (drain(), received.count(b"WATCHDOG=1") >= 2)[1],
                             timeout=10, what="watchdog pings")
            assert proc.stop() == 0
        drain()
        assert b"STOPPING=1" in received


FALLBACK_TO_5 = """
fallback = { failureThreshold = 3, replicas = 5 }
"""


async def test_opt_in_fallback_after_consecutive_invalid_passes(rig: Rig, tmp_path: Path) -> None:
    """With Prometheus gone for 3 passes in a row, an opted-in target goes to its fallback."""
    rig.load.demand = 200
    with daemon(config(rig, tmp_path, behavior=FALLBACK_TO_5), tmp_path) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=30,
                         what="a pass with valid metrics")
        assert replicas(rig) == 2
        rig.prometheus.kill()
        await eventually(lambda: replicas(rig) == 5, timeout=30, what="the fallback of 5")
        # Passes before the first scrape of the load can fall back too (and back to 2 after):
        # what counts is that the latest rescale is the fallback.
        await rescales_through(rig, 5)
        assert "fallback after 3 passes" in rescale_messages(rig)[-1]
        # /status is written when the pass ends, a moment after the rescale itself.
        await eventually(lambda: proc.target().get("fallbackActive") is True, timeout=10,
                         what="fallbackActive in /status")


async def test_pause_by_annotation_holds_then_releases(rig: Rig, tmp_path: Path) -> None:
    """autoscaler.dev/paused-replicas holds the workload whatever the load; removing it
    hands the workload back to the metrics."""
    rig.api.patch("apps/v1", "Deployment", "default", "web", {"metadata": {"annotations": {
        "autoscaler.dev/paused-replicas": "3"}}})
    rig.load.demand = 800
    with daemon(config(rig, tmp_path), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 3, timeout=30, what="held at 3")
        await asyncio.sleep(3)
        assert replicas(rig) == 3
        assert "paused-replicas" in proc.target()["paused"]
        rig.api.patch("apps/v1", "Deployment", "default", "web", {"metadata": {"annotations": {
            "autoscaler.dev/paused-replicas": None}}})
        await eventually(lambda: replicas(rig) >= 8, timeout=40, what="scaling resumed")
        await eventually(lambda: "paused" not in proc.target(), timeout=10,
                         what="the pause gone from /status")


async def test_steady_state_reads_come_from_watches(rig: Rig, tmp_path: Path) -> None:
    """Once synced, passes make no pod or workload LIST and no GET of /scale: watches only,
    of the targets' kinds only."""
    rig.load.demand = 200
    with daemon(config(rig, tmp_path), tmp_path) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=30,
                         what="a first good pass")
        before = {v: rig.api.count(verb=v) for v in ("list", "get")}
        scale_gets = rig.api.count(verb="get", resource="deployments/scale")
        await asyncio.sleep(5)  # about five passes at the 1 s sync period
        assert rig.api.count(verb="list") == before["list"]
        # At most the very first pass, before the workload watch synced, asked the server.
        assert rig.api.count(verb="get", resource="deployments/scale") == scale_gets <= 1
        assert rig.api.count(verb="get") - before["get"] <= 2  # discovery refreshes at most
        # Only the targets' kind is watched: not the Deployment's ReplicaSets.
        assert rig.api.count(verb="list", resource="replicasets") == 0
        assert rig.api.count(verb="list", resource="statefulsets") == 0
