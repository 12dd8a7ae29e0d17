"""Real failovers, two daemons on one Lease: the leader SIGKILLed the moment its PUT /scale
succeeded (the standby takes the lease and no step the policy forbids), and a leader
deposed while its history write was in flight (it never overwrites the new leader's)."""

from __future__ import annotations

import base64
import gzip
import json
import signal
from pathlib import Path
from typing import Any

from autoscaler.snapshot import Snapshot, encode
from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon, eventually
from tests.e2e.test_daemon import replicas
from tests.e2e.test_trust import (
    LEADER_ELECTION,
    UP_TWO_PODS_PER_15S,
    config,
    hold,
    kill_at_the_next_write,
    without_state_file,
)


async def test_the_standby_keeps_the_step_of_a_leader_killed_after_its_write(
    rig: Rig, tmp_path: Path,
) -> None:
    """2 -> 4 by the leader, SIGKILL right after the PUT; the standby leads after the lease
    expires (4 s) and waits out the 15 s period before 4 -> 6."""
    rig.load.demand = 1000
    text = without_state_file(config(rig, tmp_path, behavior=UP_TWO_PODS_PER_15S,
                                     downscale="0s", extra_daemon=LEADER_ELECTION), tmp_path)
    with daemon(text, tmp_path, name="first") as first:
        await eventually(lambda: (first.status() or {}).get("leader") is True, timeout=20,
                         what="first leads")
        with daemon(text, tmp_path, name="second") as second:
            written = kill_at_the_next_write(rig, first)
            await eventually(lambda: bool(written), timeout=40, what="the first scale write")
            assert replicas(rig) == 4
            await eventually(lambda: (second.status() or {}).get("leader") is True,
                             timeout=20, what="second leads")
            await hold(lambda: replicas(rig) == 4, until=written[0] + 14,
                       what="a second step inside the policy's 15 s period")
            await eventually(lambda: replicas(rig) == 6, timeout=20, what="4 -> 6")


async def test_a_deposed_leader_never_overwrites_the_new_leaders_history(
    rig: Rig, tmp_path: Path,
) -> None:
    """A leads; its state ConfigMap PUT (the record of its next scale write) is held in
    flight and A is SIGSTOPped. B takes the lease, writes its own history and scales. A
    wakes and its PUT is answered 409: A re-reads and re-decides, and, no longer the leader
    by its own clock, writes nothing: not the ConfigMap, not the scale. B's history stays."""
    rig.load.demand = 200  # 2 pods: nothing to do yet
    theirs = rig.api.write_kubeconfig(tmp_path / "b.kubeconfig", token="b-token")
    rig.api.add_token("b-token", "system:serviceaccount:b")
    text = without_state_file(config(rig, tmp_path, behavior=UP_TWO_PODS_PER_15S,
                                     downscale="0s", extra_daemon=LEADER_ELECTION), tmp_path)
    a_user, b_user = "system:serviceaccount:autoscaler:autoscaler", "system:serviceaccount:b"
    rig.api.create({"apiVersion": "v1", "kind": "ConfigMap",  # so every write is a PUT
                    "metadata": {"name": "autoscaler-state", "namespace": "default"},
                    "binaryData": {"state.json.gz": base64.b64encode(
                        encode(Snapshot(targets={}))).decode()}})

    def wrote(user: str, resource: str, since: int = 0) -> list[object]:
        return [r for r in rig.api.log.records[since:]
                if (r.verb, r.resource, r.user, r.status) == ("update", resource, user, 200)]

    with daemon(text, tmp_path, name="a") as a:
        await eventually(lambda: a.target().get("lastOutcome") == "ok"
                         and (a.status() or {}).get("leader") is True, timeout=30,
                         what="A leads, its history restored")
        with daemon(text.replace(str(rig.api.kubeconfig), str(theirs)), tmp_path,
                    name="b") as b:
            assert a.process is not None
            held = rig.api.hold_next(verb="update", resource="configmaps")
            rig.load.demand = 1000  # A wants 2 -> 4 and first puts it on record
            try:
                await eventually(lambda: held.arrived == 1, timeout=20, interval=0.05,
                                 what="A's ConfigMap PUT in flight")
                a.process.send_signal(signal.SIGSTOP)
                await eventually(lambda: (b.status() or {}).get("leader") is True,
                                 timeout=20, what="B leads")
                await eventually(lambda: replicas(rig) == 4, timeout=20, what="B scales 2 -> 4")
                await eventually(lambda: bool(wrote(b_user, "configmaps")), timeout=10,
                                 what="B's history written")
                since = len(rig.api.log.records)
                held.release()
            finally:
                a.process.send_signal(signal.SIGCONT)
            await eventually(lambda: rig.api.count(verb="update", resource="configmaps",
                                                   status=409) > 0, timeout=10,
                             what="A's held PUT answered 409")
            # The held PUT is A's next store write: its scale write's intents, or the record
            # of a pass that wrote nothing (every pass goes on record); either fails here.
            failed = ("writes on record: not sending",
                      "cannot put the outcome of scale writes on record")
            await eventually(lambda: bool(wrote(a_user, "configmaps", since))
                             or any(line in a.log_path.read_text() for line in failed),
                             timeout=10, what="A acting on the 409")
            assert wrote(a_user, "configmaps", since) == [], \
                "the deposed leader overwrote the new leader's history"
            assert wrote(a_user, "deployments/scale", since) == []
            assert (b.status() or {}).get("leader") is True
            now = rig.api.get("v1", "ConfigMap", "default", "autoscaler-state")
            assert now is not None
            assert _history(now)["u"], "B's scale event is not in the store"


def _history(configmap: dict[str, Any]) -> dict[str, Any]:
    """The one target's entry in the state a ConfigMap holds."""
    body = json.loads(gzip.decompress(base64.b64decode(configmap["binaryData"]["state.json.gz"])))
    (entry,) = body["targets"].values()
    return dict(entry)
