"""Two processes on one store (issue 40, item 5): a second daemon on a state file another
runs on is refused at start, naming it; the store is free again the moment its owner dies
however it dies, and the next daemon keeps its history; a dry run beside the live daemon
reads its history but never writes it; a state ConfigMap another daemon's Lease owns is
refused, naming that Lease's holder."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
from pathlib import Path

from autoscaler.snapshot import Snapshot, encode
from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, daemon, eventually
from tests.e2e.test_daemon import replicas
from tests.e2e.test_trust import (
    LEADER_ELECTION,
    UP_TWO_PODS_PER_15S,
    config,
    hold,
    kill_at_the_next_write,
    without_state_file,
)

OWNER_ANNOTATION = "autoscaler.dev/owner"


async def refusal(proc: DaemonProcess) -> tuple[int | None, str]:
    """``proc``'s exit code (None if it still runs after 15 s) and its last line; waited
    for without blocking the loop the simulated API server answers on."""
    process = proc.process
    assert process is not None
    with contextlib.suppress(AssertionError):
        await eventually(lambda: process.poll() is not None, timeout=15, interval=0.05)
    lines = proc.log_path.read_text().strip().splitlines()
    return process.poll(), lines[-1] if lines else ""


async def test_a_second_daemon_on_one_state_file_is_refused_and_takes_over_once_it_is_free(
    rig: Rig, tmp_path: Path,
) -> None:
    """A runs on the state file; B, given the same one, exits 1 at start with one line
    naming A (pid and host). A is SIGKILLed the moment its 2 -> 4 landed: the kernel frees
    the lock with it, B starts, and keeps A's step (no 4 -> 6 inside the 15 s period)."""
    rig.load.demand = 1000
    text = config(rig, tmp_path, behavior=UP_TWO_PODS_PER_15S, downscale="0s")
    with daemon(text, tmp_path, name="a") as a:
        await eventually(lambda: a.status() is not None, timeout=20, what="A up")
        with daemon(text, tmp_path, name="b") as b:
            code, line = await refusal(b)
            assert code == 1, "a second daemon ran on the same state file"
            assert a.process is not None
            assert f"pid {a.process.pid} on {socket.gethostname()}" in line, line
            assert str(tmp_path / "state") in line
        written = kill_at_the_next_write(rig, a)
        await eventually(lambda: bool(written), timeout=30, what="A's 2 -> 4")
        assert a.process is not None
        a.process.wait(10)
    assert replicas(rig) == 4
    with daemon(text, tmp_path, name="b-again") as b:
        await eventually(lambda: b.target().get("lastOutcome") == "ok", timeout=20,
                         what="B runs once A is gone")
        await hold(lambda: replicas(rig) == 4, until=written[0] + 14,
                   what="a second step inside the policy's 15 s period")
        await eventually(lambda: replicas(rig) == 6, timeout=20, what="4 -> 6 after it")


async def test_a_dry_run_beside_the_live_daemon_never_writes_its_state_file(
    rig: Rig, tmp_path: Path,
) -> None:
    """A dry run on the live daemon's state file is not refused (it takes no lock): it
    reads the history once and keeps its own in memory. Once the live daemon has stopped,
    the dry run's passes leave the file byte for byte as the live one left it."""
    rig.load.demand = 400
    text = config(rig, tmp_path, downscale="0s")
    state = tmp_path / "state"
    with daemon(text, tmp_path, name="live") as live:
        await eventually(lambda: replicas(rig) == 4, timeout=30, what="the live daemon scales")
        with daemon(text, tmp_path, name="dry", extra_args=("--dry-run",)) as dry:
            await eventually(lambda: dry.target().get("lastOutcome") == "ok", timeout=20,
                             what="the dry run's passes")
            rig.load.demand = 800  # the dry run would scale now
            assert await live.stop_async() == 0
            left = state.read_bytes(), os.stat(state).st_ino
            await eventually(lambda: dry.target().get("desiredReplicas") == 8, timeout=20,
                             what="the dry run deciding on")
            assert await dry.stop_async() == 0
    assert (state.read_bytes(), os.stat(state).st_ino) == left, \
        "the dry run wrote the live daemon's state file"
    assert replicas(rig) == 4


async def test_a_state_configmap_another_lease_owns_is_refused_at_start(
    rig: Rig, tmp_path: Path,
) -> None:
    """The state ConfigMap names another Lease as its owner (daemons of another lease or
    shard pointed at the same name): the daemon exits 1 at start with one line naming that
    Lease and its holder, and the ConfigMap is left as it was."""
    rig.api.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "other", "namespace": "default"},
                    "spec": {"holderIdentity": "other-host_1234", "leaseDurationSeconds": 15}})
    rig.api.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "autoscaler-state", "namespace": "default",
                                 "annotations": {OWNER_ANNOTATION: "Lease default/other"}},
                    "binaryData": {"state.json.gz": base64.b64encode(
                        encode(Snapshot(targets={}))).decode()}})
    before = rig.api.get("v1", "ConfigMap", "default", "autoscaler-state")
    text = without_state_file(config(rig, tmp_path, extra_daemon=LEADER_ELECTION), tmp_path)
    with daemon(text, tmp_path) as proc:
        code, line = await refusal(proc)
    assert code == 1, "the daemon ran on another daemon's state ConfigMap"
    assert "Lease default/other, held by other-host_1234" in line, line
    assert rig.api.get("v1", "ConfigMap", "default", "autoscaler-state") == before
