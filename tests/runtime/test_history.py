"""The history keeper: read until read, never write before, mark a clean store in use, keep a
removed target's history for as long as it can matter; with leader election, write only
while leading, claim the store at once, and never write over another writer's history."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tenacity import wait_none

from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.errors import (
    ConflictError,
    NotLeaderError,
    StateSetAsideError,
    StateUnavailableError,
    TransientError,
)
from autoscaler.runtime.history import RETAIN_REMOVED, HistoryKeeper
from autoscaler.runtime.status import TargetState
from autoscaler.snapshot import Intent, SavedTarget, Snapshot, decode

WEB, API = "shop/Deployment/web", "shop/Deployment/api"
HISTORY = History(recommendations=(Recommendation(replicas=4, timestamp=900.0),),
                  scale_down_events=(ScaleEvent(change=1, timestamp=950.0),))


@dataclass
class Store:
    """A store double: answers reads from ``reads`` in turn (an exception is raised), keeps
    every snapshot saved."""

    reads: list[Snapshot | Exception | None] = field(default_factory=list)
    saved: list[Snapshot] = field(default_factory=list)
    description: str = "test store"

    async def load(self) -> Snapshot | None:
        answer = self.reads.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def save(self, data: bytes) -> None:
        self.saved.append(decode(data))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def keeper(store: Store, states: dict[str, TargetState] | None = None,
           clock: Clock | None = None) -> HistoryKeeper:
    return HistoryKeeper(store, {} if states is None else states, clock=clock or Clock(),
                         retry_wait=wait_none())


def snapshot(*, clean: bool, journaled: bool = True, **targets: SavedTarget) -> Snapshot:
    return Snapshot(targets={key.replace("_", "/"): t for key, t in targets.items()},
                    clean=clean, saved_at=990.0, journaled=journaled)


async def test_a_failed_read_is_retried_and_nothing_is_written_meanwhile() -> None:
    """Two failures, then the snapshot: the keeper applies it; before that it refuses to
    write (a write then would overwrite the history it has not read)."""
    store = Store(reads=[StateUnavailableError("HTTP 500"), StateUnavailableError("timeout"),
                         Snapshot(targets={WEB: SavedTarget(history=HISTORY)})])
    states: dict[str, TargetState] = {}
    history = keeper(store, states)
    with pytest.raises(StateUnavailableError, match="not been read"):
        await history.persist()
    restored = await history.restore([WEB])
    assert restored.targets == 1
    assert states[WEB].history == HISTORY
    assert history.read_failures == 2
    assert store.saved == []  # an unclean snapshot needs no in-use mark


async def test_restore_waits_as_long_as_the_store_fails() -> None:
    """A store that keeps failing keeps ``restored`` unset; cancelling gives up cleanly."""

    class Down(Store):
        async def load(self) -> Snapshot | None:
            await asyncio.sleep(0)
            raise StateUnavailableError("HTTP 503")

    history = keeper(Down())
    task = asyncio.create_task(history.restore([WEB]))
    await asyncio.sleep(0.05)
    assert not history.restored.is_set()
    assert history.read_failures > 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_clean_snapshot_is_marked_in_use_and_trusted() -> None:
    """After a graceful stop nothing is missing: no gap to bridge; the store is marked
    unclean at once, so a crash later cannot pass for that clean stop."""
    store = Store(reads=[snapshot(clean=True, shop_Deployment_web=SavedTarget(history=HISTORY))])
    states: dict[str, TargetState] = {}
    await keeper(store, states).restore([WEB])
    assert [s.clean for s in store.saved] == [False]
    assert store.saved[0].targets[WEB].history == HISTORY
    assert states[WEB].bridge_gap is False


@pytest.mark.parametrize(("journaled", "bridged"), [(True, False), (False, True)],
                         ids=["written-every-pass", "written-around-scale-writes"])
async def test_after_a_crash_only_a_store_not_written_every_pass_bridges_a_gap(
    journaled: bool, bridged: bool,
) -> None:
    """After a crash: a store written after every pass holds every recommendation that
    counts, so nothing is bridged; one of the earlier format (written around scale writes
    only) lacks those made since, and the first decision bridges the gap. A pending intent
    is kept either way, for the fresh read that settles it."""
    intent = Intent(previous=2, desired=4, resource_version="7", at=995.0)
    store = Store(reads=[snapshot(clean=False, journaled=journaled,
                                  shop_Deployment_web=SavedTarget(history=HISTORY, intent=intent))])
    states: dict[str, TargetState] = {}
    await keeper(store, states).restore([WEB])
    assert states[WEB].bridge_gap is bridged
    assert states[WEB].intent == intent


async def test_an_undecodable_store_is_reported_and_targets_start_fresh() -> None:
    """Set aside by the store: restore says so (the daemon reports it loudly) and every
    target starts as upstream's would."""
    store = Store(reads=[StateSetAsideError("bad gzip", kept_as="state.unreadable-x")])
    states = {WEB: TargetState(key=WEB, history=HISTORY)}
    restored = await keeper(store, states).restore([WEB])
    assert restored.set_aside is not None
    assert restored.set_aside.kept_as == "state.unreadable-x"
    assert states[WEB].history == History()


