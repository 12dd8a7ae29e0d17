"""Output jobs side by side in forked workers, or one after the other where that is unsafe."""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

import pytest

from autoscaler.simulate.jobs import run_jobs

PARALLEL = sys.platform == "linux" and len(os.sched_getaffinity(0)) >= 2


def _write_pid(path: Path) -> None:
    path.write_text(str(os.getpid()))


def _fail(message: str) -> None:
    raise OSError(message)


def pid_jobs(tmp_path: Path, count: int) -> tuple[list[Callable[[], None]], list[Path]]:
    paths = [tmp_path / f"job{index}" for index in range(count)]
    return [partial(_write_pid, path) for path in paths], paths


@contextmanager
def another_thread() -> Iterator[None]:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        yield
    finally:
        stop.set()
        other.join()


@pytest.mark.skipif(not PARALLEL, reason="needs Linux and two CPUs (the jobs run in order)")
def test_jobs_run_in_forked_workers_while_meanwhile_runs_here(tmp_path: Path) -> None:
    """Every job runs in a worker process (sharing this one's memory as it was at the
    fork), ``meanwhile`` here; the collector is left as it was."""
    frozen = gc.get_freeze_count()
    work, paths = pid_jobs(tmp_path, 3)
    assert run_jobs(work, meanwhile=os.getpid) == os.getpid()
    pids = {int(path.read_text()) for path in paths}
    assert os.getpid() not in pids
    assert gc.get_freeze_count() == frozen


def test_with_another_thread_alive_the_jobs_run_here(tmp_path: Path) -> None:
    """A forked child could find another thread's lock taken forever: no fork then."""
    work, paths = pid_jobs(tmp_path, 3)
    with another_thread():
        assert run_jobs(work, meanwhile=lambda: "done") == "done"
    assert {int(path.read_text()) for path in paths} == {os.getpid()}


def test_a_single_job_runs_here(tmp_path: Path) -> None:
    work, paths = pid_jobs(tmp_path, 1)
    run_jobs(work, meanwhile=lambda: None)
    assert int(paths[0].read_text()) == os.getpid()


@pytest.mark.parametrize("threaded", [False, True], ids=["workers", "in-order"])
def test_a_failing_job_raises_here_once_all_have_run(tmp_path: Path, threaded: bool) -> None:
    """The first failure in job order is raised in the caller, after every job ran (each
    of the others wrote its file), in workers and in order alike."""
    work, paths = pid_jobs(tmp_path, 3)
    work[1:1] = [partial(_fail, "disk full"), partial(_fail, "second")]
    with another_thread() if threaded else nullcontext(), \
            pytest.raises(OSError, match="disk full"):
        run_jobs(work, meanwhile=lambda: None)
    assert all(path.exists() for path in paths)


@pytest.mark.parametrize("threaded", [False, True], ids=["workers", "in-order"])
def test_a_failure_meanwhile_is_raised_once_the_jobs_have_run(
    tmp_path: Path, threaded: bool
) -> None:
    work, paths = pid_jobs(tmp_path, 3)
    with another_thread() if threaded else nullcontext(), \
            pytest.raises(OSError, match="meanwhile"):
        run_jobs(work, meanwhile=partial(_fail, "meanwhile"))
    assert all(path.exists() for path in paths)
