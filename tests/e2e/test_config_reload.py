"""A config file rewritten in place while the daemon watches it, end to end: the real
daemon, a real Prometheus, the simulated API server. A half-written file is never applied;
a whole one is, a few seconds later than it would be at once."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, daemon, eventually
from tests.e2e.test_daemon import replicas
from tests.e2e.test_trust import config, hold


def rewrite_in_place(path: Path, *parts: bytes, pause: float = 0.0) -> float:
    """Truncate ``path`` and write ``parts`` into the same file (same inode), ``pause``
    seconds between them, as an editor or ``cat >`` does; returns when the last part was
    written (monotonic)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        for index, part in enumerate(parts):
            if index:
                time.sleep(pause)
            os.write(descriptor, part)
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return time.monotonic()


def reloaded_after(proc: DaemonProcess, count: int) -> bool:
    """More than ``count`` reloads applied so far."""
    return sum(e.get("event") == "config reloaded" for e in proc.logs()) > count


async def test_a_file_paused_mid_write_is_not_applied_and_a_whole_one_is(
    rig: Rig, tmp_path: Path,
) -> None:
    """At 8 replicas, the file rewritten in place with a 4.5 s pause right after
    ``maxReplicas = 1`` (of ``maxReplicas = 10``): the cut is held, never applied (before
    issue 40: 8 -> 1 -> 4 -> 8). Then a whole in-place change to ``maxReplicas = 6`` is
    applied within the polls it waits (6 to 8 s: it lowers a bound), and one back to
    ``maxReplicas = 10`` within 2 to 4 s."""
    rig.api.set_replicas("Deployment", "default", "web", 8)
    await eventually(lambda: len(rig.load.ready_pods()) == 8, timeout=20, what="8 ready pods")
    rig.load.demand = 800
    with daemon(config(rig, tmp_path), tmp_path) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=30,
                         what="a first pass")
        whole = proc.config.read_bytes()
        cut = whole.index(b"maxReplicas = 10") + len(b"maxReplicas = 1")
        await asyncio.to_thread(rewrite_in_place, proc.config, whole[:cut], whole[cut:],
                                pause=4.5)
        await hold(lambda: replicas(rig) == 8, until=time.monotonic() + 6,
                   what="the half-written maxReplicas = 1 applied")
        assert any(str(e.get("event", "")).startswith("config file changed in place and would "
                                                       "take from the targets")
                   for e in proc.logs()), "the hold was not said"
        reloads = sum(e.get("event") == "config reloaded" for e in proc.logs())
        written = await asyncio.to_thread(
            rewrite_in_place, proc.config, whole.replace(b"maxReplicas = 10", b"maxReplicas = 6"))
        await eventually(lambda: replicas(rig) == 6, timeout=15, interval=0.1,
                         what="the whole change applied")
        print(f"a whole in-place change lowering maxReplicas applied "
              f"{time.monotonic() - written:.1f}s after it was written")
        assert reloaded_after(proc, reloads)
        assert time.monotonic() - written > 4  # held as suspect: never at the first poll
        reloads = sum(e.get("event") == "config reloaded" for e in proc.logs())
        written = await asyncio.to_thread(rewrite_in_place, proc.config, whole)
        await eventually(lambda: reloaded_after(proc, reloads), timeout=10,
                         interval=0.1, what="a whole in-place change that takes nothing")
        print(f"a whole in-place change raising maxReplicas applied "
              f"{time.monotonic() - written:.1f}s after it was written")
        await eventually(lambda: replicas(rig) == 8, timeout=15, what="8 again")
