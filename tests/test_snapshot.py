"""The history's snapshot and its codec: every field kept, older versions read, bounds, and
anything unreadable an error (never a silently empty history)."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.algorithm.zero_values import ZeroMemory
from autoscaler.snapshot import (
    MAX_INFLATED_BYTES,
    Intent,
    SavedTarget,
    Snapshot,
    StateFormatError,
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


def test_every_store_carries_the_mark_and_stays_plain_gzip() -> None:
    """What ``encode`` writes starts with the 27-byte mark, and any gzip reader (``zcat``)
    still reads it: the mark is the gzip header's file-name field."""
    from autoscaler.snapshot import HEADER

    data = encode(SNAPSHOT)
    assert data.startswith(HEADER)
    assert len(HEADER) == 27
    assert json.loads(gzip.decompress(data))["version"] == 3
    assert data[10:27] == b"autoscaler-state\0"  # the header's FNAME field (flag 0x08)


@pytest.mark.parametrize(("data", "ours"), [
    (encode(SNAPSHOT), True),
    (encode(SNAPSHOT)[:40], True),  # truncated: the mark survives, so it is ours to set aside
    (encode(SNAPSHOT)[:27] + b"garbage", True),
    (_gz({"version": 2, "targets": {}}), True),  # written before the mark, decodes whole
    (_gz({"version": 1, "targets": {}}), True),
    (_gz({"version": 2, "targets": {}})[:-9], False),  # before the mark, and damaged
    (gzip.compress(b"some log line\n"), False),  # someone else's gzip file
    (b"root:x:0:0:root:/root:/bin/bash\n", False),
    (b"", False),
    (encode(SNAPSHOT)[:20], False),  # not even the whole mark
], ids=["store", "truncated-store", "marked-garbage", "unmarked-v2", "unmarked-v1",
        "unmarked-truncated", "foreign-gzip", "passwd", "empty", "partial-mark"])
def test_owned_tells_a_store_of_ours_from_someone_elses_file(data: bytes, ours: bool) -> None:
    """Ours: the mark at the start (whatever follows), or a whole state from before the mark."""
    from autoscaler.snapshot import owned

    assert owned(data) is ours
def test_the_writers_clock_skew_round_trips_and_may_be_absent() -> None:
    """``skew`` is optional: a store written before it existed reads as not known."""
    from autoscaler.snapshot import Snapshot, decode, encode

    assert decode(encode(Snapshot(targets={}, skew=(-1.5, -1.25)))).skew == (-1.5, -1.25)
    assert decode(encode(Snapshot(targets={}))).skew is None
