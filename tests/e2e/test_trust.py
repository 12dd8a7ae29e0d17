"""Trust under ordinary faults, end to end: the daemon as a user runs it, killed, failed over,
reloaded, with a real Prometheus and the simulated API server. Each test takes the daemon
to a point where one fault used to let it take a step its ``behavior`` forbids, and asserts
that step does not come."""

from __future__ import annotations

import asyncio
import base64
import gzip
import http.server
import json
import signal
import threading
import time
from pathlib import Path

from autoscaler.app import STOP_BOUND
from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, daemon, daemon_config, eventually
from tests.e2e.test_daemon import replicas
from tests.sim.prometheus import free_port

UP_TWO_PODS_PER_15S = """
[autoscaler.behavior.scaleUp]
stabilizationWindowSeconds = 0
selectPolicy = "Max"
policies = [{ type = "Pods", value = 2, periodSeconds = 15 }]
"""

DOWN_ONE_POD_PER_20S = """
[autoscaler.behavior.scaleDown]
stabilizationWindowSeconds = 0
policies = [{ type = "Pods", value = 1, periodSeconds = 20 }]

[autoscaler.behavior.scaleUp]
stabilizationWindowSeconds = 0
policies = [{ type = "Pods", value = 10, periodSeconds = 1 }]
"""

LEADER_ELECTION = """
[daemon.leaderElection]
enabled = true
leaseName = "autoscaler"
leaseNamespace = "default"
leaseDuration = "4s"
renewDeadline = "3s"
retryPeriod = "1s"
"""


def config(rig: Rig, tmp_path: Path, **kwargs: object) -> str:
    return daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port="__PORT__", state_file=tmp_path / "state",  # type: ignore[arg-type]
                         **kwargs)  # type: ignore[arg-type]


def without_state_file(text: str, tmp_path: Path) -> str:
    """The config with its state kept on a ConfigMap (leader election on) instead of a file."""
    return text.replace(f'stateFile = "{tmp_path / "state"}"\n', "")


def targeting(text: str, name: str) -> str:
    """The config with its target pointed at Deployment ``name`` instead of ``web`` (a
    reload that drops web, or one that brings it back)."""
    head, _, tail = text.partition("[[autoscaler]]")
    return head + "[[autoscaler]]" + tail.replace('name = "web"', f'name = "{name}"')


def kill_at_the_next_write(rig: Rig, proc: DaemonProcess) -> list[float]:
    """SIGKILL ``proc`` the moment its next PUT /scale has succeeded; the list gets the
    monotonic time of the kill."""
    written: list[float] = []

    def kill() -> None:
        written.append(time.monotonic())
        assert proc.process is not None
        proc.process.kill()

    rig.api.after_next(verb="update", resource="deployments/scale", action=kill)
    return written


async def hold(check: callable, *, until: float, what: str) -> None:  # type: ignore[valid-type]
    """``check()`` stays true until the monotonic instant ``until``."""
    while time.monotonic() < until:
        assert check(), what  # type: ignore[operator]
        await asyncio.sleep(0.2)


async def test_a_kill_right_after_a_write_does_not_free_the_next_step(
    rig: Rig, tmp_path: Path,
) -> None:
    """Scale-up policy 2 pods per 15 s: 2 -> 4, SIGKILL the moment the PUT succeeded, restart:
    the restarted daemon knows of that step and waits out the period before 4 -> 6."""
    rig.load.demand = 1000  # wants 10
    text = config(rig, tmp_path, behavior=UP_TWO_PODS_PER_15S, downscale="0s")
    with daemon(text, tmp_path, name="first") as first:
        written = kill_at_the_next_write(rig, first)
        await eventually(lambda: bool(written), timeout=40, what="the first scale write")
        assert first.process is not None
        first.process.wait(10)
    assert replicas(rig) == 4
    with daemon(text, tmp_path, name="second") as second:
        await eventually(lambda: second.target().get("lastOutcome") in {"ok"}, timeout=20,
                         what="a pass after the restart")
        await hold(lambda: replicas(rig) == 4, until=written[0] + 14,
                   what="a second step inside the policy's 15 s period")
        await eventually(lambda: replicas(rig) == 6, timeout=20, what="the next step, 4 -> 6")


