"""A wall-clock step or skew never changes a decision, end to end: the real daemon, a real
Prometheus and the simulated API server (whose clock, and whose ``Date`` header, is the
machine's). A test cannot step the machine's clock: it steps the daemon's, through the one
wall-clock source the daemon reads (``autoscaler/runtime/clock.py``'s test hook).

Each test checks both halves together: no step before the earliest instant the rules allow
(a window or period counted on a clock that jumped forward), and no step later than one pass
after it (one that jumped back). Times are the test's monotonic clock."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from autoscaler.runtime.clock import TEST_WALL_CLOCK_OFFSET
from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, daemon, eventually
from tests.e2e.test_daemon import replicas
from tests.e2e.test_landed import WITHIN_A_PASS, first_change, low_load_in_prometheus
from tests.e2e.test_trust import LEADER_ELECTION, config, without_state_file

STEP = 120.0
"""The wall-clock step, seconds."""
WINDOW = 30.0
PERIOD = 30.0

WINDOW_30S = """
[autoscaler.behavior.scaleDown]
stabilizationWindowSeconds = 30
policies = [{ type = "Percent", value = 100, periodSeconds = 15 }]

[autoscaler.behavior.scaleUp]
stabilizationWindowSeconds = 0
"""

DOWN_ONE_POD_PER_30S = """
[autoscaler.behavior.scaleDown]
stabilizationWindowSeconds = 0
policies = [{ type = "Pods", value = 1, periodSeconds = 30 }]

[autoscaler.behavior.scaleUp]
stabilizationWindowSeconds = 0
"""


async def hold(rig: Rig, start: int, *, until: float, what: str) -> None:
    """The target stays at ``start`` replicas until the monotonic instant ``until``; if not,
    the failure says what it went to and how early."""
    while (now := time.monotonic()) < until:
        count = replicas(rig)
        assert count == start, (f"{what}: {start} -> {count} {until - now:.1f} s before the "
                                "earliest the rules allow")
        await asyncio.sleep(0.1)


def clock_file(tmp_path: Path, name: str, offset: float = 0.0) -> tuple[Path, dict[str, str]]:
    """A daemon's wall-clock offset file (``offset`` seconds), and the environment naming it."""
    path = tmp_path / f"{name}.clock"
    path.write_text(f"{offset}\n")
    return path, {TEST_WALL_CLOCK_OFFSET: str(path)}


async def ready_pods(rig: Rig, count: int, demand: float) -> None:
    rig.api.set_replicas("Deployment", "default", "web", count)
    await eventually(lambda: len(rig.load.ready_pods()) == count, timeout=20,
                     what=f"{count} ready pods")
    rig.load.demand = demand


@pytest.mark.parametrize("step", [STEP, -STEP], ids=["forward", "back"])
async def test_a_clock_step_inside_the_scale_down_window_moves_nothing(
    rig: Rig, tmp_path: Path, step: float,
) -> None:
    """8 pods, load for 8, then load for 2 under a 30 s scale-down window. 5 s after the drop
    the daemon's wall clock steps ``step`` seconds: the target holds 8 until the window has
    passed since the last recommendation of 8, and goes 8 -> 2 within a pass of it."""
    await ready_pods(rig, 8, demand=800)
    offset, env = clock_file(tmp_path, "daemon")
    text = config(rig, tmp_path, behavior=WINDOW_30S, downscale="30s")
    with daemon(text, tmp_path, env=env) as proc:
        await eventually(lambda: proc.target().get("lastOutcome") == "ok"
                         and proc.target().get("desiredReplicas") == 8, timeout=30,
                         what="a steady pass at 8")
        rig.load.demand = 200
        await low_load_in_prometheus(rig, below=30)
        dropped = time.monotonic()  # the last pass that recommended 8 ran before this
        await asyncio.sleep(5)
        offset.write_text(f"{step}\n")
        earliest = dropped + WINDOW - 1.2  # that pass was at most one period (+10 %) before
        await hold(rig, 8, until=earliest,
                   what=f"a step inside the {WINDOW:.0f} s window after a {step:+.0f} s "
                        "clock step")
        count, seen = await first_change(rig, 8, timeout=dropped + WINDOW + 20
                                         - time.monotonic())
    late = seen - (dropped + WINDOW)
    print(f"clock stepped {step:+.0f} s in a {WINDOW:.0f} s window: 8 -> {count} "
          f"{seen - dropped:.2f} s after the drop ({late:+.2f} s against the window's end)")
    assert count == 2
    assert late <= WITHIN_A_PASS, f"the step came {late:.1f} s late"


@pytest.mark.parametrize("step", [STEP, -STEP], ids=["forward", "back"])
async def test_a_clock_step_inside_a_policy_period_moves_nothing(
    rig: Rig, tmp_path: Path, step: float,
) -> None:
    """6 pods, load for 1, scaleDown 1 pod per 30 s: 6 -> 5; 5 s later the daemon's wall
    clock steps ``step`` seconds: 5 -> 4 comes 30 s after the first write, not before, and
    within a pass of it."""
    await ready_pods(rig, 6, demand=100)
    offset, env = clock_file(tmp_path, "daemon")
    answered: list[float] = []
    rig.api.after_next(verb="update", resource="deployments/scale",
                       action=lambda: answered.append(time.monotonic()))
    text = config(rig, tmp_path, behavior=DOWN_ONE_POD_PER_30S, downscale="0s")
    with daemon(text, tmp_path, env=env):
        await eventually(lambda: bool(answered), timeout=30, what="the first step, 6 -> 5")
        await asyncio.sleep(5)
        offset.write_text(f"{step}\n")
        earliest = answered[0] + PERIOD
        await hold(rig, 5, until=earliest - 0.1,
                   what=f"a step inside the {PERIOD:.0f} s period after a {step:+.0f} s "
                        "clock step")
        count, seen = await first_change(rig, 5, timeout=earliest + 20 - time.monotonic())
    late = seen - earliest
    print(f"clock stepped {step:+.0f} s in a {PERIOD:.0f} s period: 5 -> {count} "
          f"{late:+.2f} s after the earliest the policy allows")
    assert count == 4
    assert late <= WITHIN_A_PASS, f"the step came {late:.1f} s late"


