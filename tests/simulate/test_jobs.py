"""Output jobs side by side in forked workers, or one after the other where that is unsafe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


IN_WORKERS = """
import gc, os, sys
from functools import partial
from pathlib import Path
from autoscaler.simulate.jobs import run_jobs

def write_pid(path: str) -> None:
    Path(path).write_text(str(os.getpid()))

def fail(message: str) -> None:
    raise OSError(message)

frozen = gc.get_freeze_count()
jobs = [partial(write_pid, path) for path in sys.argv[2:]]
if sys.argv[1] == "job":
    jobs[1:1] = [partial(fail, "disk full"), partial(fail, "second")]
meanwhile = partial(fail, "meanwhile") if sys.argv[1] == "meanwhile" else os.getpid
try:
    print(run_jobs(jobs, meanwhile=meanwhile))
except OSError as error:
    print(error)
assert gc.get_freeze_count() == frozen
"""


def in_fresh_process(tmp_path: Path, fail: str = "") -> tuple[str, list[Path]]:
    """``run_jobs`` of three pid-writing jobs in a new interpreter (one thread: this test
    process may hold others, such as session fixtures' servers, and then runs jobs in
    order); what it printed, and the jobs' files."""
    paths = [tmp_path / f"job{index}" for index in range(3)]
    result = subprocess.run(
        [sys.executable, "-c", IN_WORKERS, fail or "none", *map(str, paths)],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return result.stdout.strip(), paths


@pytest.mark.skipif(not PARALLEL, reason="needs Linux and two CPUs (the jobs run in order)")
def test_jobs_run_in_forked_workers_while_meanwhile_runs_here(tmp_path: Path) -> None:
    """Every job runs in a worker process (sharing the caller's memory as it was at the
    fork), ``meanwhile`` in the caller; the collector is left as it was."""
    caller, paths = in_fresh_process(tmp_path)
    pids = {int(path.read_text()) for path in paths}
    assert int(caller) not in pids


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


def test_a_failing_job_raises_here_once_all_have_run(tmp_path: Path) -> None:
    """The first failure in job order is raised in the caller, after every job ran (each
    of the others wrote its file), in order here and in workers alike."""
    work, paths = pid_jobs(tmp_path / "in-order", 3)
    (tmp_path / "in-order").mkdir()
    work[1:1] = [partial(_fail, "disk full"), partial(_fail, "second")]
    with another_thread(), pytest.raises(OSError, match="disk full"):
        run_jobs(work, meanwhile=lambda: None)
    assert all(path.exists() for path in paths)
    printed, paths = in_fresh_process(tmp_path, fail="job")
    assert printed == "disk full"
    assert all(path.exists() for path in paths)


def test_a_failure_meanwhile_is_raised_once_the_jobs_have_run(tmp_path: Path) -> None:
    work, paths = pid_jobs(tmp_path / "in-order", 3)
    (tmp_path / "in-order").mkdir()
    with another_thread(), pytest.raises(OSError, match="meanwhile"):
        run_jobs(work, meanwhile=partial(_fail, "meanwhile"))
    assert all(path.exists() for path in paths)
    printed, paths = in_fresh_process(tmp_path, fail="meanwhile")
    assert printed == "meanwhile"
    assert all(path.exists() for path in paths)


INTERRUPTED = """
import signal, sys, time
from pathlib import Path
from autoscaler.simulate.jobs import run_jobs

signal.signal(signal.SIGINT, signal.default_int_handler)  # (even if started ignoring it)
started, release = Path(sys.argv[1]), Path(sys.argv[2])

def slow() -> None:
    started.write_text("")
    while not release.exists():
        time.sleep(0.01)

try:
    run_jobs([slow, lambda: None], meanwhile=lambda: None)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.skipif(not PARALLEL, reason="needs Linux and two CPUs (the jobs run in order)")
def test_ctrl_c_stops_the_caller_and_no_worker_prints_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C reaches every process of the terminal's group: the caller stops (exit 130 as
    the CLI gives), the running job finishes, an idle worker says nothing, none is left."""
    started, release = tmp_path / "started", tmp_path / "release"
    process = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, str(started), str(release)],
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started.exists()
        time.sleep(0.2)  # the other worker has run its job and waits for the next
        os.killpg(process.pid, signal.SIGINT)
        release.write_text("")
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130
    assert "Traceback" not in stderr, stderr
    assert in_group(process.pid) == []


def in_group(group: int) -> list[int]:
    """The live processes of a process group, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == group:
                    found.append(int(entry.name))
            except ProcessLookupError:
                continue
    return found
