"""What a step's Event and log line say, end to end: the real daemon, a real Prometheus, the
simulated API server. Each names the rule that caused the step."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon, eventually
from tests.e2e.test_daemon import replicas, rescale_messages
from tests.e2e.test_trust import config

HELD_HIGHER = ("recent recommendations were higher than current one, applying the highest "
               "recent recommendation (8, scaleDown stabilization window 30s)")


async def test_a_step_back_up_to_the_held_recommendation_names_the_window(
    rig: Rig, tmp_path: Path,
) -> None:
    """At 8 with the load for 4, the 30 s scaleDown window holds 8; the target is scaled to 4
    by hand, where the metrics keep 4 (upstream's rescale reason is empty): the step back to
    8 is the window's, and its Event and log line say so. (Before issue 40: "fallback after
    0 passes without valid metrics", with no fallback configured.)"""
    rig.api.set_replicas("Deployment", "default", "web", 8)
    await eventually(lambda: len(rig.load.ready_pods()) == 8, timeout=20, what="8 ready pods")
    rig.load.demand = 800
    with daemon(config(rig, tmp_path, downscale="30s"), tmp_path) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=30,
                         what="a first pass")
        rig.load.demand = 400
        await asyncio.sleep(4)  # recommendations of 4, held at 8 by the window
        assert replicas(rig) == 8
        rig.api.set_replicas("Deployment", "default", "web", 4)
        await eventually(lambda: replicas(rig) == 8, timeout=20, what="back to 8")
        await eventually(lambda: any(m.startswith("New size: 8;") for m in rescale_messages(rig)),
                         timeout=10, what="the SuccessfulRescale event")
        (message,) = [m for m in rescale_messages(rig) if m.startswith("New size: 8;")]
        assert message == f"New size: 8; reason: {HELD_HIGHER}"
        (logged,) = [e for e in proc.logs() if e.get("event") == "scaled"]
        assert logged["reason"] == HELD_HIGHER
        assert "fallback" not in proc.log_path.read_text()