async def test_a_removed_target_keeps_its_history_until_it_cannot_matter() -> None:
    """Removed by a reload: saved on, given back when it returns; pruned once its newest
    entry is older than upstream's longest window."""
    store, clock = Store(reads=[None]), Clock()
    states = {WEB: TargetState(key=WEB)}
    history = keeper(store, states, clock)
    await history.restore([WEB])
    states[WEB].history = HISTORY
    history.retire(states.pop(WEB))
    await history.persist()
    assert store.saved[-1].targets[WEB].history == HISTORY
    returning = TargetState(key=WEB)
    history.revive(returning)
    assert returning.history == HISTORY

    history.retire(returning)
    clock.now = 950.0 + RETAIN_REMOVED - 1  # the newest entry (950) can still matter
    await history.persist()
    assert WEB in store.saved[-1].targets
    clock.now = 950.0 + RETAIN_REMOVED + 1
    await history.persist()
    assert WEB not in store.saved[-1].targets


async def test_a_target_missing_from_the_config_at_start_is_kept() -> None:
    """Restarting without a target keeps its history in the store for when it comes back."""
    store = Store(reads=[snapshot(clean=False, journaled=False,
                                  shop_Deployment_api=SavedTarget(history=HISTORY))])
    states: dict[str, TargetState] = {}
    history = keeper(store, states)
    restored = await history.restore([WEB])
    assert restored.retired == 1
    await history.persist()
    assert store.saved[-1].targets[API].history == HISTORY
    back = TargetState(key=API)
    history.revive(back)
    assert back.history == HISTORY
    assert back.bridge_gap is True


async def test_a_write_reencodes_only_what_changed() -> None:
    """A write keeps the entry of a target nothing changed since the last (the same
    objects); a changed history or intent is written; a clean write is exact for every
    target."""
    store, clock = Store(reads=[None]), Clock()
    states = {WEB: TargetState(key=WEB, history=HISTORY), API: TargetState(key=API,
                                                                          history=HISTORY)}
    history = keeper(store, states, clock)
    await history.restore([WEB, API])
    states[WEB].history = HISTORY  # restore reset it: set it again
    states[API].history = HISTORY
    await history.persist()
    newer = History(recommendations=(Recommendation(replicas=9, timestamp=990.0),),
                    scale_down_events=HISTORY.scale_down_events)
    states[WEB].history = newer
    states[API].intent = Intent(previous=4, desired=6, resource_version="3", at=991.0)
    encoded = history._fragments[API][-1]
    await history.persist()
    assert store.saved[-1].targets[WEB].history == newer
    assert store.saved[-1].targets[API].intent == states[API].intent
    assert history._fragments[API][-1] is not encoded
    states[WEB].intent = None
    unchanged = history._fragments[API][-1]
    await history.persist()
    assert history._fragments[API][-1] is unchanged  # nothing changed: the same text
    await history.persist(clean=True)
    assert store.saved[-1].targets[WEB].history == newer
    assert store.saved[-1].clean is True


async def test_forecast_series_survive_a_restart_through_the_store() -> None:
    """A target's predicted-metric series is written with its history and restored into a
    fresh process's state, its models to be rebuilt over it."""
    from autoscaler.algorithm.forecast import Series

    series = Series(step=300.0, first=10, values=(4.0, None, 6.5), open_index=13,
                    open_sum=2.0, open_count=1)
    first = Store(reads=[None])
    states = {WEB: TargetState(key=WEB, forecasts={"0/Pods/rps": series})}
    writer = keeper(first, states)
    await writer.restore([WEB])  # an empty store: the state's series stays as it is
    states[WEB].forecasts = {"0/Pods/rps": series}
    await writer.persist(clean=True)
    written = first.saved[-1]  # decoded from the bytes the store was given
    restarted: dict[str, TargetState] = {}
    await keeper(Store(reads=[written]), restarted).restore([WEB])
    assert restarted[WEB].forecasts == {"0/Pods/rps": series}
    assert restarted[WEB].predictor is None


