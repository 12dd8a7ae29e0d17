"""Whose zero it is, end to end: every way the record of a queue worker's zero can be lost
or changed hands ends in the worker waking on its first messages, or, at a zero the daemon
did not make, in a condition, an Event and an alert that name the target and the command
that hands it back. The real daemon, a real Prometheus, the simulated API server (which
records who last set a count in ``managedFields``, as a real one does).

Each wake-up is timed from the moment Prometheus has the messages (the earliest a pass can
see them) to the write; the rules allow it at the next pass (1 s sync period)."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitoring import generate
from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, daemon, eventually
from tests.e2e.test_landed import WITHIN_A_PASS
from tests.e2e.test_trust import LEADER_ELECTION
from tests.e2e.test_zero import QUEUE, scaled_to_zero, worker_config, worker_replicas
from tests.sim.kube import kubectl
from tests.sim.prometheus import free_port, start_prometheus

WORKER = "default/Deployment/worker"


async def our_zero(rig: Rig, proc: DaemonProcess) -> None:
    """The idle worker (1 replica, no messages) taken to 0 by the daemon (5 s cooldown)."""
    await eventually(lambda: worker_replicas(rig) == 0, timeout=30, what="0 workers")
    await eventually(lambda: scaled_to_zero(proc.target(WORKER)) == "True", timeout=10,
                     what="ScaledToZero True")


async def a_pass_at_zero(proc: DaemonProcess) -> None:
    """The daemon has decided on the worker at 0 since it (re)started or reloaded."""
    def decided() -> bool:
        target = proc.target(WORKER)
        return target.get("currentReplicas") == 0 and target.get("lastOutcome") in (
            "ok", "shadow", "blocked")
    await eventually(decided, timeout=30, what="a pass over the worker at 0")
    await asyncio.sleep(1.5)  # and one more, whatever the first one found


async def messages_arrive(rig: Rig, count: int = 25) -> float:
    """``count`` messages, once Prometheus answers with them: the earliest instant (test
    monotonic clock) a pass can see them."""
    rig.load.exporter.set_gauge("queue_messages", QUEUE, count)

    def visible() -> bool:
        result = rig.prometheus.query('sum(queue_messages{queue="jobs"})')
        return bool(result) and float(result[0]["value"][1]) == count
    await eventually(visible, timeout=15, interval=0.05, what="the messages in Prometheus")
    return time.monotonic()


async def woken(rig: Rig, since: float, what: str) -> float:
    """The worker woken to 3 (25 messages over 10 per worker); seconds since ``since``."""
    await eventually(lambda: worker_replicas(rig) == 3, timeout=15, interval=0.05,
                     what=f"the worker woken ({what})")
    delay = time.monotonic() - since
    print(f"{what}: woken {delay:.2f} s after the messages were visible")
    assert delay <= WITHIN_A_PASS, f"woken {delay:.1f} s late"
    return delay


def with_leader_election(text: str, tmp_path: Path) -> str:
    """The worker's config with its history on a ConfigMap and a Lease."""
    text = text.replace(f'stateFile = "{tmp_path / "state"}"\n', "")
    return text.replace("\n[prometheus]", LEADER_ELECTION + "\n[prometheus]", 1)


def shadowed(text: str, shadow: bool) -> str:
    return text.replace('cooldownPeriod = "5s"\n',
                        'cooldownPeriod = "5s"\n' + ("shadow = true\n" if shadow else ""))


async def reload(proc: DaemonProcess, text: str) -> None:
    """Write the config and SIGHUP the daemon; return once it says it reloaded."""
    before = proc.log_path.read_text().count('"config reloaded"')
    proc.config.write_text(text.replace("__PORT__", str(proc.port)))
    assert proc.process is not None
    proc.process.send_signal(signal.SIGHUP)
    await eventually(lambda: proc.log_path.read_text().count('"config reloaded"') > before,
                     timeout=10, what="the reload")


@pytest.mark.parametrize("lost", ["deleted", "unreadable"])
async def test_our_zero_wakes_after_the_state_is_lost(
    rig: Rig, tmp_path: Path, lost: str,
) -> None:
    """The daemon takes the idle worker to 0 and stops; its state file is deleted (or cut in
    half: unreadable, set aside). The next run has no memory of that zero, but the cluster
    says who set the count: its first messages wake the worker."""
    rig.api.create_deployment("default", "worker", replicas=1, labels={"app": "worker"})
    text = worker_config(rig, tmp_path)
    with daemon(text, tmp_path, name="first") as first:
        await our_zero(rig, first)
        assert await first.stop_async() == 0
    state = tmp_path / "state"
    if lost == "deleted":
        state.unlink()
    else:
        state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    with daemon(text, tmp_path, name="second") as second:
        await a_pass_at_zero(second)
        assert worker_replicas(rig) == 0, "woken without a message"
        since = await messages_arrive(rig)
        await woken(rig, since, f"state {lost}")
        assert "ScalingDisabled" not in second.target(WORKER).get("steps", [])


