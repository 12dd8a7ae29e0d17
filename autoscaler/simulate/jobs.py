"""Independent output jobs, run side by side in forked workers where that is safe.

After a run, ``simulate`` writes files that depend only on the finished timelines (each
timeline as CSV and JSON, the plot). On a machine with two or more CPUs they are written in
worker processes forked from this one: a fork shares the timelines as they are, with
nothing to serialize, so the wall time is the longest job's instead of the sum. Elsewhere
(one CPU, no safe ``fork``, or threads running, which a forked child could find holding a
lock) the jobs run one after the other here, with the same results. Either way the caller
does its own share meanwhile (``simulate``: the summary), on the CPU the workers leave it.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

Job = Callable[[], None]
T = TypeVar("T")

_pending: Sequence[Job] = ()
"""The jobs of the running ``run_jobs``: set before the workers fork, which inherit it."""


def run_jobs(jobs: Sequence[Job], *, meanwhile: Callable[[], T]) -> T:
    """Run every job and, while they run, ``meanwhile`` here; return what it returned.

    Every job runs even after one failed; then the first failure in job order (a failure of
    ``meanwhile`` first) is raised, as if they had all run one after the other."""
    workers = min(len(jobs), _cpus()) if len(jobs) > 1 and _can_fork() else 0
    if workers >= 2:
        result, failures = _in_workers(jobs, workers, meanwhile)
    else:
        failures = [_failure(job) for job in jobs]
        result = meanwhile()
    first = next((failure for failure in failures if failure is not None), None)
    if first is not None:
        raise first
    return result


def _in_workers(
    jobs: Sequence[Job], workers: int, meanwhile: Callable[[], T],
) -> tuple[T, list[BaseException | None]]:
    global _pending  # noqa: PLW0603 - the only way to hand a forked worker a closure
    _pending = jobs
    # Frozen, what the workers inherit is out of their collector's reach: a collection there
    # would write to every object's header and so copy every page the fork shares.
    gc.freeze()
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context,
                                 initializer=_leave_interrupts_to_the_caller) as pool:
            futures = [pool.submit(_run, index) for index in range(len(jobs))]
            try:
                result = meanwhile()
                return result, [future.exception() for future in futures]
            except KeyboardInterrupt:  # Ctrl-C: the jobs not yet started never start
                pool.shutdown(cancel_futures=True)
                raise
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


def _leave_interrupts_to_the_caller() -> None:
    """A worker ignores Ctrl-C (the terminal sends it to every process of the group): the
    caller stops, the jobs already running finish their files, and nothing prints a
    worker's traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _can_fork() -> bool:
    """Linux only (macOS's system libraries are not fork-safe), and only with no other
    thread that a child could find holding a lock."""
    return sys.platform == "linux" and threading.active_count() == 1
