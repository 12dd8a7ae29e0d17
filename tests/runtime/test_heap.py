"""The collector pause around passes: counted for overlapping passes, never turns GC on; the
C heap's free pages handed back when the last pass ends."""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import random
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.heap import collector_paused, free_pages
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from tests.procfs import memory_kib
from tests.runtime.doubles import NoPods, QueueDepth, Quiet, Scales, targets


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_inside_and_resumed_after() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_passes_resume_only_when_the_last_ends() -> None:
    gc.enable()
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second pass still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_resumed_after_an_exception() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a pass failed")
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


class _CollectorWatch(QueueDepth):
    """Remembers whether the collector was on while the pass fetched its metrics."""

    def __init__(self) -> None:
        super().__init__()
        self.enabled_during_fetch: list[bool] = []

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        self.enabled_during_fetch.append(gc.isenabled())
        await asyncio.sleep(0.05)  # the other pass runs meanwhile
        return await super().fetch_metrics(wanted, deadline=deadline)


async def test_overlapping_reconcile_passes_run_with_the_collector_paused() -> None:
    gc.enable()
    metrics = _CollectorWatch()
    reconciler = Reconciler(scales=Scales(), pods=NoPods(), metrics=metrics, events=Quiet(),
                            owners=Quiet(), options=ReconcileOptions(), telemetry=DaemonMetrics())
    deadline = time.monotonic() + 5
    async with asyncio.timeout(10):
        await asyncio.gather(reconciler.run_pass(targets("web"), deadline=deadline),
                             reconciler.run_pass(targets("api"), deadline=deadline))
    assert metrics.enabled_during_fetch == [False, False]
    assert gc.isenabled()
    assert {s.last_outcome for s in reconciler.states.values()} == {"ok"}


GLIBC = platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's; other C libraries: nothing to do")
def test_the_last_pass_to_end_hands_the_heaps_free_pages_back() -> None:
    """A pass that freed ~70 MB of small blocks amid ones it kept (as an answer indexed by pod
    is freed amid the caches) leaves the process that much smaller once it ends. Before,
    glibc kept them: it returns only the top of a heap."""
    free_pages.start()
    rng = random.Random(7)
    kept, freed = [], []
    for index in range(20_000):  # ~90 MB of blocks of 0.6-8 KB, glibc's, not Python's pools
        (kept if index % 5 == 0 else freed).append(bytearray(rng.randint(600, 8_000)))
    for thread in threading.enumerate():  # a trim another test's pass started
        if thread.name == "free-pages":
            thread.join(10)
    started = free_pages.handed_back
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()
    freed.clear()
    before = memory_kib(os.getpid(), "VmRSS")
    first.__exit__(None, None, None)
    assert free_pages.handed_back == started  # another pass is still in flight
    second.__exit__(None, None, None)
    assert free_pages.handed_back == started + 1
    trims = [thread for thread in threading.enumerate() if thread.name == "free-pages"]
    assert all(thread.daemon for thread in trims)  # the daemon's exit never waits for one
    deadline = time.monotonic() + 10
    while memory_kib(os.getpid(), "VmRSS") > before - 30 * 1024 and time.monotonic() < deadline:
        time.sleep(0.02)
    after = memory_kib(os.getpid(), "VmRSS")
    assert before - after > 30 * 1024, f"RSS {before // 1024} -> {after // 1024} MiB"
    assert len(kept) == 4_000
