"""An edited target, end to end: the real daemon, a real Prometheus, the simulated API
server. Upstream reconciles an HPA at once when its spec changes (kubernetes#138294) and
says which generation its status was computed from (kubernetes#138228, #138653); so does
the daemon for a target whose table a reload changed."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon, eventually
from tests.e2e.test_daemon import replicas
from tests.e2e.test_trust import config


async def test_an_edited_target_is_acted_on_at_once_and_says_its_generation(
    rig: Rig, tmp_path: Path,
) -> None:
    """Sync period 30 s; web at 2, its load right for 2. After the first pass /status shows
    the generation acted on, on the target and on each condition. minReplicas 1 -> 4 by a
    SIGHUP reload: the new generation shows, and the pass that acts on it (4 replicas,
    observedGeneration caught up) comes within seconds, not at the next 30 s start."""
    rig.api.set_replicas("Deployment", "default", "web", 2)
    await eventually(lambda: len(rig.load.ready_pods()) == 2, timeout=20, what="2 ready pods")
    rig.load.demand = 200
    # The first pass is at the start: with a 30 s period it must find the pods' load.
    await asyncio.to_thread(rig.prometheus.wait_for, "app_load", lambda found: len(found) >= 2,
                            timeout=20)
    text = config(rig, tmp_path).replace('syncPeriod = "1s"', 'syncPeriod = "30s"')
    with daemon(text, tmp_path) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=30,
                         what="a first pass")
        first = proc.target()
        old = first["generation"]
        assert first["observedGeneration"] == old
        assert {c.get("observedGeneration") for c in first["conditions"]} == {old}
        assert replicas(rig) == 2
        proc.config.write_text(proc.config.read_text().replace("minReplicas = 1",
                                                               "minReplicas = 4"))
        sent = time.monotonic()
        assert proc.process is not None
        proc.process.send_signal(signal.SIGHUP)
        await eventually(lambda: proc.target().get("generation") not in (None, old),
                         timeout=10, interval=0.1, what="the new generation in /status")
        new = proc.target()["generation"]
        await eventually(lambda: proc.target().get("observedGeneration") == new
                         and replicas(rig) == 4, timeout=10, interval=0.1,
                         what="a pass on the new generation")
        acted = time.monotonic() - sent
        print(f"an edited target was acted on {acted:.1f}s after SIGHUP (sync period 30 s)")
        body = proc.target()
        stamped = {c["type"]: c.get("observedGeneration") for c in body["conditions"]}
        assert stamped["AbleToScale"] == new