async def six_ready_pods(rig: Rig) -> None:
    """The workload at 6 Ready pods before any daemon runs (no scale-up events to age out:
    upstream counts them in a scale-down policy's period too), with load for 1."""
    rig.api.set_replicas("Deployment", "default", "web", 6)
    await eventually(lambda: len(rig.load.ready_pods()) == 6, timeout=20, what="6 ready pods")
    rig.load.demand = 100


async def scaled_down_once(rig: Rig) -> float:
    """The daemon's first step down (6 -> 5); returns when it was seen."""
    await eventually(lambda: replicas(rig) == 5, timeout=30, what="the first scale-down")
    return time.monotonic()


async def test_a_failed_state_read_at_failover_neither_wipes_history_nor_frees_a_step(
    rig: Rig, tmp_path: Path,
) -> None:
    """Leader election on, history on a ConfigMap. The next leader's read of it fails
    (HTTP 500): it retries, keeps the ConfigMap as it was and waits out the scale-down
    policy (1 pod per 20 s) instead of starting fresh."""
    text = without_state_file(config(rig, tmp_path, behavior=DOWN_ONE_POD_PER_20S,
                                     extra_daemon=LEADER_ELECTION), tmp_path)
    await six_ready_pods(rig)
    with daemon(text, tmp_path, name="first") as first:
        stepped = await scaled_down_once(rig)
        assert await first.stop_async() == 0
    # The first GET is the start's look at who owns the store, the second the history's read.
    rig.api.fail_next(2, verb="get", resource="configmaps")
    with daemon(text, tmp_path, name="second") as second:
        await eventually(lambda: second.target().get("lastOutcome") == "ok", timeout=30,
                         what="a pass after the failover")
        await hold(lambda: replicas(rig) == 5, until=stepped + 18,
                   what="a second step down inside the policy's 20 s period")
        await eventually(lambda: replicas(rig) == 4, timeout=20, what="the next step down")
        assert any("retry" in str(e.get("event", "")) and "history" in str(e.get("event", ""))
                   for e in second.logs()), "the failed read was not reported"
        assert await second.stop_async() == 0
    stored = rig.api.get("v1", "ConfigMap", "default", "autoscaler-state")
    assert stored is not None
    body = json.loads(gzip.decompress(base64.b64decode(stored["binaryData"]["state.json.gz"])))
    (history,) = body["targets"].values()
    assert history["d"], "the scale-down events were lost"
    assert body["clean"] is True


async def test_a_reload_that_drops_and_restores_a_target_keeps_its_history(
    rig: Rig, tmp_path: Path,
) -> None:
    """A target removed by SIGHUP and added back inside its policy period still has its
    scale events: no second step down within 20 s of the first."""
    text = config(rig, tmp_path, behavior=DOWN_ONE_POD_PER_20S)
    rig.api.create_deployment("default", "other", replicas=1, labels={"app": "other"})
    await six_ready_pods(rig)
    with daemon(text, tmp_path) as proc:
        stepped = await scaled_down_once(rig)
        assert proc.process is not None
        text = proc.config.read_text()
        proc.config.write_text(targeting(text, "other"))
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: "default/Deployment/web" not in
                         (proc.status() or {}).get("targets", {}),
                         timeout=10, what="the target removed")
        proc.config.write_text(text)
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=10,
                         what="the target back")
        await hold(lambda: replicas(rig) == 5, until=stepped + 18,
                   what="a second step down inside the policy's 20 s period")
        await eventually(lambda: replicas(rig) == 4, timeout=20, what="the next step down")


async def test_a_reload_that_crashes_the_parser_does_not_end_reloading(
    rig: Rig, tmp_path: Path,
) -> None:
    """SIGHUP with a deeply nested TOML is rejected and logged; the next SIGHUP with a valid
    file is applied."""
    rig.load.demand = 800
    with daemon(config(rig, tmp_path, max_replicas=4), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 4, timeout=40, what="4 replicas (max)")
        good = proc.config.read_text()
        assert proc.process is not None
        proc.config.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: any(str(e.get("event", "")).startswith("config reload rejected")
                                     for e in proc.logs()), timeout=10, what="the rejection")
        proc.config.write_text(good.replace("maxReplicas = 4", "maxReplicas = 8"))
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: replicas(rig) == 8, timeout=30, what="8 replicas after reload")
        assert "Traceback" not in proc.log_path.read_text()
        assert proc.stop() == 0


