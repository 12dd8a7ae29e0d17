"""The history kept by the process itself: a state file's outcomes of a read (a snapshot,
proven absent, or an error: transient, a store of ours set aside, or a file that is not
ours, left byte for byte), its bounded read, its modes, and the memory store."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autoscaler.adapters.local_state import FileStateStore, MemoryStateStore, ReadOnceStore
from autoscaler.errors import StateNotOursError, StateSetAsideError, StateUnavailableError
from autoscaler.snapshot import HEADER, Snapshot, encode, pack
from tests.test_snapshot import SNAPSHOT


def _bomb(path: Path, *, marked: bool) -> None:
    """A 256 MiB-inflating store under 1 MiB on disk, with our mark or as a plain gzip."""
    if not marked:
        with gzip.open(path, "wb", compresslevel=9) as handle:
            for _ in range(256):
                handle.write(b"0" * (1024 * 1024))
        return
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    with path.open("wb") as handle:
        handle.write(HEADER)
        for _ in range(256):
            handle.write(deflate.compress(b"0" * (1024 * 1024)))
        handle.write(deflate.flush())


@pytest.mark.parametrize(("marked", "outcome"), [(True, "set aside"), (False, "not ours")],
                         ids=["ours", "unmarked"])
def test_a_gzip_bomb_costs_bounded_memory(tmp_path: Path, marked: bool, outcome: str) -> None:
    """Loading a 256 MiB-inflating store in a fresh process peaks at about the 64 MiB cap
    plus the interpreter, instead of inflating it all: ours is set aside, an unmarked one
    (which could be an earlier version's store, so it is inflated to find out) refused."""
    bomb = tmp_path / "state"
    _bomb(bomb, marked=marked)
    # VmHWM, not ru_maxrss: the latter counts the forked test process before exec.
    script = ("import asyncio, re, sys; from pathlib import Path; "
              "from autoscaler.adapters.local_state import FileStateStore\n"
              "from autoscaler.errors import StateNotOursError, StateSetAsideError\n"
              "try: asyncio.run(FileStateStore(Path(sys.argv[1])).load())\n"
              "except StateSetAsideError as e: print('set aside:', e)\n"
              "except StateNotOursError as e: print('not ours:', e)\n"
              "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())\n"
              "print('peak', int(hwm.group(1)) // 1024)")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script, str(bomb)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.startswith(outcome)
    if marked:
        assert "inflates past the limit" in out
    peak_mb = int(out.rsplit("peak", 1)[1])
    assert peak_mb < 64 + 50, f"peak RSS {peak_mb} MB"
    assert time.monotonic() - started < 10


async def test_file_store_round_trip_and_missing_file(tmp_path: Path) -> None:
    """A missing file is proven absent; a saved state loads back; no temp files remain; the
    directories it creates are mode 0700 and the file 0600 (the history is ours alone)."""
    old = os.umask(0o022)
    try:
        store = FileStateStore(tmp_path / "sub" / "deeper" / "state")
        assert await store.load() is None
        await store.save(encode(SNAPSHOT))
    finally:
        os.umask(old)
    assert await FileStateStore(tmp_path / "sub" / "deeper" / "state").load() == SNAPSHOT
    assert [p.name for p in (tmp_path / "sub" / "deeper").iterdir()] == ["state"]
    modes = [stat.S_IMODE(p.stat().st_mode) for p in (
        tmp_path / "sub", tmp_path / "sub" / "deeper", tmp_path / "sub" / "deeper" / "state")]
    assert modes == [0o700, 0o700, 0o600]


async def test_a_store_written_before_the_mark_is_read_and_then_marked(tmp_path: Path) -> None:
    """An earlier version's store (gzip JSON without the mark) is recognised by decoding
    whole: it loads, and the next save replaces it with a marked one."""
    path = tmp_path / "state"
    path.write_bytes(gzip.compress(json.dumps({"version": 2, "targets": {}}).encode()))
    store = FileStateStore(path)
    store.check()
    assert await store.load() == Snapshot(targets={}, journaled=False)  # written before journaling
    await store.save(encode(SNAPSHOT))
    assert path.read_bytes().startswith(HEADER)


MARKED_UNDECODABLE = [
    (pack(b"not json"), "not JSON"),
    (encode(SNAPSHOT)[:-9], "truncated"),
    (HEADER, "truncated"),
    (HEADER + b"garbage", "not gzip-compressed"),
    (pack(b'{"version": 99, "targets": {}}'), "unknown format"),
    (pack(b'{"version": 2, "targets": {"a": {"r": [[1]]}}}'), "malformed"),
]


@pytest.mark.parametrize(("data", "message"), MARKED_UNDECODABLE,
                         ids=["not-json", "truncated", "only-the-mark", "garbage-after-the-mark",
                              "future-version", "bad-entry"])
async def test_an_undecodable_store_of_ours_is_set_aside_never_overwritten(
    tmp_path: Path, data: bytes, message: str,
) -> None:
    """A store with our mark that cannot be decoded (truncated, corrupt, another version)
    is renamed with a UTC timestamp, its bytes intact, and the error says where; the next
    save writes a new file beside it."""
    path = tmp_path / "state"
    path.write_bytes(data)
    store = FileStateStore(path, clock=lambda: 1_764_000_000.0)
    store.check()  # ours: the daemon starts, and sets it aside when it reads it
    with pytest.raises(StateSetAsideError, match=message) as caught:
        await store.load()
    kept = tmp_path / "state.unreadable-20251124t160000z"
    assert caught.value.kept_as == str(kept)
    assert kept.read_bytes() == data
    assert not path.exists()
    await store.save(encode(SNAPSHOT))
    assert await store.load() == SNAPSHOT


def _passwd(directory: Path) -> Path:
    path = directory / "state"
    path.write_bytes(PASSWD)
    return path


def _linked(directory: Path, target: Path) -> Path:
    path = directory / "state"
    path.symlink_to(target)
    return path


PASSWD = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
NOT_OURS: list[tuple[str, Callable[[Path], Path], str]] = [
    ("passwd", _passwd, "not a state file of this daemon (it neither starts"),
    ("empty", lambda d: _write(d / "state", b""), "not a state file of this daemon (it is empty)"),
    ("foreign-gzip", lambda d: _write(d / "state", gzip.compress(b"a log line\n")),
     "not a state file of this daemon"),
    ("unmarked-truncated-store", lambda d: _write(
        d / "state", gzip.compress(b'{"version": 2, "targets": {}}')[:-9]),
     "not a state file of this daemon"),
    ("out-of-range-unmarked", lambda d: _write(d / "state", gzip.compress(
        b'{"version": 2, "targets": {"a": {"r": [[1e400, 1.7e9]], "u": [], "d": []}}}')),
     "not a state file of this daemon"),
    ("too-big-unmarked", lambda d: _sized(d / "state", 17 * 1024 * 1024),
     "over the limit of 16 MiB, without the state file's mark"),
    ("directory", lambda d: _made(d / "state", os.mkdir), "it is a directory"),
    ("fifo", lambda d: _made(d / "state", os.mkfifo), "it is a FIFO"),
    ("link-to-a-foreign-file", lambda d: _linked(d, _write(d / "passwd", PASSWD)),
     "it is a symbolic link"),
    ("link-to-a-store", lambda d: _linked(d, _write(d / "elsewhere", encode(SNAPSHOT))),
     "it is a symbolic link"),
]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _made(path: Path, make: Callable[[Path], None]) -> Path:
    make(path)
    return path


def _sized(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def _tree(directory: Path) -> dict[str, tuple[int, bytes | str | None]]:
    """Each entry's mode and content (a link's target, a regular file's bytes)."""
    found: dict[str, tuple[int, bytes | str | None]] = {}
    for entry in sorted(directory.iterdir()):
        info = entry.lstat()
        content: bytes | str | None = None
        if stat.S_ISLNK(info.st_mode):
            content = os.readlink(entry)
        elif stat.S_ISREG(info.st_mode):
            content = entry.read_bytes()
        found[entry.name] = (info.st_mode, content)
    return found


@pytest.mark.parametrize(("make", "message"), [case[1:] for case in NOT_OURS],
                         ids=[case[0] for case in NOT_OURS])
async def test_a_file_that_is_not_ours_is_refused_and_left_byte_for_byte(
    tmp_path: Path, make: Callable[[Path], Path], message: str,
) -> None:
    """Someone else's file, an empty one, a damaged store from before the mark, a link
    (even to a store of ours), a directory, a FIFO (never blocking): refused by ``check``, by
    ``load`` and by ``save``, and nothing in the directory changes: no rename, no set-aside
    copy, no write through the link."""
    make(tmp_path)
    before = _tree(tmp_path)
    store = FileStateStore(tmp_path / "state", clock=lambda: 1_764_000_000.0)
    with pytest.raises(StateNotOursError, match=re.escape(message)):
        store.check()
    with pytest.raises(StateNotOursError, match=re.escape(message)):
        await store.load()
    with pytest.raises(StateNotOursError, match=re.escape(message)):
        await store.save(encode(SNAPSHOT))
    assert _tree(tmp_path) == before


async def test_a_file_the_daemon_may_not_read_is_refused_and_left_alone() -> None:
    """Mode 000 for the daemon's user: it cannot tell the file is ours, so it is refused,
    not moved. Root reads anything, so as root the read runs with the effective uid of
    ``nobody``, as the daemon runs under a DynamicUser."""
    with tempfile.TemporaryDirectory() as directory:
        path = _unreadable_state(Path(directory))
        with _as_nobody(), pytest.raises(StateNotOursError, match="Permission denied"):
            await FileStateStore(path).load()
        assert path.exists()
        assert _listing(Path(directory)) == ["state"]


async def test_a_file_put_in_place_after_the_read_is_not_replaced(tmp_path: Path) -> None:
    """Between the read at start and a save, someone moves their own file to the state
    path: the save looks again right before replacing, refuses, and leaves it."""
    path = tmp_path / "state"
    store = FileStateStore(path)
    await store.save(encode(SNAPSHOT))
    assert await store.load() == SNAPSHOT
    _write(tmp_path / "theirs", PASSWD).replace(path)
    with pytest.raises(StateNotOursError):
        await store.save(encode(SNAPSHOT))
    assert path.read_bytes() == PASSWD
    assert _listing(tmp_path) == ["state"]


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


@pytest.mark.parametrize("blocker", ["file", "directory"])
async def test_a_store_that_cannot_be_moved_aside_is_left_alone(
    tmp_path: Path, blocker: str,
) -> None:
    """If the set-aside name is taken (by a file or a directory), nothing is replaced: the
    read fails as transient, the caller retries and writes nothing, and both survive."""
    path = tmp_path / "state"
    path.write_bytes(HEADER + b"garbage")
    taken = tmp_path / "state.unreadable-20251124t160000z"
    if blocker == "file":
        taken.write_bytes(PASSWD)
    else:
        taken.mkdir()
    with pytest.raises(StateUnavailableError, match="cannot be moved aside"):
        await FileStateStore(path, clock=lambda: 1_764_000_000.0).load()
    assert path.read_bytes() == HEADER + b"garbage"
    assert blocker == "directory" or taken.read_bytes() == PASSWD


async def test_a_read_only_store_never_moves_the_file(tmp_path: Path) -> None:
    """``plan`` reads the daemon's file: undecodable is an error there, and the file stays."""
    path = tmp_path / "state"
    path.write_bytes(HEADER + b"garbage")
    with pytest.raises(StateUnavailableError, match="cannot be decoded"):
        await FileStateStore(path, read_only=True).load()
    assert path.read_bytes() == HEADER + b"garbage"


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
    path.write_bytes(pack(body))
    with pytest.raises(StateSetAsideError):
        await FileStateStore(path).load()
    assert not path.exists()


async def test_a_dry_runs_store_reads_the_live_one_once_and_never_writes_it(
    tmp_path: Path,
) -> None:
    """``ReadOnceStore``: the live file is read once; what the dry run saves stays in its
    memory (read back from there) and the file is left byte for byte."""
    path = tmp_path / "state"
    await FileStateStore(path).save(encode(SNAPSHOT))
    left = path.read_bytes()
    store = ReadOnceStore(FileStateStore(path, read_only=True))
    assert await store.load() == SNAPSHOT
    await store.save(encode(Snapshot(targets={}, clean=True)))
    assert await store.load() == Snapshot(targets={}, clean=True)
    assert path.read_bytes() == left
