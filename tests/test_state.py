"""History persistence: the codec, its bounds, and the file store's three outcomes of a read
(a snapshot, proven absent, or an error that is either transient or a state set aside)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.algorithm.activation import ZeroMemory
from autoscaler.state import (
    MAX_INFLATED_BYTES,
    FileStateStore,
    Intent,
    MemoryStateStore,
    SavedTarget,
    Snapshot,
    StateFormatError,
    StateSetAsideError,
    StateUnavailableError,
    decode,
    encode,
    inflate,
)

HISTORY = History(
    recommendations=(Recommendation(replicas=5, timestamp=100.5),
                     Recommendation(replicas=7, timestamp=115.25)),
    scale_up_events=(ScaleEvent(change=2, timestamp=115.25),),
    scale_down_events=(ScaleEvent(change=1, timestamp=50.0, outdated=True),),
)
INTENT = Intent(previous=5, desired=7, resource_version="4711", at=116.0)
SNAPSHOT = Snapshot(targets={"ns/Deployment/web": SavedTarget(history=HISTORY, intent=INTENT),
                             "ns/Deployment/api": SavedTarget(history=HISTORY),
                             "ns/Deployment/worker": SavedTarget(zero=ZeroMemory(
                                 scaled_to_zero=True, last_active=110.0))},
                    clean=True, saved_at=117.0)


def test_round_trip_keeps_every_field() -> None:
    """Recommendations, both event lists (outdated flags included), intents, what scale to
    zero remembers (whose zero it is), the clean mark and the save time survive encoding."""
    assert decode(encode(SNAPSHOT)) == SNAPSHOT


def test_version_1_is_read_as_an_unclean_snapshot() -> None:
    """The previous format (saved every few seconds while running) still loads; it was never
    written at a stop, so its gap is bridged."""
    body = {"version": 1, "targets": {"k": {"r": [[5, 100.5]], "u": [], "d": []}}}
    snapshot = decode(gzip.compress(json.dumps(body).encode()))
    assert snapshot.clean is False
    assert snapshot.targets["k"].history.recommendations == (
        Recommendation(replicas=5, timestamp=100.5),)


def test_ten_thousand_targets_fit_a_configmap() -> None:
    """10,000 targets with a window's worth of history stay under the 1 MiB ConfigMap limit."""
    targets = {
        f"ns-{i % 50}/Deployment/app-{i}": SavedTarget(history=History(
            recommendations=tuple(
                Recommendation(replicas=3 + (j % 4), timestamp=1.7e9 + 15 * j) for j in range(20)
            ),
            scale_up_events=(ScaleEvent(change=1, timestamp=1.7e9),),
        ))
        for i in range(10_000)
    }
    assert len(encode(Snapshot(targets=targets))) < 1024 * 1024


def _gz(body: object) -> bytes:
    return gzip.compress(json.dumps(body).encode())


UNDECODABLE = [
    (b"not gzip", "not gzip-compressed"),
    (b"", "empty"),
    (gzip.compress(b'{"version": 2, "targets": {}}')[:-9], "truncated"),
    (json.dumps({"version": 2, "targets": {}}).encode(), "not gzip-compressed"),
    (_gz({"version": 99, "targets": {}}), "unknown format"),
    (_gz([1, 2]), "unknown format"),
    (_gz({"version": 2}), "no 'targets'"),
    (_gz({"version": 2, "targets": {"a": {"r": [[1]]}}}), "malformed"),
    (_gz({"version": 2, "targets": {"a": {"r": [], "u": [], "d": [], "w": [1]}}}), "malformed"),
    (gzip.compress(b"\xff\xfe"), "not JSON"),
    (gzip.compress(b"[" * 100_000), "not JSON"),
]
UNDECODABLE_IDS = ["garbage", "empty", "truncated", "plain-json", "future-version", "a-list",
                   "no-targets", "bad-entry", "bad-intent", "not-utf8", "deeply-nested"]


@pytest.mark.parametrize(("data", "message"), UNDECODABLE, ids=UNDECODABLE_IDS)
def test_decode_rejects_what_it_cannot_read(data: bytes, message: str) -> None:
    """Unreadable state is an error, never a silently empty history."""
    with pytest.raises(StateFormatError, match=message):
        decode(data)


def test_a_gzip_bomb_is_refused_within_the_cap() -> None:
    """A small store inflating past the cap is refused without inflating it all."""
    bomb = gzip.compress(b"0" * (MAX_INFLATED_BYTES * 4), compresslevel=9)
    assert len(bomb) < 1024 * 1024
    with pytest.raises(StateFormatError, match="inflates past the limit"):
        inflate(bomb)


def test_a_gzip_bomb_costs_bounded_memory(tmp_path: Path) -> None:
    """Loading a 256 MiB-inflating store (under 1 MiB on disk) in a fresh process peaks at
    about the 64 MiB cap plus the interpreter, instead of inflating it all."""
    bomb = tmp_path / "state"
    with gzip.open(bomb, "wb", compresslevel=9) as handle:
        for _ in range(256):
            handle.write(b"0" * (1024 * 1024))
    # VmHWM, not ru_maxrss: the latter counts the forked test process before exec.
    script = ("import asyncio, re, sys; from pathlib import Path; "
              "from autoscaler.state import FileStateStore, StateSetAsideError\n"
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


def test_inflate_reads_a_concatenated_stream_only_once() -> None:
    """Trailing bytes after the gzip stream are not silently inflated as more state."""
    data = encode(SNAPSHOT)
    assert inflate(data) == zlib.decompress(data, 16 + zlib.MAX_WBITS)
    with pytest.raises(StateFormatError, match="truncated"):
        inflate(data[: len(data) // 2])


def test_forecast_history_survives_the_round_trip() -> None:
    """A predicted metric's series (gaps and the open bucket included) is kept, to six
    significant digits; a state without it reads as no series."""
    from autoscaler.algorithm.forecast import Series

    series = Series(step=300.0, first=5_000, values=(1.5, None, 123456.789),
                    open_index=5_003, open_sum=7.25, open_count=3)
    snapshot = Snapshot(targets={"ns/Deployment/web": SavedTarget(
        history=HISTORY, forecasts={"0/Pods/rps": series})}, saved_at=1.0)
    restored = decode(encode(snapshot)).targets["ns/Deployment/web"]
    assert restored.forecasts["0/Pods/rps"].values == (1.5, None, 123457.0)
    assert restored.forecasts["0/Pods/rps"].open_count == 3
    assert decode(encode(SNAPSHOT)).targets["ns/Deployment/api"].forecasts == {}
