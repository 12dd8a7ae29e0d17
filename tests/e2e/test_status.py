"""``autoscaler status`` against a running daemon (a subprocess), the simulated API server and
a real Prometheus: the table and each target's page, as golden files."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import Rig
from tests.e2e.golden import BEHAVIOR, assert_golden, exported, fleet, fleet_targets
from tests.e2e.harness import DaemonProcess, daemon, daemon_config, eventually
from tests.e2e.modes import (
    MODE_NAMES,
    PINNED_AT,
    daemon_section,
    disagreements,
    dry_target,
    key,
    mode_fleet,
    mode_targets,
    replicas,
    series,
)
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
    # One computation: the window lets the held count go when a scale-down can first happen.
    assert body["decision"]["stabilization"]["releasesAt"] == body["scaleDown"]["earliest"]


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


# --- every mode: /status, /metrics and the commands' outputs say one state ----------------------


def _stable_view(body: dict[str, Any]) -> dict[str, Any]:
    """What must not differ between two renderings of one target a moment apart."""
    return {name: body.get(name) for name in (
        "target", "currentReplicas", "desiredReplicas", "paused", "fallbackActive", "blockedBy")}


async def agreeing(proc: DaemonProcess, name: str, problems: list[str], *,
                   times: int = 3) -> dict[str, Any]:
    """The target's body once /status and /metrics have agreed ``times`` reads in a row
    (each read between two passes over it); what they disagreed on goes to ``problems``."""
    seen: list[Any] = []

    def check() -> bool:
        before = proc.target(key(name))
        text = proc.metrics()
        body = proc.target(key(name))
        if not body or before.get("lastReconcileTime") != body.get("lastReconcileTime"):
            return False
        seen.append(disagreements(body, text, name))
        return len(seen) >= times and not any(seen[-times:])

    if not await waited(check, timeout=15, what="", problems=[]):
        problems.append(f"{name}: /status and /metrics disagree: {seen[-1:]}")
    return proc.target(key(name))


async def waited(check: Callable[[], bool], *, timeout: float, what: str,
                 problems: list[str]) -> bool:
    """``eventually`` that notes a timeout in ``problems`` instead of raising, so one run
    says every mode that is wrong."""
    try:
        await eventually(check, timeout=timeout, interval=0.3, what=what)
    except AssertionError as error:
        problems.append(str(error))
        return False
    return True


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "autoscaler", *args],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)


async def test_every_mode_shows_one_state_on_status_metrics_and_every_output(
    rig: Rig, tmp_path: Path,
) -> None:
    """A target in each mode, read from outside: /status, /metrics, `status` (page, -o json,
    -o yaml), `plan -o json|yaml` and `check -o json` say the same counts, and the cluster's.

    - paused-replicas: decided at 2, then the annotation holds it at 3: 3 current / 3
      desired everywhere, no metric measured while paused (it said 2, the decision from
      before the pause, on /status and /metrics);
    - shadow: our count against the HPA's on the page; switched off by a reload, its
      comparison and autoscaler_shadow_agreement go (the gauge stayed at 0);
    - fallback: the fallback count (5), not the decision's, as desired, and its scale
      listed within 2 s (no behavior: upstream keeps no event, the page said <none>);
    - scaled to zero; predictive (forecastOnly); dry-run (a second daemon): would 2 -> 4.

    Every problem is noted and the test fails once, at the end, naming them all.
    """
    problems: list[str] = []

    def expect(holds: bool, what: str) -> None:
        if not holds:
            problems.append(what)

    port, dry_port = free_port(), free_port()
    head = daemon_section(prometheus=rig.prometheus.url, kubeconfig=str(rig.api.kubeconfig),
                          state=str(tmp_path / "state"))
    text = head + mode_targets()
    dry_text = daemon_section(prometheus=rig.prometheus.url, kubeconfig=str(rig.api.kubeconfig),
                              state=str(tmp_path / "dry-state")) + dry_target()
    async with mode_fleet(rig):
        with daemon(text, tmp_path, port=port) as proc, \
                daemon(dry_text, tmp_path, port=dry_port, name="dry",
                       extra_args=("--dry-run",)) as dry:
            url, dry_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{dry_port}"
            await eventually(lambda: proc.target(key("pinned")).get("lastOutcome") == "ok",
                             timeout=40, what="pinned decided")
            rig.api.patch("apps/v1", "Deployment", "default", "pinned", {"metadata": {
                "annotations": {"autoscaler.dev/paused-replicas": str(PINNED_AT)}}})
            await eventually(lambda: replicas(rig, "fallback") == 5, timeout=40,
                             what="the fallback count")
            await waited(lambda: bool(proc.target(key("fallback")).get("scaleEvents")),
                         timeout=2, what="the fallback's scale listed within 2 s",
                         problems=problems)
            await eventually(lambda: replicas(rig, "pinned") == PINNED_AT, timeout=20,
                             what="pinned held at 3")
            await eventually(lambda: replicas(rig, "worker") == 0, timeout=40,
                             what="the worker at zero")
            await eventually(lambda: (proc.target(key("shadowed")).get("shadow") or {}).get(
                "theirDesiredReplicas") == 3, timeout=20, what="the shadow comparison")
            await eventually(lambda: "forecast" in proc.target(key("predicted")), timeout=20,
                             what="the forecast")
            await eventually(lambda: dry.target(key("dry")).get("desiredReplicas") == 4,
                             timeout=30, what="the dry run's decision")
            for name in MODE_NAMES:  # a pass after the last write: the count it reads
                await waited(lambda n=name: proc.target(key(n)).get(  # type: ignore[misc]
                    "currentReplicas") == replicas(rig, n), timeout=10,
                    what=f"{name}: the count read ({replicas(rig, name)}) shown",
                    problems=problems)
            bodies = {name: await agreeing(proc, name, problems) for name in MODE_NAMES}
            dry_body = await agreeing(dry, "dry", problems)
            pages = {name: await cli("status", "--url", url, name) for name in MODE_NAMES}
            as_json = {name: await cli("status", "--url", url, name, "-o", "json")
                       for name in MODE_NAMES}
            as_yaml = {name: await cli("status", "--url", url, name, "-o", "yaml")
                       for name in MODE_NAMES}
            whole_yaml = await cli("status", "--url", url, "-o", "yaml")
            dry_page = await cli("status", "--url", dry_url, "dry")
            config_path = tmp_path / "daemon.toml"
            plans = {output: await cli("plan", "--config", str(config_path), "-o", output)
                     for output in ("json", "yaml")}
            checked = await cli("check", str(config_path), "-o", "json")

            # Shadow mode switched off by a reload: its comparison goes with it.
            config_path.write_text(text.replace("__PORT__", str(port)).replace(
                "shadow = true", ""))
            assert proc.process is not None
            proc.process.send_signal(signal.SIGHUP)
            await waited(lambda: "shadow" not in proc.target(key("shadowed")), timeout=20,
                         what="the shadow comparison gone after the reload", problems=problems)
            await waited(lambda: not series(proc.metrics(), "autoscaler_shadow_agreement",
                                            "shadowed"), timeout=10,
                         what="autoscaler_shadow_agreement gone after the reload",
                         problems=problems)

    pinned = bodies["pinned"]
    expect((pinned.get("currentReplicas"), pinned.get("desiredReplicas")) == (
        PINNED_AT, PINNED_AT), f"pinned: {pinned.get('currentReplicas')} current / "
           f"{pinned.get('desiredReplicas')} desired, held at {PINNED_AT}")
    expect("annotation autoscaler.dev/paused-replicas" in pinned.get("paused", ""),
           "pinned: the pause not shown")
    expect("currentMetrics" not in pinned, "pinned: metrics shown as current while paused")
    expect("Deployment pods:     3 current / 3 desired" in pages["pinned"].stdout,
           f"pinned page: {pages['pinned'].stdout[:400]}")
    expect("(before the target was paused)" in pages["pinned"].stdout,
           "pinned page: the decision not said to be from before the pause")

    shadow = bodies["shadowed"].get("shadow") or {}
    expect((shadow.get("desiredReplicas"), shadow.get("theirDesiredReplicas"),
            shadow.get("agree")) == (4, 3, False), f"shadowed: {shadow}")
    expect("Shadow:" in pages["shadowed"].stdout and "this autoscaler would scale to 4, "
           in pages["shadowed"].stdout and "wants 3: they disagree" in pages["shadowed"].stdout,
           "shadowed page: our count against the HPA's not shown")

    fallback = bodies["fallback"]
    expect((fallback.get("currentReplicas"), fallback.get("desiredReplicas")) == (5, 5),
           f"fallback: {fallback.get('currentReplicas')} current / "
           f"{fallback.get('desiredReplicas')} desired at the fallback count 5")
    expect(fallback.get("fallbackActive") is True, "fallback: not said to be active")
    expect({"direction": "up", "change": 3} in [
        {k: e[k] for k in ("direction", "change")} for e in fallback.get("scaleEvents", ())],
        "fallback: its scale 2 -> 5 not listed")
    expect("desired:        5" in pages["fallback"].stdout,
           "fallback page: the decision's desired line is not the fallback count")

    worker = bodies["worker"]
    expect((worker.get("currentReplicas"), worker.get("desiredReplicas")) == (0, 0),
           f"worker: {worker.get('currentReplicas')} / {worker.get('desiredReplicas')}")
    expect((worker.get("scaleToZero") or {}).get("scaledToZero") is True,
           "worker: not said to be scaled to zero")
    expect((bodies["predicted"].get("forecast") or {}).get("acting") is False,
           "predicted: no forecast shown")

    expect((dry_body.get("currentReplicas"), dry_body.get("desiredReplicas")) == (2, 4),
           f"dry: {dry_body.get('currentReplicas')} / {dry_body.get('desiredReplicas')}")
    expect(replicas(rig, "dry") == 2, "dry: written")
    expect("would scale 2 -> 4" in dry_page.stdout, "dry page: no would-scale")

    for name in MODE_NAMES:
        failed = [done.stderr for done in (pages[name], as_json[name], as_yaml[name])
                  if done.returncode != 0]
        expect(not failed, f"{name}: status failed: {failed}")
        if not failed:
            views = [_stable_view(json.loads(as_json[name].stdout)),
                     _stable_view(yaml.safe_load(as_yaml[name].stdout)),
                     _stable_view(bodies[name])]
            expect(views[0] == views[1] == views[2], f"{name}: -o json, -o yaml and /status "
                   f"differ: {views}")
    expect(whole_yaml.returncode == 0 and set(yaml.safe_load(whole_yaml.stdout)["targets"]) ==
           {key(n) for n in MODE_NAMES}, f"status -o yaml: {whole_yaml.stderr}")

    for output, done in plans.items():
        if done.returncode != 1 or not done.stdout.strip():  # the fallback target: exit 1
            problems.append(f"plan -o {output}: exit {done.returncode}: {done.stderr[-300:]}")
            continue
        document = json.loads(done.stdout) if output == "json" else yaml.safe_load(done.stdout)
        planned = {body["target"]: body for body in document["targets"]}
        seen = {name: (planned[key(name)].get("currentReplicas"),
                       planned[key(name)].get("desiredReplicas")) for name in MODE_NAMES}
        expect(seen["pinned"] == (PINNED_AT, PINNED_AT) and seen["worker"][0] == 0,
               f"plan -o {output}: {seen}")
        expect((planned[key("shadowed")].get("shadow") or {}).get("theirDesiredReplicas") == 3,
               f"plan -o {output}: no shadow comparison")
    summary = json.loads(checked.stdout) if checked.returncode == 0 else {}
    expect(summary.get("valid") is True and {t["target"] for t in summary["targets"]} ==
           {key(n) for n in MODE_NAMES}, f"check -o json: {checked.stderr}")
    assert not problems, "\n".join(problems)