@pytest.mark.parametrize("state", ["kept", "lost"])
async def test_our_zero_wakes_after_a_failover(rig: Rig, tmp_path: Path, state: str) -> None:
    """Two daemons on one Lease, history on a ConfigMap: the leader takes the worker to 0
    and is SIGKILLed; the standby leads (with the ConfigMap kept, or deleted meanwhile) and
    wakes the worker on its first messages."""
    rig.api.create_deployment("default", "worker", replicas=1, labels={"app": "worker"})
    text = with_leader_election(worker_config(rig, tmp_path), tmp_path)
    with daemon(text, tmp_path, name="a") as a:
        await eventually(lambda: (a.status() or {}).get("leader") is True, timeout=20,
                         what="A leads")
        with daemon(text, tmp_path, name="b") as b:
            await our_zero(rig, a)
            assert a.process is not None
            a.process.kill()
            if state == "lost":
                await eventually(lambda: rig.api.get("v1", "ConfigMap", "default",
                                                     "autoscaler-state") is not None,
                                 timeout=10, what="the state ConfigMap")
                rig.api.delete("v1", "ConfigMap", "default", "autoscaler-state")
            await eventually(lambda: (b.status() or {}).get("leader") is True, timeout=20,
                             what="B leads")
            await a_pass_at_zero(b)
            assert worker_replicas(rig) == 0
            since = await messages_arrive(rig)
            await woken(rig, since, f"failover, state {state}")


async def test_a_failed_wake_up_then_a_kill_still_wakes_the_worker(
    rig: Rig, tmp_path: Path,
) -> None:
    """At the daemon's zero, messages arrive; the wake-up PUT is answered 500 and the
    Deployment touched, and the daemon is SIGKILLed at that moment. The restart settles the
    write as not landed and the zero as still its own: the next pass wakes the worker."""
    rig.api.create_deployment("default", "worker", replicas=1, labels={"app": "worker"})
    text = worker_config(rig, tmp_path)
    with daemon(text, tmp_path, name="first") as first:
        await our_zero(rig, first)

        def touch_and_kill() -> None:
            rig.api.touch("apps/v1", "Deployment", "default", "worker")
            assert first.process is not None
            first.process.kill()

        rig.api.fail_next(1, status=500, verb="update", resource="deployments/scale",
                          then=touch_and_kill)
        await messages_arrive(rig)
        assert first.process is not None
        await asyncio.to_thread(first.process.wait, 20)
    assert worker_replicas(rig) == 0
    with daemon(text, tmp_path, name="second"):
        started = time.monotonic()
        await eventually(lambda: worker_replicas(rig) == 3, timeout=20, interval=0.05,
                         what="the worker woken after the restart")
    print(f"failed wake-up, kill, restart: woken {time.monotonic() - started:.2f} s after "
          "the restart began")


@pytest.mark.parametrize("order", ["scaledobject-first", "shadow-first"])
async def test_a_keda_zero_wakes_after_the_cutover(
    rig: Rig, tmp_path: Path, order: str,
) -> None:
    """A ScaledObject runs the worker and KEDA took it to 0; the daemon runs beside it in
    shadow mode. The cutover, in either order (delete the ScaledObject, then leave shadow
    mode; or the other way round), leaves an idle worker the daemon wakes on its first
    messages."""
    rig.api.create_deployment("default", "worker", replicas=1, labels={"app": "worker"})
    rig.api.create_scaled_object("default", "worker", target_name="worker")
    rig.api.set_replicas("Deployment", "default", "worker", 0, manager="keda-operator",
                         via_scale=True)
    text = worker_config(rig, tmp_path)
    with daemon(shadowed(text, True), tmp_path) as proc:
        await eventually(lambda: proc.target(WORKER).get("scaleToZero", {}).get(
            "scaledToZero") is True, timeout=30, what="the KEDA zero held in shadow mode")
        if order == "scaledobject-first":
            rig.api.delete("keda.sh/v1alpha1", "ScaledObject", "default", "worker")
            await asyncio.sleep(2)
            await reload(proc, shadowed(text, False))
        else:
            await reload(proc, shadowed(text, False))
            await eventually(lambda: proc.target(WORKER).get("lastOutcome") == "blocked",
                             timeout=10, what="blocked by the ScaledObject")
            rig.api.delete("keda.sh/v1alpha1", "ScaledObject", "default", "worker")
        await a_pass_at_zero(proc)
        assert worker_replicas(rig) == 0
        since = await messages_arrive(rig)
        await woken(rig, since, f"KEDA cutover, {order}")


