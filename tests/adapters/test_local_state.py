"""The history kept by the process itself: a state file's three outcomes of a read (a
snapshot, proven absent, or an error that is either transient or a state set aside), its
bounded read, and the memory store."""

from __future__ import annotations

import contextlib
import gzip
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.adapters.local_state import FileStateStore, MemoryStateStore
from autoscaler.errors import StateSetAsideError, StateUnavailableError
from autoscaler.snapshot import encode
from tests.test_snapshot import SNAPSHOT, UNDECODABLE, UNDECODABLE_IDS


def test_a_gzip_bomb_costs_bounded_memory(tmp_path: Path) -> None:
    """Loading a 256 MiB-inflating store (under 1 MiB on disk) in a fresh process peaks at
    about the 64 MiB cap plus the interpreter, instead of inflating it all."""
    bomb = tmp_path / "state"
    with gzip.open(bomb, "wb", compresslevel=9) as handle:
        for _ in range(256):
            handle.write(b"0" * (1024 * 1024))
    # VmHWM, not ru_maxrss: the latter counts the forked test process before exec.
    script = ("import asyncio, re, sys; from pathlib import Path; "
              "from autoscaler.adapters.local_state import FileStateStore\n"
              "from autoscaler.errors import StateSetAsideError\n"
              "try: asyncio.run(FileStateStore(Path(sys.argv[1])).load())\n"
              "except StateSetAsideError as e: print('set aside:', e)\n"
              "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())\n"
              "print('peak', int(hwm.group(1)) // 1024)")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script, str(bomb)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "inflates past the limit" in out
    peak_mb = int(out.rsplit("peak", 1)[1])
    assert peak_mb < 64 + 50, f"peak RSS {peak_mb} MB"
    assert time.monotonic() - started < 10


async def test_file_store_round_trip_and_missing_file(tmp_path: Path) -> None:
    """A missing file is proven absent; a saved state loads back; no temp files remain."""
    store = FileStateStore(tmp_path / "sub" / "state")
    assert await store.load() is None
    await store.save(encode(SNAPSHOT))
    assert await FileStateStore(tmp_path / "sub" / "state").load() == SNAPSHOT
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["state"]


@pytest.mark.parametrize(("data", "message"), UNDECODABLE[:6], ids=UNDECODABLE_IDS[:6])
async def test_an_undecodable_file_is_set_aside_never_overwritten(
    tmp_path: Path, data: bytes, message: str,
) -> None:
    """The file is renamed with a UTC timestamp, its bytes intact, and the error says where;
    the next save writes a new file beside it."""
    path = tmp_path / "state"
    path.write_bytes(data)
    store = FileStateStore(path, clock=lambda: 1_764_000_000.0)
    with pytest.raises(StateSetAsideError, match=message) as caught:
        await store.load()
    kept = tmp_path / "state.unreadable-20251124t160000z"
    assert caught.value.kept_as == str(kept)
    assert kept.read_bytes() == data
    assert not path.exists()
    await store.save(encode(SNAPSHOT))
    assert await store.load() == SNAPSHOT


@pytest.mark.parametrize("kind", ["directory", "fifo", "too-big"])
async def test_a_file_that_cannot_be_read_is_set_aside(tmp_path: Path, kind: str) -> None:
    """A directory, a FIFO (never blocking), a file over the size cap: each is moved aside,
    not overwritten."""
    path = tmp_path / "state"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        with path.open("wb") as handle:
            handle.truncate(17 * 1024 * 1024)
    with pytest.raises(StateSetAsideError):
        await FileStateStore(path).load()
    assert not path.exists()
    assert [name.startswith("state.unreadable-") for name in _listing(tmp_path)] == [True]


async def test_a_file_the_daemon_may_not_read_is_set_aside() -> None:
    """Mode 000 for the daemon's user: moved aside. Root reads anything, so as root the read
    runs with the effective uid of ``nobody``, as the daemon runs under a DynamicUser."""
    with tempfile.TemporaryDirectory() as directory:
        path = _unreadable_state(Path(directory))
        with _as_nobody(), pytest.raises(StateSetAsideError, match="Permission denied"):
            await FileStateStore(path).load()
        assert not path.exists()


def _listing(directory: Path) -> list[str]:
    return [entry.name for entry in directory.iterdir()]


def _unreadable_state(directory: Path) -> Path:
    """A valid state file of mode 000 in a directory anyone may write (for the rename)."""
    directory.chmod(0o777)
    path = directory / "state"
    path.write_bytes(encode(SNAPSHOT))
    path.chmod(0)
    return path


@contextlib.contextmanager
def _as_nobody() -> Iterator[None]:
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


async def test_a_file_that_cannot_be_moved_aside_is_left_alone(tmp_path: Path) -> None:
    """If the rename fails too, the read fails as transient: the caller retries and writes
    nothing, so the file survives for a person to look at."""
    path = tmp_path / "state"
    path.write_bytes(b"garbage")
    blocker = tmp_path / "state.unreadable-20251124t160000z"  # the rename's target, taken
    blocker.mkdir()
    (blocker / "x").write_text("x")
    with pytest.raises(StateUnavailableError, match="cannot be moved aside"):
        await FileStateStore(path, clock=lambda: 1_764_000_000.0).load()
    assert path.read_bytes() == b"garbage"


async def test_a_read_only_store_never_moves_the_file(tmp_path: Path) -> None:
    """``plan`` reads the daemon's file: undecodable is an error there, and the file stays."""
    path = tmp_path / "state"
    path.write_bytes(b"garbage")
    with pytest.raises(StateUnavailableError, match="cannot be decoded"):
        await FileStateStore(path, read_only=True).load()
    assert path.read_bytes() == b"garbage"


async def test_memory_store_round_trip() -> None:
    """The in-memory store behaves like the others within one process."""
    store = MemoryStateStore()
    assert await store.load() is None
    await store.save(encode(SNAPSHOT))
    assert await store.load() == SNAPSHOT


OUT_OF_RANGE = [
    b'{"version": 2, "targets": {"a": {"r": [[1e400, 1.7e9]], "u": [], "d": []}}}',
    b'{"version": 2, "targets": {"a": {"r": [], "u": [[Infinity, 1.7e9, false]], "d": []}}}',
    b'{"version": 2, "targets": {}, "savedAt": ' + b"1" * 5000 + b"}",
    b'{"version": 2, "targets": {"a": {"r": [], "u": [], "d": [[1, Infinity, false]]}}}',
    b'{"version": 2, "targets": {"a": {"r": [[3, NaN]], "u": [], "d": []}}}',
    b'{"version": 2, "targets": {"a": {"r": [[1e30, 1.7e9]], "u": [], "d": []}}}',
    b'{"version": 2, "targets": {}, "savedAt": NaN}',
]


@pytest.mark.parametrize("body", OUT_OF_RANGE, ids=[
    "replicas-1e400", "event-change-infinity", "5000-digit-number", "event-time-infinity",
    "recommendation-time-nan", "replicas-beyond-int32", "saved-at-nan"])
async def test_a_state_with_out_of_range_numbers_is_set_aside(
    tmp_path: Path, body: bytes,
) -> None:
    """Numbers JSON reads but a history cannot hold (an infinity or NaN, a count beyond
    int32, a 5,000-digit integer) make the state undecodable: set aside, never an exception
    that ends the restore, never an event stamped +inf that would hold scale-downs forever."""
    path = tmp_path / "state"
    path.write_bytes(gzip.compress(body))
    with pytest.raises(StateSetAsideError):
        await FileStateStore(path).load()
    assert not path.exists()