class FailingSaves(Store):
    """Saves fail with the errors in ``failures`` first (a ConfigMap's 500, a full disk)."""

    def __init__(self, reads: list[Snapshot | Exception | None],
                 failures: list[Exception]) -> None:
        super().__init__(reads=reads)
        self.failures = failures

    async def save(self, data: bytes) -> None:
        if self.failures:
            raise self.failures.pop(0)
        await super().save(data)


async def test_a_failed_in_use_mark_is_retried_before_anything_acts() -> None:
    """After a clean stop the store is marked in use before the keeper says it is restored;
    a failed mark (a 500, a full disk) is retried, not raised out of the restore (which
    would leave a leader that never acts)."""
    store = FailingSaves(reads=[snapshot(clean=True,
                                         shop_Deployment_web=SavedTarget(history=HISTORY))],
                         failures=[TransientError("HTTP 500"), OSError(28, "No space left")])
    history = keeper(store)
    restored = await history.restore([WEB])
    assert restored.clean
    assert history.restored.is_set()
    assert [s.clean for s in store.saved] == [False]
    assert history.read_failures == 2


async def test_the_targets_configured_when_the_read_ends_get_their_history() -> None:
    """A reload while the read was retried: the targets are taken when the read is done, so
    one added meanwhile gets its saved history and one removed meanwhile keeps its own."""
    configured = [API]
    reads: list[Snapshot | Exception | None] = [
        StateUnavailableError("HTTP 500"),
        Snapshot(targets={WEB: SavedTarget(history=HISTORY), API: SavedTarget(history=HISTORY)})]

    class Reloading(Store):
        async def load(self) -> Snapshot | None:
            answer = await super().load()
            configured[:] = [WEB]  # a SIGHUP landed during the read
            return answer

    states: dict[str, TargetState] = {}
    history = keeper(Reloading(reads=reads), states)
    restored = await history.restore(lambda: configured)
    assert states[WEB].history == HISTORY
    assert API not in states
    assert restored.retired == 1
    history.revive(states.setdefault(API, TargetState(key=API)))
    assert states[API].history == HISTORY



async def test_leadership_lost_while_the_store_is_being_read_ends_the_restore() -> None:
    """Cancelling the restore (leadership lost) while a read is in flight ends it: the
    cancellation is not taken for a failed read and retried, so the standby never goes on to
    mark the new leader's store in use (a write over its history)."""
    reading, give_up = asyncio.Event(), asyncio.Event()

    class Hanging(Store):
        async def load(self) -> Snapshot | None:
            reading.set()
            if give_up.is_set():  # the test's own cleanup: an error tenacity does not retry
                raise StateSetAsideError("test over", kept_as="-")
            await asyncio.sleep(3600)  # the API server is slow: leadership is lost meanwhile
            return None

    history = keeper(Hanging())
    task = asyncio.create_task(history.restore([WEB]))
    try:
        await asyncio.wait_for(reading.wait(), 1)
        task.cancel()
        history.invalidate()
        done, _ = await asyncio.wait({task}, timeout=1)
        assert task in done, "the restore outlived its cancellation: it is still retrying"
        assert task.cancelled()
    finally:
        give_up.set()
        task.cancel()
        await asyncio.wait({task}, timeout=1)
        task.cancel()
        await asyncio.wait({task}, timeout=1)


async def test_a_restored_forecast_bucket_number_past_any_clock_never_blocks_the_writes(
    tmp_path: Path,
) -> None:
    """A stored forecast series whose bucket number no clock reaches (10**400, an integer
    JSON reads exactly) is set aside, or dropped, at the read: it must not be restored and
    then make every later write of the history raise (OverflowError), holding every scale
    write of every target and the in-use mark's retries forever."""
    from autoscaler.adapters.local_state import FileStateStore
    from autoscaler.snapshot import pack

    big = "1" + "0" * 400
    body = ('{"version": 2, "savedAt": 990.0, "targets": {"shop/Deployment/gone": {"r": [],'
            ' "u": [], "d": [[1, 950.0, false]], "f": {"0/Pods/rps": [300.0, ' + big +
            ', [1.0], null, 0.0, 0]}}}}')
    path = tmp_path / "state"
    path.write_bytes(pack(body.encode()))
    history = HistoryKeeper(FileStateStore(path), {}, clock=Clock(), retry_wait=wait_none())
    async with asyncio.timeout(5):
        await history.restore([WEB])
        await history.persist()  # a pass putting its scale writes on record


