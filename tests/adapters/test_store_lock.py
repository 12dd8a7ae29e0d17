"""One process at a time on a state file: the lock file beside it, who holds it, what a
second process is told, that a killed holder frees it, and that the lock file is ours."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from autoscaler.adapters.local_state import FileStateStore
from autoscaler.adapters.store_lock import MARK, StoreLock, lock_path
from autoscaler.errors import StateInUseError, StateNotOursError, StateUnavailableError
from autoscaler.snapshot import encode
from tests.test_snapshot import SNAPSHOT

HOLD = ("import sys, time; from pathlib import Path\n"
        "from autoscaler.adapters.store_lock import StoreLock\n"
        "StoreLock.take(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)")


@contextmanager
def holder(state: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock on ``state`` until it is killed."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(state)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "locked"
        yield process
    finally:
        process.kill()
        process.wait(10)


def test_a_second_process_is_refused_naming_the_first(tmp_path: Path) -> None:
    """While another process holds it, taking the lock fails at once with one line that
    names the holder's pid and host and the lock file."""
    state = tmp_path / "state"
    with holder(state) as other, pytest.raises(StateInUseError) as refused:
        StoreLock.take(state)
    message = str(refused.value)
    assert f"pid {other.pid} on {socket.gethostname()}" in message
    assert str(lock_path(state)) in message
    assert "\n" not in message


def test_a_killed_holder_frees_the_store(tmp_path: Path) -> None:
    """SIGKILL leaves no stale lock: the kernel drops it with the process, and the next
    process takes it (and says it is the holder now)."""
    state = tmp_path / "state"
    with holder(state) as other:
        other.send_signal(signal.SIGKILL)
        other.wait(10)
        lock = StoreLock.take(state)
    try:
        assert lock.held
        assert lock_path(state).read_bytes() == MARK + f"pid {os.getpid()} on " \
            f"{socket.gethostname()}\n".encode()
    finally:
        lock.close()


def test_the_lock_file_is_made_0600_in_a_0700_directory(tmp_path: Path) -> None:
    """A missing state directory is made mode 0700, as for the state file; the lock file
    is 0600 and never removed."""
    old = os.umask(0o022)
    try:
        lock = StoreLock.take(tmp_path / "deeper" / "state")
    finally:
        os.umask(old)
    lock.close()
    assert (tmp_path / "deeper").stat().st_mode & 0o777 == 0o700
    assert lock_path(tmp_path / "deeper" / "state").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("content", [b"", b"root:x:0:0\n", MARK[:-1]],
                         ids=["empty", "someone-elses", "cut-mark"])
def test_a_file_at_the_lock_path_that_is_not_ours_is_left_alone(
    tmp_path: Path, content: bytes,
) -> None:
    """Refused, and left byte for byte: the daemon never writes a file it did not make."""
    state = tmp_path / "state"
    lock_path(state).write_bytes(content)
    with pytest.raises(StateNotOursError, match="lock file"):
        StoreLock.take(state)
    assert lock_path(state).read_bytes() == content


def test_a_link_at_the_lock_path_is_refused(tmp_path: Path) -> None:
    """No link is followed, even to a lock file of ours."""
    state = tmp_path / "state"
    StoreLock.take(tmp_path / "other").close()
    lock_path(state).symlink_to(lock_path(tmp_path / "other"))
    with pytest.raises(StateNotOursError, match="symbolic link"):
        StoreLock.take(state)


async def test_a_store_whose_lock_file_was_replaced_does_not_write(tmp_path: Path) -> None:
    """Someone removed the lock file (another process may now lock a new one): the store
    no longer counts the lock as its own and refuses to save."""
    state = tmp_path / "state"
    lock = StoreLock.take(state)
    store = FileStateStore(state, lock=lock)
    await store.save(encode(SNAPSHOT))
    lock_path(state).unlink()
    other = StoreLock.take(state)
    try:
        with pytest.raises(StateUnavailableError, match="lock file"):
            await store.save(encode(SNAPSHOT))
    finally:
        other.close()
        lock.close()


def test_a_lock_file_that_cannot_be_made_is_one_clear_error(tmp_path: Path) -> None:
    """A state path whose directory cannot hold the lock file (here: it is a file): one
    line naming the lock file, not a traceback."""
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StateUnavailableError, match=r"cannot create the state file's lock"):
        StoreLock.take(tmp_path / "file" / "state")
