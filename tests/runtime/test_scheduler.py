"""The scheduler: batching by sync period, no overlapping passes, leader gating, drain.

The tests run in fake time (looptime): the event loop's clock only moves when every task
waits, by exactly what they wait for, so each period and hold below is exact, and none of
these tests sleeps for real."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from autoscaler.runtime.scheduler import Scheduler

pytestmark = pytest.mark.looptime


@dataclass(frozen=True)
class Target:
    key: str
    sync_period: float


def now() -> float:
    return asyncio.get_running_loop().time()


def scheduler_for(run_pass: Any, **options: Any) -> Scheduler:
    """A scheduler on the event loop's (fake) clock."""
    return Scheduler(run_pass, monotonic=now, **options)


class Recorder:
    """Collects passes; each pass can be held open to stand for a slow pass."""

    def __init__(self, hold: float = 0.0) -> None:
        self.passes: list[list[str]] = []
        self.started: list[float] = []
        self.ended: list[float] = []
        self.hold = hold
        self.running = self.max_running = 0

    async def __call__(self, targets: Sequence[Any], deadline: float) -> None:
        self.passes.append(sorted(t.key for t in targets))
        self.started.append(now())
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(self.hold)
        finally:
            self.running -= 1
            self.ended.append(now())


async def run_for(scheduler: Scheduler, seconds: float) -> None:
    """Run the scheduler for ``seconds`` of loop time, then stop and drain it."""
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait_for(task, 2)
    await scheduler.drain(2)


async def run_until(scheduler: Scheduler, done: Callable[[], bool], *, timeout: float) -> None:
    """Run the scheduler until ``done()`` holds (checked every 10 ms of loop time) or
    ``timeout`` seconds of loop time pass, then stop and drain it."""
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    limit = now() + timeout
    while now() < limit and not done():  # noqa: ASYNC110 - done() reads the recorder
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    await scheduler.drain(2)


