"""Two daemons on one Lease, and the Lease edited by hand: its holder set to the standby,
or deleted (issue 40, item 4), and a leader frozen past its lease (SIGSTOP) that wakes to
find it released. Never two leaders, never a step the policy forbids, and one leads again."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, daemon, eventually
from tests.e2e.test_daemon import replicas
from tests.e2e.test_trust import (
    LEADER_ELECTION,
    UP_TWO_PODS_PER_15S,
    config,
    hold,
    without_state_file,
)

LEASE = ("coordination.k8s.io/v1", "Lease", "default", "autoscaler")
B_USER = "system:serviceaccount:b"


def two_daemon_config(rig: Rig, tmp_path: Path) -> tuple[str, str]:
    """A's config, and B's: the same but for B's own token, so the API server's log tells
    their writes apart."""
    theirs = rig.api.write_kubeconfig(tmp_path / "b.kubeconfig", token="b-token")
    rig.api.add_token("b-token", B_USER)
    text = without_state_file(config(rig, tmp_path, behavior=UP_TWO_PODS_PER_15S,
                                     downscale="0s", extra_daemon=LEADER_ELECTION), tmp_path)
    return text, text.replace(str(rig.api.kubeconfig), str(theirs))


def leads(proc: DaemonProcess) -> bool:
    return (proc.status() or {}).get("leader") is True


async def leaders_over(procs: tuple[DaemonProcess, ...], seconds: float) -> list[tuple[bool, ...]]:
    """Who says it leads (``/status``), every 50 ms for ``seconds``."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(tuple(await asyncio.gather(*(asyncio.to_thread(leads, p) for p in procs))))
        await asyncio.sleep(0.05)
    return seen


def ended_at(proc: DaemonProcess) -> datetime | None:
    """When ``proc`` logged that its term ended because someone else wrote the Lease."""
    for entry in proc.logs():
        if str(entry.get("event", "")).startswith("leadership ended"):
            return datetime.fromisoformat(str(entry["timestamp"]).replace("Z", "+00:00"))
    return None


def edit_holder_to(b: DaemonProcess) -> Any:
    identity = (b.status() or {})["identity"]
    return lambda rig: rig.api.patch(*LEASE, {"spec": {"holderIdentity": identity}})


@pytest.mark.parametrize("edit", ["holder-set-to-the-standby", "deleted"])
async def test_a_lease_edited_by_hand_never_gives_two_leaders(
    rig: Rig, tmp_path: Path, edit: str,
) -> None:
    """A leads and steps 2 -> 4 (policy: 2 pods per 15 s). The Lease is then edited by
    hand. A stops leading at its next read of the Lease (a retry period, 1 s); nobody else
    leads before the edited Lease has stood for a lease duration (4 s): at no instant do
    both say ``leader: true``. Whoever leads next has A's step on record (no 4 -> 6 inside
    the 15 s period) and takes it after."""
    rig.load.demand = 200
    text_a, text_b = two_daemon_config(rig, tmp_path)
    with daemon(text_a, tmp_path, name="a") as a:
        await eventually(lambda: leads(a) and a.target().get("lastOutcome") == "ok",
                         timeout=30, what="A leads, its history restored")
        with daemon(text_b, tmp_path, name="b") as b:
            await eventually(lambda: b.status() is not None, timeout=20, what="B up")
            rig.load.demand = 1000
            await eventually(lambda: replicas(rig) == 4, timeout=20, what="A steps 2 -> 4")
            stepped = time.monotonic()
            edited = datetime.now(UTC)
            if edit == "deleted":
                rig.api.delete(*LEASE)
            else:
                edit_holder_to(b)(rig)
            seen = await leaders_over((a, b), 6.0)
            assert not any(all(both) for both in seen), "A and B both said leader: true"
            await eventually(lambda: leads(a) or leads(b), timeout=10, what="a leader again")
            end = ended_at(a)
            assert end is not None, "A never said its term ended"
            print(f"Lease {edit} by hand -> A's term ended after "
                  f"{(end - edited).total_seconds():.3f} s")
            await hold(lambda: replicas(rig) == 4, until=stepped + 14,
                       what="a second step inside the policy's 15 s period")
            await eventually(lambda: replicas(rig) == 6, timeout=20, what="4 -> 6 after it")


async def test_a_leader_frozen_past_its_lease_reads_the_history_again(
    rig: Rig, tmp_path: Path,
) -> None:
    """A leads; SIGSTOP. B takes the Lease, steps 2 -> 4 and stops (releasing the Lease).
    SIGCONT: A finds the Lease free and takes it back, in a new term, so it reads the
    history again, as a fresh leader does, and waits out B's 15 s period, rather than
    acting on what it knew before it was stopped."""
    rig.load.demand = 200
    text_a, text_b = two_daemon_config(rig, tmp_path)
    with daemon(text_a, tmp_path, name="a") as a:
        await eventually(lambda: leads(a) and a.target().get("lastOutcome") == "ok",
                         timeout=30, what="A leads, its history restored")
        assert a.process is not None
        with daemon(text_b, tmp_path, name="b") as b:
            await eventually(lambda: b.status() is not None, timeout=20, what="B up")
            a.process.send_signal(signal.SIGSTOP)
            try:
                await eventually(lambda: leads(b) and b.target().get("lastOutcome") == "ok",
                                 timeout=20, what="B leads")
                rig.load.demand = 1000
                await eventually(lambda: replicas(rig) == 4, timeout=20, what="B steps 2 -> 4")
                stepped = time.monotonic()
                assert await b.stop_async() == 0
            finally:
                a.process.send_signal(signal.SIGCONT)
        await eventually(lambda: leads(a), timeout=10, what="A leads again")
        await hold(lambda: replicas(rig) == 4, until=stepped + 14,
                   what="a second step inside B's 15 s period")
        await eventually(lambda: replicas(rig) == 6, timeout=20, what="4 -> 6 after it")
        restores = [e for e in a.logs() if e.get("event") == "history restored"]
        assert len(restores) == 2, "A did not read the history again on taking the Lease back"