async def test_a_config_swapped_the_way_the_kubelet_does_is_reloaded(
    rig: Rig, tmp_path: Path,
) -> None:
    """The config is a mounted ConfigMap: the kubelet writes a new directory and swaps the
    ``..data`` symlink. No SIGHUP: the daemon sees the change and applies it; a change that
    needs a restart is applied as far as it can be and counted as such."""
    rig.load.demand = 800
    mount = tmp_path / "mount"
    port = free_port()
    text = config(rig, tmp_path, max_replicas=4).replace("__PORT__", str(port))
    kubelet_write(mount, "..2026_11_24_10_00_00.1", text)
    (mount / "autoscaler.toml").symlink_to("..data/autoscaler.toml")
    proc = DaemonProcess(mount / "autoscaler.toml", port=port, log=tmp_path / "daemon.log")
    proc.start()
    try:
        await eventually(lambda: replicas(rig) == 4, timeout=40, what="4 replicas (max)")
        kubelet_write(mount, "..2026_11_24_10_01_00.2", text.replace("maxReplicas = 4",
                                                                      "maxReplicas = 8"))
        await eventually(lambda: replicas(rig) == 8, timeout=30, what="8 after the swap")
        assert any(e.get("trigger") == "file changed" and e.get("event") == "config reloaded"
                   for e in proc.logs())
        kubelet_write(mount, "..2026_11_24_10_02_00.3", text.replace("maxReplicas = 4",
                      "maxReplicas = 8").replace('logLevel = "info"', 'logLevel = "debug"'))
        await eventually(lambda: 'result="restart_required"} 1.0' in proc.metrics(),
                         timeout=15, what="a reload counted as needing a restart")
        assert await proc.stop_async() == 0
    finally:
        proc.stop()


async def test_a_reload_never_turns_a_dry_run_into_a_writer(rig: Rig, tmp_path: Path) -> None:
    """Started with ``dryRun = true``, the daemon took neither the Lease nor the store (its
    history lives in memory). A reload to ``dryRun = false`` is one that needs a restart:
    the running daemon stays a dry run, says so, and writes neither /scale nor the state
    file (before: it began scaling 2 -> 4 with no store and no lease behind it)."""
    rig.load.demand = 800
    text = config(rig, tmp_path, extra_daemon="dryRun = true")
    with daemon(text, tmp_path) as proc:
        await eventually(lambda: proc.target().get("desiredReplicas") == 4, timeout=40,
                         what="a would-be decision")
        assert proc.process is not None
        proc.config.write_text(proc.config.read_text().replace("dryRun = true",
                                                               "dryRun = false"))
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: 'result="restart_required"} 1.0' in proc.metrics(),
                         timeout=15, what="the reload counted as needing a restart")
        await hold(lambda: replicas(rig) == 2, until=time.monotonic() + 6,
                   what="a scale write by the daemon started as a dry run")
        assert rig.api.count(verb="update", resource="deployments/scale") == 0
        assert not (tmp_path / "state").exists()
        assert (proc.status() or {}).get("dryRun") is True
        assert any(e.get("event") == "config reloaded, but some changes take effect only on "
                   "restart" and "daemon.dryRun" in e.get("restart_for", ())
                   for e in proc.logs())


def kubelet_write(mount: Path, version: str, text: str) -> None:
    """What the kubelet's atomic writer does: a new timestamped directory, a new ``..data``
    symlink to it, renamed over the old one (one atomic step for the reader)."""
    directory = mount / version
    directory.mkdir(parents=True)
    (directory / "autoscaler.toml").write_text(text)
    staged = mount / "..data_tmp"
    staged.symlink_to(version)
    staged.replace(mount / "..data")