async def test_targets_sharing_a_period_run_in_one_pass() -> None:
    """Targets with the same sync period are reconciled together (their queries batch)."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0, rng=random.Random(1))
    scheduler.set_targets([Target("a", 0.2), Target("b", 0.2), Target("c", 10)])
    await run_until(scheduler, lambda: recorder.passes.count(["a", "b"]) == 2, timeout=5)
    assert recorder.passes[0] in (["a", "b"], ["c"])
    assert recorder.passes.count(["a", "b"]) == 2
    assert recorder.passes.count(["c"]) == 1  # its period is 10 s
    first, second = (at for at, keys in zip(recorder.started, recorder.passes, strict=True)
                     if keys == ["a", "b"])
    assert second - first == pytest.approx(0.2, abs=0.011)  # one period apart, no sooner


async def test_a_target_in_flight_is_not_reconciled_twice() -> None:
    """A pass slower than the period makes the next pass skip, never overlap."""
    recorder = Recorder(hold=0.35)
    scheduler = scheduler_for(recorder, jitter=0)
    scheduler.set_targets([Target("a", 0.1)])
    await run_until(scheduler, lambda: len(recorder.passes) == 2, timeout=5)
    assert recorder.max_running == 1
    assert len(recorder.passes) == 2
    # The passes due at 0.1, 0.2 and 0.3 s were skipped: the next began after the first ended.
    assert recorder.started[1] >= recorder.ended[0]
    assert recorder.started[1] - recorder.ended[0] <= 0.1 + 0.011  # and within a period


async def test_no_pass_while_not_leader() -> None:
    """With the gate closed (standby), nothing runs; opening it starts passes."""
    recorder = Recorder()
    leader = False
    scheduler = scheduler_for(recorder, jitter=0, may_run=lambda key: leader)
    scheduler.set_targets([Target("a", 0.1)])
    await run_for(scheduler, 5.0)  # fifty periods
    assert recorder.passes == []
    leader = True
    scheduler.poke()
    await run_for(scheduler, 0.15)
    assert recorder.passes


async def test_the_gate_is_per_target() -> None:
    """A pass includes only the targets the gate lets run; a target let in later runs at
    once, not a period later (its group kept its due time while none of it could run)."""
    recorder = Recorder()
    allowed = {"a"}
    scheduler = scheduler_for(recorder, jitter=0, may_run=lambda key: key in allowed)
    scheduler.set_targets([Target("a", 10), Target("b", 10), Target("c", 60)])
    await run_for(scheduler, 1.0)
    assert recorder.passes == [["a"]]
    allowed.add("c")
    scheduler.poke()
    await run_for(scheduler, 0.5)
    assert recorder.passes == [["a"], ["c"]]


async def test_the_gate_is_asked_again_as_a_pass_starts() -> None:
    """A target the gate closes on between a pass's launch and its first step (a ring
    bucket lost meanwhile) is left out of it: the reconciler would give it a state again, for
    a target another member now holds. A pass left with no target is not run."""
    recorder = Recorder()
    allowed = {"a", "b"}
    scheduler = scheduler_for(recorder, jitter=0, may_run=lambda key: key in allowed)
    scheduler.set_targets([Target("a", 10), Target("b", 10)])
    scheduler._start([Target("a", 10), Target("b", 10)], 10, now())
    allowed.discard("b")
    await scheduler.drain(2)
    assert recorder.passes == [["a"]]
    scheduler._start([Target("b", 10)], 10, now())
    await scheduler.drain(2)
    assert recorder.passes == [["a"]]


async def test_a_pass_leaves_out_a_target_a_reload_removed_since_its_launch() -> None:
    """A pass launched, then a reload removes one of its targets before the pass's first
    step: the reconciler would give it a state again, decide on an empty history and write
    a workload no longer autoscaled (review). A target changed meanwhile runs with its new
    table."""
    recorder = Recorder()
    seen: list[list[Target]] = []

    async def run_pass(targets: Sequence[Any], deadline: float) -> None:
        seen.append(list(targets))
        await recorder(targets, deadline)

    scheduler = scheduler_for(run_pass, jitter=0)
    scheduler.set_targets([Target("a", 10), Target("b", 10)])
    scheduler._start([Target("a", 10), Target("b", 10)], 10, now())
    scheduler.set_targets([Target("a", 20)])
    await scheduler.drain(2)
    assert recorder.passes == [["a"]]
    assert seen == [[Target("a", 20)]]


async def test_the_jitter_spreads_a_group_within_its_share_of_the_period() -> None:
    """Each pass of a 10 s group comes 9 to 11 s after the one before (jitter 0.1)."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0.1, rng=random.Random(7))
    scheduler.set_targets([Target("a", 10)])
    await run_until(scheduler, lambda: len(recorder.passes) == 6, timeout=120)
    gaps = [b - a for a, b in zip(recorder.started, recorder.started[1:], strict=False)]
    assert len(gaps) == 5
    assert all(9 - 0.011 <= gap <= 11 + 0.011 for gap in gaps), gaps
    assert len({round(gap, 3) for gap in gaps}) > 1  # spread, not one fixed offset


def test_set_targets_reports_removed_keys() -> None:
    """A reload that drops a target says which, so its state can be forgotten."""
    scheduler = Scheduler(Recorder())
    scheduler.set_targets([Target("a", 15), Target("b", 15)])
    assert scheduler.set_targets([Target("b", 15), Target("c", 30)]) == ["a"]


def targets_with(periods: dict[str, str], daemon: str = "") -> list[Any]:
    """Targets parsed from a config: ``name -> its sync-period line`` (empty: none)."""
    from autoscaler.config import parse_config

    text = f"[daemon]\n{daemon}\n" + "".join(
        f'[[autoscaler]]\nnamespace = "shop"\nscaleTargetRef = {{ apiVersion = "apps/v1", '
        f'kind = "Deployment", name = "{name}" }}\nmaxReplicas = 3\n{line}\n'
        for name, line in periods.items())
    return list(parse_config(text).targets)