class Shared(Store):
    """A store another writer shares: ``before_save`` runs at each save before it lands
    (that writer's turn); a save whose version is stale is a ConflictError, as the
    ConfigMap's 409, and nothing is written."""

    def __init__(self, reads: list[Snapshot | Exception | None]) -> None:
        super().__init__(reads=reads)
        self.version = self.read_version = 0
        self.before_save: list[object] = []

    async def load(self) -> Snapshot | None:
        self.read_version = self.version
        return await super().load()

    async def save(self, data: bytes) -> None:
        if self.before_save:
            turn = self.before_save.pop(0)
            if callable(turn):
                turn()
            else:
                self.version += 1  # they wrote
        if self.read_version != self.version:
            raise ConflictError("HTTP 409")
        await super().save(data)
        self.version = self.read_version = self.version + 1


EARLIER = ScaleEvent(change=2, timestamp=940.0)


def fenced(store: Store, states: dict[str, TargetState], leader: list[bool]) -> HistoryKeeper:
    return HistoryKeeper(store, states, clock=Clock(), retry_wait=wait_none(),
                         leader=lambda: leader[0])


async def test_a_leader_claims_the_store_at_once_even_after_a_crash() -> None:
    """With leader election a restore always writes once, before anything acts: a deposed
    leader's write still in flight then carries a version that is gone."""
    store = Shared(reads=[snapshot(clean=False, shop_Deployment_web=SavedTarget(
        history=HISTORY))])
    history = fenced(store, {}, [True])
    await history.restore([WEB])
    assert [s.clean for s in store.saved] == [False]
    assert store.saved[0].targets[WEB].history == HISTORY


async def test_a_store_written_between_the_read_and_the_claim_is_read_again() -> None:
    """The previous leader's last write lands after our read: our claim is a conflict, so
    the store is read again and its newer history applied (never written over)."""
    newer = History(recommendations=HISTORY.recommendations,
                    scale_down_events=(*HISTORY.scale_down_events, EARLIER))
    store = Shared(reads=[snapshot(clean=False, shop_Deployment_web=SavedTarget(
        history=HISTORY)), snapshot(clean=False, shop_Deployment_web=SavedTarget(
            history=newer))])
    store.before_save = ["theirs"]
    states: dict[str, TargetState] = {}
    history = fenced(store, states, [True])
    await history.restore([WEB])
    assert states[WEB].history == newer
    assert store.saved[-1].targets[WEB].history == newer
    assert history.conflicts == 1


async def test_only_the_leader_writes_and_a_conflict_is_never_overwritten() -> None:
    """Leadership lost by our clock: nothing is written. Led again, someone else's write
    since ours is a conflict: the store is read again, both histories are kept (their
    scale event and ours), and written, fenced again before that second write."""
    leader = [True]
    theirs = SavedTarget(history=History(scale_up_events=(EARLIER,)))
    store = Shared(reads=[None, snapshot(clean=False, shop_Deployment_web=theirs)])
    states = {WEB: TargetState(key=WEB)}
    history = fenced(store, states, leader)
    await history.restore([WEB])
    states[WEB].history = HISTORY
    leader[0] = False
    with pytest.raises(NotLeaderError):
        await history.persist()
    assert len(store.saved) == 1  # the claim only
    leader[0] = True
    store.before_save = ["theirs"]
    await history.persist()
    kept = store.saved[-1].targets[WEB].history
    assert kept.scale_up_events == (EARLIER,)
    assert kept.scale_down_events == HISTORY.scale_down_events
    assert states[WEB].history == kept


async def test_the_write_after_a_conflict_is_fenced_again() -> None:
    """The lease lapses while the store is read again after a conflict: the retry is not
    sent (a deposed leader re-reading and writing its older history over the new
    leader's was the fault)."""
    leader = [True]
    store = Shared(reads=[None, snapshot(clean=False)])
    states = {WEB: TargetState(key=WEB, history=HISTORY)}
    history = fenced(store, states, leader)
    await history.restore([WEB])
    states[WEB].history = History(scale_up_events=(EARLIER,))  # something to write

    def deposed() -> None:
        store.version += 1  # the new leader wrote
        leader[0] = False  # and our lease lapsed meanwhile
    store.before_save = [deposed]
    with pytest.raises(NotLeaderError):
        await history.persist()
    assert len(store.saved) == 1