async def test_an_hpa_created_while_running_stops_the_daemon_at_the_next_pass(
    rig: Rig, tmp_path: Path,
) -> None:
    """Two controllers on one target fight: an HPA that appears is respected by the next
    pass (1 s sync period), and the target is scaled again the pass after it is deleted."""
    rig.load.demand = 400
    with daemon(config(rig, tmp_path), tmp_path) as proc:
        await eventually(lambda: replicas(rig) == 4, timeout=40, what="4 replicas")
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=10,
                         what="a calm pass")
        created = time.monotonic()
        rig.api.create_hpa("default", "web-hpa", target_name="web")
        await eventually(lambda: proc.target().get("lastOutcome") == "blocked", timeout=3,
                         interval=0.05, what="the target left alone")
        print(f"HPA created -> daemon stands back: {time.monotonic() - created:.2f} s")
        rig.load.demand = 800
        await hold(lambda: replicas(rig) == 4, until=time.monotonic() + 3,
                   what="a write while the HPA owns the target")
        deleted = time.monotonic()
        rig.api.delete("autoscaling/v2", "HorizontalPodAutoscaler", "default", "web-hpa")
        await eventually(lambda: replicas(rig) > 4, timeout=5, interval=0.05,
                         what="scaling again after the HPA is gone")
        print(f"HPA deleted -> daemon scales again: {time.monotonic() - deleted:.2f} s")


async def test_a_429_with_retry_after_is_honoured(rig: Rig, tmp_path: Path) -> None:
    """PUT /scale answered 429 with Retry-After: 5: no other PUT for that target before 5 s
    have passed (passes run every second meanwhile), then the write goes through."""
    rig.load.demand = 800
    rig.api.fail_next(1, status=429, retry_after=5, verb="update", resource="deployments/scale")
    throttled: list[float] = []
    with daemon(config(rig, tmp_path), tmp_path):
        def seen_429() -> bool:
            if not throttled and rig.api.count(verb="update", status=429):
                throttled.append(time.monotonic())
            return bool(throttled)

        await eventually(seen_429, timeout=40, interval=0.05, what="the 429")
        await eventually(lambda: rig.api.count(verb="update", resource="deployments/scale",
                                               status=200) > 0,
                         timeout=15, interval=0.05, what="the write after Retry-After")
        waited = time.monotonic() - throttled[0]
        assert rig.api.count(verb="update", resource="deployments/scale") == 2
        assert waited >= 5 - 0.5, f"wrote again after {waited:.1f} s"