def started(scheduler: Scheduler, targets: list[Any]) -> tuple[asyncio.Event, asyncio.Task[None]]:
    """``scheduler`` over ``targets``, its loop running until the event is set."""
    scheduler.set_targets(targets)
    stop = asyncio.Event()
    return stop, asyncio.create_task(scheduler.run(stop))


def starts_of(recorder: Recorder, name: str) -> list[float]:
    """When the passes that included ``shop/Deployment/<name>`` started."""
    key = f"shop/Deployment/{name}"
    return [at for at, keys in zip(recorder.started, recorder.passes, strict=True) if key in keys]


# KEP-6003's prototype limiter (kubernetes#138222, closed) is tested by
# rate_limiters_test.go (store 54864466320); its numbers, through our config and scheduler.
# Upstream waits its interval after each reconcile ends; ours starts a pass every period.


async def test_per_item_override_and_default_interval() -> None:
    """TestPerItemIntervalRateLimiter_PerItemOverride and _DefaultInterval: default 10 s,
    fast-item 2 s, slow-item 30 s, default-item the default."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0)
    scheduler.set_targets(targets_with({
        "fast-item": "syncPeriodSeconds = 2", "slow-item": "syncPeriodSeconds = 30",
        "default-item": ""}, daemon="syncPeriod = 10"))
    await run_for(scheduler, 30.5)
    assert starts_of(recorder, "fast-item") == pytest.approx(
        [2.0 * n for n in range(16)], abs=0.011)
    assert starts_of(recorder, "slow-item") == pytest.approx([0.0, 30.0], abs=0.011)
    assert starts_of(recorder, "default-item") == pytest.approx(
        [0.0, 10.0, 20.0, 30.0], abs=0.011)


async def test_removed_override_falls_back_to_the_default() -> None:
    """TestPerItemIntervalRateLimiter_RemoveItem: 3 s, then the default 10 s once a reload
    drops the target's own period (from the surviving 10 s group's phase)."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0)
    scheduler.set_targets(targets_with({"item": "syncPeriodSeconds = 3", "other": ""},
                                       daemon="syncPeriod = 10"))
    await run_for(scheduler, 9.5)
    assert starts_of(recorder, "item") == pytest.approx([0.0, 3.0, 6.0, 9.0], abs=0.011)
    scheduler.set_targets(targets_with({"item": "", "other": ""}, daemon="syncPeriod = 10"))
    await run_for(scheduler, 21.0)  # to 30.5 s of loop time
    # Its table changed: once at the reload (kubernetes#138294), then on the group's phase.
    later = [at for at in starts_of(recorder, "item") if at >= 9.5]
    assert later == pytest.approx([9.5, 10.0, 20.0, 30.0], abs=0.011)


def test_default_is_upstream_s_fifteen_seconds() -> None:
    """TestNewDefaultHPARateLimiter: without a period of its own or the daemon's, 15 s
    (--horizontal-pod-autoscaler-sync-period's default)."""
    (target,) = targets_with({"any": ""})
    assert target.sync_period == 15.0


# A target a reload adds or changes is due at once (kubernetes#138294: an HPA created or whose
# metadata.generation moved is enqueued with queue.Add, not after the resync period); the
# others keep their group's phase, and nothing runs more often than that.


async def reloaded(scheduler: Scheduler, recorder: Recorder, first: dict[str, str],
                   second: dict[str, str], *, at: float, until: float) -> None:
    """Run ``first`` (daemon period 10 s) until ``at``, reload to ``second``, run to ``until``."""
    scheduler.set_targets(targets_with(first, daemon="syncPeriod = 10"))
    await run_for(scheduler, at)
    scheduler.set_targets(targets_with(second, daemon="syncPeriod = 10"))
    await run_for(scheduler, until - at)