@pytest.mark.parametrize("skew", [-100.0, 100.0], ids=["behind", "ahead"])
async def test_history_from_a_leader_with_a_skewed_clock_keeps_the_policy(
    rig: Rig, tmp_path: Path, skew: float,
) -> None:
    """Leader election, history in a ConfigMap. Leader A's clock is ``skew`` seconds off the
    API server's (and B's): A takes 6 -> 5 under scaleDown 1 pod per 30 s and hands over
    (SIGTERM). B leads from A's history: 5 -> 4 comes 30 s after A's write, not before (a
    clock behind made A's step look older), and within a pass of it (a clock ahead, newer)."""
    await ready_pods(rig, 6, demand=100)
    text = without_state_file(config(rig, tmp_path, behavior=DOWN_ONE_POD_PER_30S,
                                     downscale="0s", extra_daemon=LEADER_ELECTION), tmp_path)
    answered: list[float] = []
    rig.api.after_next(verb="update", resource="deployments/scale",
                       action=lambda: answered.append(time.monotonic()))
    _, skewed = clock_file(tmp_path, "a", skew)
    with daemon(text, tmp_path, name="a", env=skewed) as a:
        await eventually(lambda: bool(answered), timeout=30, what="A's step, 6 -> 5")
        assert await a.stop_async() == 0
    earliest = answered[0] + PERIOD
    with daemon(text, tmp_path, name="b") as b:
        await eventually(lambda: (b.status() or {}).get("leader") is True, timeout=20,
                         what="B leads")
        await hold(rig, 5, until=earliest - 0.1,
                   what=f"a step inside the {PERIOD:.0f} s period of A's write (A's clock "
                        f"{skew:+.0f} s)")
        count, seen = await first_change(rig, 5, timeout=earliest + 20 - time.monotonic())
        shifts = moved_by(b)
    late = seen - earliest
    # A's times belong -skew s away on B's clock; B moves them to the end of what the Date
    # headers allow that holds periods longer (history_shift): a hold by design, up to ~2 s.
    assert shifts, "the skew was not noticed"
    held = shifts[-1] + skew
    print(f"A's clock {skew:+.0f} s: B's first step 5 -> {count} {late:+.2f} s after the "
          f"earliest the policy allows (history moved by {shifts[-1]:+.2f} s)")
    assert count == 4
    assert 0.0 <= held <= 2.0 + 0.1, f"the stored times were moved by {shifts[-1]:.2f} s"
    assert late <= WITHIN_A_PASS + held, f"the step came {late:.1f} s late ({held:.2f} s held)"


def moved_by(proc: DaemonProcess) -> list[float]:
    """The shifts ``proc`` said it moved a saved history's timestamps by."""
    return [float(e["shift_seconds"]) for e in proc.logs()
            if str(e.get("event", "")).startswith("the saved history was written on a clock "
                                                  "that differs")]


async def test_history_saved_before_the_machines_clock_stepped_keeps_the_policy(
    rig: Rig, tmp_path: Path,
) -> None:
    """A state file, one daemon: 6 -> 5 under scaleDown 1 pod per 30 s, a stop, the clock
    steps +120 s, a start: 5 -> 4 comes 30 s after the write, and within a pass of it."""
    await ready_pods(rig, 6, demand=100)
    text = config(rig, tmp_path, behavior=DOWN_ONE_POD_PER_30S, downscale="0s")
    answered: list[float] = []
    rig.api.after_next(verb="update", resource="deployments/scale",
                       action=lambda: answered.append(time.monotonic()))
    offset, env = clock_file(tmp_path, "daemon")
    with daemon(text, tmp_path, name="first", env=env) as first:
        await eventually(lambda: bool(answered), timeout=30, what="the step, 6 -> 5")
        assert await first.stop_async() == 0
    offset.write_text(f"{STEP}\n")
    earliest = answered[0] + PERIOD
    with daemon(text, tmp_path, name="second", env=env) as second:
        await hold(rig, 5, until=earliest - 0.1,
                   what="a step inside the period after the clock stepped")
        count, seen = await first_change(rig, 5, timeout=earliest + 20 - time.monotonic())
        shifts = moved_by(second)
    late = seen - earliest
    # The stored times are put on the new clock by comparing both runs' skews against the
    # API server's Date headers (one-second resolution), at the end of what they allow that
    # holds periods longer (runtime/timeline.history_shift): up to ~2 s past the true step.
    # That hold is by design; the step must still come within a pass of it.
    assert shifts, "the clock step was not noticed"
    held = shifts[-1] - STEP
    print(f"clock stepped +{STEP:.0f} s between two runs: 5 -> {count} {late:+.2f} s after "
          f"the earliest the policy allows (history moved by {shifts[-1]:+.2f} s)")
    assert count == 4
    assert 0.0 <= held <= 2.0 + 0.1, f"the stored times were moved by {shifts[-1]:.2f} s"
    assert late <= WITHIN_A_PASS + held, f"the step came {late:.1f} s late ({held:.2f} s held)"