class DrippingPrometheus:
    """A Prometheus that answers every query a byte at a time, five a second, forever, so no
    single read ever times out (a loopback server on a thread of its own)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.asked = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.drip()

            def do_POST(self) -> None:
                self.drip()

            def drip(self) -> None:
                outer.asked.set()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                body = b'{"status":"success","data":{"resultType":"vector","result":[' * 100
                for byte in body:
                    if outer.stopping.wait(0.2):
                        return
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> DrippingPrometheus:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


async def test_sigterm_during_a_dripping_prometheus_answer_exits_in_bounded_time(
    rig: Rig, tmp_path: Path,
) -> None:
    """Prometheus drips its answer a byte at a time: SIGTERM still ends the process within
    the documented bound (STOP_BOUND, 24 s), exit code 0, with the history saved."""
    with DrippingPrometheus() as prometheus:
        text = daemon_config(prometheus_url=prometheus.url, kubeconfig=rig.api.kubeconfig,
                             listen_port="__PORT__",  # type: ignore[arg-type]
                             state_file=tmp_path / "state")
        text = text.replace('timeout = "2s"', 'timeout = "60s"')
        with daemon(text, tmp_path) as proc:
            await eventually(lambda: prometheus.asked.is_set() and proc.status() is not None,
                             timeout=30, what="a query in flight")
            await asyncio.sleep(1)
            stopped = time.monotonic()
            code = await proc.stop_async(timeout=60)
            took = time.monotonic() - stopped
            print(f"SIGTERM during a dripping answer -> exit in {took:.1f} s")
            assert code == 0
            assert took < STOP_BOUND
    assert (tmp_path / "state").exists()


async def test_a_target_added_by_a_reload_while_the_history_is_read_gets_its_history(
    rig: Rig, tmp_path: Path,
) -> None:
    """The next daemon starts without the target, and a SIGHUP adds it back while the state
    ConfigMap's read is still being retried. Once read, the target gets its saved scale
    events (no second step down within the 20 s policy period), not an empty history while
    its saved one waits among the removed targets."""
    text = without_state_file(config(rig, tmp_path, behavior=DOWN_ONE_POD_PER_20S,
                                     extra_daemon=LEADER_ELECTION), tmp_path)
    rig.api.create_deployment("default", "other", replicas=1, labels={"app": "other"})
    await six_ready_pods(rig)
    with daemon(text, tmp_path, name="first") as first:
        stepped = await scaled_down_once(rig)
        assert await first.stop_async() == 0
    without_web = targeting(text, "other")
    failing = rig.api.fail_next(4, verb="get", resource="configmaps")
    with daemon(without_web, tmp_path, name="second") as second:
        await eventually(lambda: failing.remaining <= 3, timeout=20, interval=0.05,
                         what="the first failed read of the history")
        assert second.process is not None
        second.config.write_text(second.config.read_text().replace('name = "other"',
                                                                   'name = "web"'))
        second.process.send_signal(signal.SIGHUP)
        await eventually(lambda: any(e.get("event") == "config reloaded"
                                     for e in second.logs()), timeout=10, interval=0.05,
                         what="the reload")
        assert failing.remaining > 0, "the history was read before the reload (timing)"
        await eventually(lambda: second.target().get("lastOutcome") == "ok", timeout=30,
                         what="a pass after the history is read")
        await hold(lambda: replicas(rig) == 5, until=stepped + 18,
                   what="a second step down inside the policy's 20 s period")


async def test_a_failed_in_use_mark_after_a_failover_is_retried(
    rig: Rig, tmp_path: Path,
) -> None:
    """After a clean stop the next leader marks the ConfigMap in use before acting. If that
    one PUT fails (HTTP 500), it is retried like the read, not raised out of the restore
    (which left the daemon leading, unhealthy and never scaling)."""
    text = without_state_file(config(rig, tmp_path, behavior=DOWN_ONE_POD_PER_20S,
                                     extra_daemon=LEADER_ELECTION), tmp_path)
    await six_ready_pods(rig)
    with daemon(text, tmp_path, name="first") as first:
        await scaled_down_once(rig)
        assert await first.stop_async() == 0
    rig.api.fail_next(1, verb="update", resource="configmaps")
    with daemon(text, tmp_path, name="second") as second:
        await eventually(lambda: replicas(rig) == 4, timeout=40,
                         what="the next step down after the failover")
        assert "background task died" not in second.log_path.read_text()


async def test_a_reload_that_drops_a_target_mid_pass_keeps_its_history(
    rig: Rig, tmp_path: Path,
) -> None:
    """A SIGHUP that removes a target while a pass over it waits on Prometheus: the pass
    neither re-creates its state (a fresh, empty history that would hide the kept one) nor
    writes it; no second step down within the 20 s policy period, neither while removed nor
    once added back."""
    from tests.sim.prometheus import CountingProxy

    with CountingProxy(rig.prometheus.url) as proxy:
        text = daemon_config(prometheus_url=proxy.url, kubeconfig=rig.api.kubeconfig,
                             listen_port="__PORT__",  # type: ignore[arg-type]
                             state_file=tmp_path / "state", behavior=DOWN_ONE_POD_PER_20S)
        text = text.replace('syncPeriod = "1s"', 'syncPeriod = "3s"')
        rig.api.create_deployment("default", "other", replicas=1, labels={"app": "other"})
        await six_ready_pods(rig)
        with daemon(text, tmp_path) as proc:
            stepped = await scaled_down_once(rig)
            assert proc.process is not None
            good = proc.config.read_text()
            proxy.delay = 1.5  # every pass now waits 1.5 s on its query
            await eventually(lambda: proxy.in_flight > 0, timeout=10, interval=0.02,
                             what="a pass waiting on Prometheus")
            proc.config.write_text(targeting(good, "other"))
            proc.process.send_signal(signal.SIGHUP)
            await eventually(lambda: "default/Deployment/web" not in
                             (proc.status() or {}).get("targets", {}),
                             timeout=10, interval=0.05, what="the target removed")
            assert proxy.in_flight > 0, "the reload did not land inside the pass (timing)"
            proxy.delay = 0.0
            await eventually(lambda: proxy.in_flight == 0, timeout=10, what="the pass done")
            await asyncio.sleep(0.5)
            proc.config.write_text(good)
            proc.process.send_signal(signal.SIGHUP)
            await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=15,
                             what="the target back")
            await hold(lambda: replicas(rig) == 5, until=stepped + 18,
                       what="a second step down inside the policy's 20 s period")