async def test_a_target_a_reload_adds_is_reconciled_at_once() -> None:
    """Added at 3 s to a 10 s group: a pass at 3 s, then the group's 10 s and 20 s starts;
    the group it joined keeps its phase and does not run at 3 s."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0)
    await reloaded(scheduler, recorder, {"old": ""}, {"old": "", "new": ""}, at=3.0,
                   until=20.5)
    assert starts_of(recorder, "new") == pytest.approx([3.0, 10.0, 20.0], abs=0.011)
    assert starts_of(recorder, "old") == pytest.approx([0.0, 10.0, 20.0], abs=0.011)


async def test_a_target_whose_table_changed_is_reconciled_at_once() -> None:
    """Its table changed at 3 s (minReplicas added): a pass at 3 s; an unchanged target of
    the same group waits for the group's next start."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0)
    await reloaded(scheduler, recorder, {"edited": "", "same": ""},
                   {"edited": "minReplicas = 2", "same": ""}, at=3.0, until=10.5)
    assert starts_of(recorder, "edited") == pytest.approx([0.0, 3.0, 10.0], abs=0.011)
    assert starts_of(recorder, "same") == pytest.approx([0.0, 10.0], abs=0.011)
    assert recorder.passes[1] == ["shop/Deployment/edited"]  # a pass of its own


async def test_a_reload_that_changes_nothing_runs_nothing_early() -> None:
    """The same tables again (a touched file, a SIGHUP): no pass before the group's next."""
    recorder = Recorder()
    scheduler = scheduler_for(recorder, jitter=0)
    await reloaded(scheduler, recorder, {"a": "", "b": ""}, {"a": "", "b": ""}, at=3.0,
                   until=10.5)
    assert recorder.started == pytest.approx([0.0, 10.0], abs=0.011)


async def test_a_changed_target_in_flight_runs_when_its_pass_ends() -> None:
    """Changed at 1 s while its pass (0 to 2 s) is still running: never two at once, and
    the change is acted on at 2 s, not at the group's next start."""
    recorder = Recorder(hold=2.0)
    scheduler = scheduler_for(recorder, jitter=0)
    await reloaded(scheduler, recorder, {"a": ""}, {"a": "minReplicas = 2"}, at=1.0, until=5.0)
    assert recorder.max_running == 1
    assert starts_of(recorder, "a") == pytest.approx([0.0, 2.0], abs=0.011)


async def test_a_changed_target_waits_for_leadership() -> None:
    """A standby runs nothing, changed or not; once leader, the change runs at once."""
    recorder = Recorder()
    leader = True
    scheduler = scheduler_for(recorder, jitter=0, may_run=lambda key: leader)
    scheduler.set_targets(targets_with({"a": ""}, daemon="syncPeriod = 10"))
    await run_for(scheduler, 1.0)
    leader = False
    scheduler.set_targets(targets_with({"a": "minReplicas = 2"}, daemon="syncPeriod = 10"))
    await run_for(scheduler, 2.0)
    assert starts_of(recorder, "a") == pytest.approx([0.0], abs=0.011)
    leader = True
    scheduler.poke()
    await run_for(scheduler, 1.0)
    assert starts_of(recorder, "a") == pytest.approx([0.0, 3.0], abs=0.011)


async def test_targets_gained_run_at_once_and_their_group_keeps_its_phase() -> None:
    """A ring member that gains a bucket at 3 s runs its targets then, not at the group's
    next start (10 s); the group still starts at 10 s."""
    recorder = Recorder()
    a, b = "shop/Deployment/a", "shop/Deployment/b"
    owned = {a}
    scheduler = scheduler_for(recorder, jitter=0, may_run=lambda key: key in owned)
    scheduler.set_targets(targets_with({"a": "", "b": ""}, daemon="syncPeriod = 10"))
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(3.0)
    owned.add(b)
    scheduler.run_now([b, "shop/Deployment/not-configured"])
    await asyncio.sleep(8.0)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert starts_of(recorder, "b") == pytest.approx([3.0, 10.0], abs=0.011)
    assert starts_of(recorder, "a") == pytest.approx([0.0, 10.0], abs=0.011)


