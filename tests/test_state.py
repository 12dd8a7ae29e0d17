"""History persistence: the codec and the file store."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.state import FileStateStore, MemoryStateStore, decode, encode

HISTORY = History(
    recommendations=(Recommendation(replicas=5, timestamp=100.5),
                     Recommendation(replicas=7, timestamp=115.25)),
    scale_up_events=(ScaleEvent(change=2, timestamp=115.25),),
    scale_down_events=(ScaleEvent(change=1, timestamp=50.0, outdated=True),),
)


def test_round_trip_keeps_every_field() -> None:
    """Recommendations and both event lists, outdated flags included, survive encoding."""
    assert decode(encode({"ns/Deployment/web": HISTORY})) == {"ns/Deployment/web": HISTORY}


def test_ten_thousand_targets_fit_a_configmap() -> None:
    """10,000 targets with a window's worth of history stay under the 1 MiB ConfigMap limit."""
    histories = {
        f"ns-{i % 50}/Deployment/app-{i}": History(
            recommendations=tuple(
                Recommendation(replicas=3 + (j % 4), timestamp=1.7e9 + 15 * j) for j in range(20)
            ),
            scale_up_events=(ScaleEvent(change=1, timestamp=1.7e9),),
        )
        for i in range(10_000)
    }
    assert len(encode(histories)) < 1024 * 1024


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not gzip", "not gzip-compressed JSON"),
        (gzip.compress(b'{"version": 99, "targets": {}}'), "unknown format"),
        (gzip.compress(b'{"version": 1}'), "no 'targets'"),
        (gzip.compress(b'{"version": 1, "targets": {"a": {"r": [[1]]}}}'), "malformed"),
    ],
    ids=["garbage", "future-version", "no-targets", "bad-entry"],
)
def test_decode_rejects_what_it_cannot_read(data: bytes, message: str) -> None:
    """Unreadable state is an error, never a silently empty history."""
    with pytest.raises(ValueError, match=message):
        decode(data)


async def test_file_store_round_trip_and_missing_file(tmp_path: Path) -> None:
    """A missing file is an empty state; a saved state loads back; no temp files remain."""
    store = FileStateStore(tmp_path / "sub" / "state")
    assert await store.load() == {}
    await store.save({"k": HISTORY})
    assert await FileStateStore(tmp_path / "sub" / "state").load() == {"k": HISTORY}
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["state"]


async def test_memory_store_round_trip() -> None:
    """The in-memory store behaves like the others within one process."""
    store = MemoryStateStore()
    assert await store.load() == {}
    await store.save({"k": HISTORY})
    assert await store.load() == {"k": HISTORY}
