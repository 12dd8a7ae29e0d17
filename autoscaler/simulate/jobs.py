"""Independent output jobs, run side by side in forked workers where that is safe.

After a run, ``simulate`` writes files that depend only on the finished timelines (each
timeline as CSV and JSON, the plot). On a machine with two or more CPUs they are written in
worker processes forked from this one: a fork shares the timelines as they are, with
nothing to serialize, so the wall time is the longest job's instead of the sum. Elsewhere
(one CPU, no safe ``fork``, or threads running, which a forked child could find holding a
lock) the jobs run one after the other here, with the same results.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

Job = Callable[[], None]

_pending: Sequence[Job] = ()
"""The jobs of the running ``run_jobs``: set before the workers fork, which inherit it."""


def run_jobs(jobs: Sequence[Job]) -> bool:
    """Run every job, even after one failed; then raise the first failure in job order, as
    if they had run one after the other. True when the jobs ran in worker processes."""
    workers = min(len(jobs), _cpus()) if len(jobs) > 1 and _can_fork() else 0
    failures = _in_workers(jobs, workers) if workers >= 2 else [_failure(job) for job in jobs]
    first = next((failure for failure in failures if failure is not None), None)
    if first is not None:
        raise first
    return workers >= 2


def _in_workers(jobs: Sequence[Job], workers: int) -> list[BaseException | None]:
    global _pending  # noqa: PLW0603 - the only way to hand a forked worker a closure
    _pending = jobs
    # Frozen, what the workers inherit is out of their collector's reach: a collection there
    # would write to every object's header and so copy every page the fork shares.
    gc.freeze()
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            futures = [pool.submit(_run, index) for index in range(len(jobs))]
            return [future.exception() for future in futures]
    finally:
        gc.unfreeze()
        _pending = ()


def _failure(job: Job) -> Exception | None:
    try:
        job()
    except Exception as error:  # (raised by run_jobs once all have run)
        return error
    return None


def _run(index: int) -> None:
    _pending[index]()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _can_fork() -> bool:
    """Linux only (macOS's system libraries are not fork-safe), and only with no other
    thread that a child could find holding a lock."""
    return sys.platform == "linux" and threading.active_count() == 1
