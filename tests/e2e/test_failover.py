"""A real failover: two daemons, the leader SIGKILLed the moment its PUT /scale succeeded;
the standby takes the lease and does not take a step the policy forbids."""

from __future__ import annotations

from pathlib import Path

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