async def test_idle_waits_for_the_passes_over_the_given_targets_only() -> None:
    """A bucket handed over waits for its own targets' pass (to 2 s), bounded."""
    recorder = Recorder(hold=2.0)
    scheduler = scheduler_for(recorder, jitter=0)
    scheduler.set_targets(targets_with({"a": ""}, daemon="syncPeriod = 10"))
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(0.5)
    assert await scheduler.idle(["other"], timeout=5.0)
    assert now() == pytest.approx(0.5, abs=0.011)
    assert not await scheduler.idle(["shop/Deployment/a"], timeout=0.5)
    assert await scheduler.idle(["shop/Deployment/a"], timeout=5.0)
    assert now() == pytest.approx(2.0, abs=0.011)
    stop.set()
    await asyncio.wait_for(task, 2)


async def test_changed_targets_the_gate_holds_back_are_not_looked_at_every_wake() -> None:
    """A ring member starts with every configured target new and holds a fifth of them: the
    others were asked about at every wake (twice a second here, 10,000 keys at 10,000
    targets). Asked once, then again only after a poke; those it may run ran at once."""
    recorder = Recorder()
    asked: list[str] = []
    mine = {"shop/Deployment/t0", "shop/Deployment/t5"}

    def may_run(key: str) -> bool:
        asked.append(key)
        return key in mine

    scheduler = scheduler_for(recorder, jitter=0, may_run=may_run)
    scheduler.set_targets(targets_with({f"t{i}": "" for i in range(10)},
                                       daemon="syncPeriod = 30"))
    await run_for(scheduler, 10.0)
    others = [key for key in asked if key not in mine]
    assert len(others) <= 2 * 8  # the group's first look and the changed ones' one look
    assert sorted(recorder.passes[0]) == sorted(mine)
    asked.clear()
    mine.add("shop/Deployment/t1")
    scheduler.poke()  # the gate may have opened: the held-back ones are asked again
    await run_for(scheduler, 1.0)
    assert "shop/Deployment/t1" in asked
    assert starts_of(recorder, "t1") == pytest.approx([10.0], abs=0.011)


async def test_the_gate_is_asked_about_the_candidates_only() -> None:
    """A ring member names the targets of the buckets it holds (the candidates, a superset
    of what its gate lets run): the gate is asked about those only, at every wake and about
    changed targets, never about the rest of the fleet. They run in configured order, every
    period; a target that joins later runs at once (``run_now``), and a group due while
    none of it was a candidate runs at the first wake that finds one, not a period later."""
    names = [f"t{i:02d}" for i in range(50)]
    keys = [f"shop/Deployment/{name}" for name in names]
    held = {keys[40], keys[3], keys[17]}
    asked: set[str] = set()
    passes: list[tuple[float, list[str]]] = []

    async def run_pass(targets: Sequence[Any], deadline: float) -> None:
        passes.append((now(), [t.key for t in targets]))

    def may_run(key: str) -> bool:
        asked.add(key)
        return key in held

    scheduler = scheduler_for(run_pass, jitter=0, may_run=may_run, candidates=lambda: held)
    scheduler.set_targets(targets_with(dict.fromkeys(names, ""), daemon="syncPeriod = 10"))
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(25.0)
    assert asked == held
    in_order = [keys[3], keys[17], keys[40]]
    assert passes == [(pytest.approx(at, abs=0.011), in_order) for at in (0.0, 10.0, 20.0)]
    held.add(keys[5])
    scheduler.run_now([keys[5]])
    await asyncio.sleep(1.0)
    assert passes[3] == (pytest.approx(25.0, abs=0.011), [keys[5]])
    assert asked == held
    stop.set()
    await asyncio.wait_for(task, 2)

    passes.clear()
    held.clear()
    scheduler = scheduler_for(run_pass, jitter=0, may_run=may_run, candidates=lambda: held)
    scheduler.set_targets(targets_with(dict.fromkeys(names, ""), daemon="syncPeriod = 10"))
    task = asyncio.create_task(scheduler.run(stop := asyncio.Event()))
    start = now()
    await asyncio.sleep(3.0)
    held.add(keys[7])  # no poke: the group kept its due time, and a wake comes each second
    await asyncio.sleep(2.0)
    stop.set()
    await asyncio.wait_for(task, 2)
    ((at, ran),) = passes
    assert ran == [keys[7]]
    assert 3.0 <= at - start <= 4.0 + 0.011