async def test_our_zero_wakes_after_shadow_mode_on_and_off(
    rig: Rig, tmp_path: Path,
) -> None:
    """The daemon takes the idle worker to 0; shadow mode is switched on, then off again:
    the zero is still the daemon's and its first messages wake the worker."""
    rig.api.create_deployment("default", "worker", replicas=1, labels={"app": "worker"})
    text = worker_config(rig, tmp_path)
    with daemon(text, tmp_path) as proc:
        await our_zero(rig, proc)
        await reload(proc, shadowed(text, True))
        await asyncio.sleep(2.5)
        await reload(proc, shadowed(text, False))
        await a_pass_at_zero(proc)
        since = await messages_arrive(rig)
        await woken(rig, since, "shadow on and off")


def stranded_alert() -> str:
    """AutoscalerStrandedAtZero's expression, for a Prometheus whose scrape job is "test"."""
    rules = yaml.safe_load(generate.RULES.read_text())["groups"][0]["rules"]
    (rule,) = [r for r in rules if r.get("alert") == "AutoscalerStrandedAtZero"]
    return str(rule["expr"]).replace('job="autoscaler"', 'job="test"')


def condition(target: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [c for c in target.get("conditions", []) if c["type"] == kind]
    return found


@pytest.mark.parametrize("setter", ["kubectl", "OpenAPI-Generator"],
                         ids=["set-by-hand", "set-by-no-one-known"])
async def test_work_waiting_at_a_zero_not_ours_is_said_and_alerted(
    rig: Rig, tmp_path: Path, setter: str,
) -> None:
    """The worker was set to 0 by someone else (``kubectl scale``), or by a client that
    names no one (what this daemon's writes were before it named itself) with no state
    left: messages arrive and the worker stays at 0, as upstream leaves a zero it did not
    make; ScalingActive says who set it and the command that hands it back, a
    StrandedAtZero Event says it, and AutoscalerStrandedAtZero's expression matches the
    target in a Prometheus scraping the daemon. Running that command hands it back: the
    daemon takes the worker to 3."""
    rig.api.create_deployment("default", "worker", replicas=1, labels={"app": "worker"})
    if setter == "kubectl":
        done = await kubectl(rig.api, "scale", "deployment/worker", "--replicas=0")
        assert done.returncode == 0, done.stderr
    else:
        rig.api.set_replicas("Deployment", "default", "worker", 0, manager=setter,
                             via_scale=True)
    port = free_port()
    with start_prometheus(scrape_targets=[f"127.0.0.1:{port}"]) as scraper, \
            daemon(worker_config(rig, tmp_path), tmp_path, port=port) as proc:
        await a_pass_at_zero(proc)
        await messages_arrive(rig)
        await eventually(lambda: condition(proc.target(WORKER), "ScalingActive")[
            "message"].startswith("scaling is disabled:"), timeout=10,
            what="the stranded condition")
        message = condition(proc.target(WORKER), "ScalingActive")["message"]
        print(f"{setter}: ScalingActive False ScalingDisabled: {message}")
        command = "kubectl -n default scale deployment/worker --replicas=1"
        assert f"run `{command}`" in message
        assert (f"{setter} set its replicas to 0" if setter == "kubectl"
                else f"names {setter}") in message
        assert worker_replicas(rig) == 0
        await eventually(lambda: any(
            e.get("reason") == "StrandedAtZero" and command in e["message"]
            for e in rig.api.store.list(("", "events"), "default")), timeout=10,
            what="the StrandedAtZero Event")
        labels = 'namespace="default",kind="Deployment",name="worker"'
        assert f"autoscaler_activation_active{{{labels}}} 1\n" in proc.metrics()
        await eventually(lambda: bool(scraper.query(stranded_alert())), timeout=20,
                         what="AutoscalerStrandedAtZero's expression matching")
        (series,) = scraper.query(stranded_alert())
        assert {k: series["metric"][k] for k in ("namespace", "kind", "name")} == {
            "namespace": "default", "kind": "Deployment", "name": "worker"}
        handed = await kubectl(rig.api, *re.sub(r"^kubectl ", "", command).split())
        assert handed.returncode == 0, handed.stderr
        handed_at = time.monotonic()
        await eventually(lambda: worker_replicas(rig) == 3, timeout=15, interval=0.05,
                         what="the daemon scaling the handed-back worker")
        print(f"{setter}: after the command, 1 -> 3 in {time.monotonic() - handed_at:.2f} s")
        await eventually(lambda: not scraper.query(stranded_alert()), timeout=20,
                         what="the alert's expression clearing")