async def test_writes_asked_for_during_a_write_share_the_next_one() -> None:
    """Outcomes known while a write is under way wait for one more write, not one each."""
    gate = asyncio.Event()

    class Slow(Store):
        async def save(self, data: bytes) -> None:
            await gate.wait()
            await super().save(data)

    store = Slow(reads=[None])
    states = {WEB: TargetState(key=WEB)}
    history = keeper(store, states)
    await history.restore([WEB])
    first = asyncio.create_task(history.persist())
    await asyncio.sleep(0)
    states[WEB].history = HISTORY  # outcomes known while the first write is under way
    rest = [asyncio.create_task(history.persist()) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, *rest)
    assert len(store.saved) == 2
    assert history.saves == 2


@pytest.mark.parametrize(("writer", "shift"), [((-100.1, -99.9), 100.2), ((99.9, 100.1), -99.8),
                                               ((-0.2, 0.2), 0.0)],
                         ids=["writer-behind", "writer-ahead", "same-clock"])
async def test_a_restore_puts_the_stored_times_on_our_clock(
    writer: tuple[float, float], shift: float,
) -> None:
    """The store says its writer's clock was ``writer`` seconds off the API server's, ours
    is not: its times move by the difference, on the side that holds windows longer, and
    the move is counted; none ends up later than now."""
    moved: list[None] = []
    store = Store(reads=[Snapshot(targets={WEB: SavedTarget(history=HISTORY)}, skew=writer)])
    states: dict[str, TargetState] = {}
    history = HistoryKeeper(store, states, clock=Clock(), retry_wait=wait_none(),
                            skew=lambda: (-0.1, 0.1), corrected=lambda: moved.append(None))
    await history.restore([WEB])
    expected = [min(900.0 + shift, 1_000.0), min(950.0 + shift, 1_000.0)]
    got = states[WEB].history
    assert [got.recommendations[0].timestamp, got.scale_down_events[0].timestamp] == \
        pytest.approx(expected)
    assert len(moved) == (0 if shift == 0 else 1)


async def test_every_write_says_our_clocks_skew() -> None:
    store = Store(reads=[None])
    history = HistoryKeeper(store, {}, clock=Clock(), retry_wait=wait_none(),
                            skew=lambda: (-3.5, -3.25))
    await history.restore([WEB])
    await history.persist()
    assert store.saved[-1].skew == (-3.5, -3.25)


async def test_a_scoped_keeper_writes_only_its_targets() -> None:
    """A keeper over part of the targets (a bucket of a ring) writes only that part's
    history, from the same states the reconciler holds for all."""
    states = {WEB: TargetState(key=WEB), API: TargetState(key=API)}
    store = Store(reads=[None])
    history = HistoryKeeper(store, states, clock=Clock(), retry_wait=wait_none(),
                            scope=lambda: [WEB, "gone/Deployment/not-in-states"])
    await history.restore([WEB])
    for state in states.values():
        state.history = HISTORY
    await history.persist()
    assert set(store.saved[-1].targets) == {WEB}


async def test_a_write_with_nothing_new_is_not_sent() -> None:
    """No pass touched the targets since our last write (a ring member's other buckets after
    a failover's first pass): nothing is sent, and the fence is still asked; a change, or a
    clean write at a stop, is written."""
    leader = [True]
    store = Shared(reads=[None])
    states = {WEB: TargetState(key=WEB, history=HISTORY)}
    history = fenced(store, states, leader)
    await history.restore([WEB])
    await history.persist()
    written = len(store.saved)
    await history.persist()
    assert len(store.saved) == written
    leader[0] = False
    with pytest.raises(NotLeaderError):
        await history.persist()
    leader[0] = True
    states[WEB].history = History(scale_up_events=(EARLIER,))
    await history.persist()
    assert len(store.saved) == written + 1
    await history.persist(clean=True)
    assert len(store.saved) == written + 2
    assert store.saved[-1].clean
    await history.persist()  # in use again after a clean write: marked so
    assert len(store.saved) == written + 3
    assert not store.saved[-1].clean