async def test_passes_list_their_targets_in_configured_order_not_sorted() -> None:
    """A pass lists its targets as the config does, whether its group started or a reload
    changed them, and a ring member's candidates come in any order: walked from the group's
    keys (configured here from t49 down to t00)."""
    names = [f"t{i:02d}" for i in reversed(range(50))]
    keys = {name: f"shop/Deployment/{name}" for name in names}
    held = {keys["t03"], keys["t40"], keys["t17"], keys["t22"]}
    passes: list[list[str]] = []

    async def run_pass(targets: Sequence[Any], deadline: float) -> None:
        passes.append([t.key for t in targets])

    scheduler = scheduler_for(run_pass, jitter=0, may_run=lambda key: key in held,
                              candidates=lambda: held)
    stop, task = started(scheduler, targets_with(dict.fromkeys(names, ""),
                                                 daemon="syncPeriod = 10"))
    await asyncio.sleep(1.0)
    configured = [keys[n] for n in ("t40", "t22", "t17", "t03")]
    assert passes == [configured]
    changed = {**dict.fromkeys(names, ""), "t03": "minReplicas = 2", "t40": "minReplicas = 2",
               "t22": "minReplicas = 2"}
    scheduler.set_targets(targets_with(changed, daemon="syncPeriod = 10"))
    await asyncio.sleep(1.0)
    assert passes[1] == [keys[n] for n in ("t40", "t22", "t03")]
    stop.set()
    await asyncio.wait_for(task, 2)


async def test_a_ring_member_parks_only_its_candidates_and_a_claim_still_runs_the_rest() -> None:
    """At its start every configured target is changed; a ring member's gate holds back all
    but its candidates. Only candidates are parked (the fleet's others never run here but by
    a claim, which makes them due with ``run_now``): a target changed while another
    member's, whose bucket is then claimed, runs at once, not at its group's next start."""
    names = [f"t{i:02d}" for i in range(50)]
    keys = [f"shop/Deployment/{name}" for name in names]
    held = {keys[3]}
    allowed = {keys[3]}
    passes: list[tuple[float, list[str]]] = []

    async def run_pass(targets: Sequence[Any], deadline: float) -> None:
        passes.append((now(), [t.key for t in targets]))

    scheduler = scheduler_for(run_pass, jitter=0, may_run=lambda key: key in allowed,
                              candidates=lambda: held)
    stop, task = started(scheduler, targets_with(dict.fromkeys(names, ""),
                                                 daemon="syncPeriod = 30"))
    await asyncio.sleep(1.0)
    assert [ran for _, ran in passes] == [[keys[3]]]
    assert scheduler._parked == set()
    scheduler.set_targets(targets_with({**dict.fromkeys(names, ""), "t07": "minReplicas = 2"},
                                       daemon="syncPeriod = 30"))
    await asyncio.sleep(1.0)
    assert scheduler._parked == set()
    held.add(keys[7])  # its bucket claimed
    allowed.add(keys[7])
    scheduler.run_now([keys[7]])
    await asyncio.sleep(1.0)
    assert passes[-1] == (pytest.approx(2.0, abs=0.011), [keys[7]])
    stop.set()
    await asyncio.wait_for(task, 2)
