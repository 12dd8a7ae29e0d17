"""The per-target history that stabilization windows and policies depend on, as bytes that
survive a restart: the snapshot and its codec.

Upstream keeps recommendations and scale events in controller memory and loses them when
kube-controller-manager restarts, so the next pass may scale down early. We serialize them
(``encode``/``decode``) and keep them in a store (the runtime's ``StateStore`` port): a file
under systemd or memory (``autoscaler.adapters.local_state``), a ConfigMap in the cluster
(``autoscaler.adapters.kube.configmap_store``).

What a snapshot carries besides each target's ``History``:

- ``intent``: a scale write about to be made (previous and desired count, the resourceVersion
  it is sent with). It is made durable *before* the write, and replaced by the write's
  outcome once that is known, so a process killed between the two leaves a record the next
  run resolves against the API server before that target's next decision: the write landed
  if the object holds its desired count (``runtime.intents.outcome_of``). ``"wa"``
  (optional): the counts of earlier writes it replaced that may still land (sent over the
  same resourceVersion: at most one of them all does); a reader without it sees one intent.
- ``forecasts`` (optional, ``"f"`` in the JSON): each predicted metric's bucketed history
  (``autoscaler.algorithm.forecast.Series``), so a restart or failover keeps a scored model.
  Values are stored to six significant digits; a state without it reads as no history.
- ``skew`` (optional): the writer's clock minus the API server's, as an interval, so a
  reader on another clock can put the timestamps on its own (``runtime.timeline``).
- ``clean``: true only in a snapshot written at a graceful stop. A run that restores a clean
  snapshot marks the store unclean before it acts.
- ``journaled`` (format 3): the store is written after every pass, before anything is done
  on what the pass recommended, so even an unclean one holds every recommendation a later
  decision may need (only those: ``essential_recommendations``; a pass whose record was
  never written did nothing, and counts as not made). An unclean store of an earlier format
  lacks the recommendations made since its last write; the runtime bridges that gap as
  upstream treats a fresh start (``autoscaler.algorithm.bridge_gap``).

Reading is bounded: a store larger than ``MAX_STORED_BYTES`` or inflating past
``MAX_INFLATED_BYTES`` is refused without being inflated further; anything ``decode``
cannot read is a ``StateFormatError``, never an empty history.

Which bytes are ours (``owned``): every store we write starts with ``HEADER``, a gzip header
whose file-name field is our mark (``autoscaler-state``), so ``zcat`` still reads it and any
gzip reader skips the mark. A truncated or corrupt store of ours keeps its first bytes, so it
is still ours, to be set aside; bytes without the mark are ours only if they decode whole as
a state an earlier version wrote (before the mark). Anything else is someone else's file:
refused and left as it is, never set aside or replaced (``autoscaler.adapters.local_state``,
``autoscaler.config.files``).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.algorithm.behavior import essential_recommendations
from autoscaler.algorithm.forecast import Series
from autoscaler.algorithm.zero_values import ZeroMemory
from autoscaler.errors import StateNotOursError, StateUnavailableError

FORMAT_VERSION = 3
"""3: written after every pass (``Snapshot.journaled``); 2: only around scale writes."""
READABLE_VERSIONS = (1, 2, 3)
MAX_STORED_BYTES = 16 * 1024 * 1024
"""A stored (compressed) state larger than this is not read: ~10x the 10,000-target state."""
MAX_INFLATED_BYTES = 64 * 1024 * 1024
"""A state inflating past this is refused within it (a gzip bomb cannot take the memory)."""
MARK = b"autoscaler-state"
HEADER = (b"\x1f\x8b\x08"  # gzip, deflate
          b"\x08"  # FNAME: a file-name field follows the fixed header; it holds our mark
          b"\x00\x00\x00\x00"  # no mtime: equal histories are equal bytes
          b"\x04\xff"  # the fastest level; no particular OS
          + MARK + b"\x00")
"""How every store this daemon writes begins (27 bytes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Intent:
    """A scale write about to be sent: durable before the PUT, resolved after it."""

    previous: int
    desired: int
    resource_version: str
    """The resourceVersion the PUT carries: if the object still has it, the PUT did not land
    (if not, the object changed, by our write or anyone's: its count tells)."""
    at: float
    also: tuple[int, ...] = ()
    """The desired counts of earlier writes this one replaced while they were on their way:
    sent over the same resourceVersion, so at most one of them and this one lands, and a
    fresh read holding one of these counts says that write landed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedTarget:
    history: History = field(default_factory=History)
    intent: Intent | None = None
    zero: ZeroMemory = field(default_factory=ZeroMemory)
    """Scale to zero: whether we took the target to 0 (only then do we wake it up)."""
    forecasts: Mapping[str, Series] = field(default_factory=dict)
    """Each predicted metric's history, by ``metric_key``."""
    first_seen: float | None = None
    """When a run first decided on the target (``"fs"``): a target a reload added after its
    daemon started counts its initial cooldown from it, wherever it moves."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    targets: Mapping[str, SavedTarget]
    clean: bool = False
    """Written at a graceful stop: nothing happened after it."""
    saved_at: float = 0.0
    journaled: bool = True
    """Written after every pass (format 3): it holds every recommendation a pass made that
    can still decide a window, so a run killed at any moment left nothing its successor must
    make up for. A store of format 2 or 1 was written only around scale writes: an unclean
    one lacks the recommendations made since (``autoscaler.algorithm.bridge_gap``)."""
    skew: tuple[float, float] | None = None
    """The writer's clock minus the API server's, (lowest, highest); None: not known."""


class StateFormatError(ValueError):
    """The stored bytes are not a state this version can read."""


def encode(snapshot: Snapshot) -> bytes:
    """Compact, gzip-compressed JSON: 10,000 targets must fit a 1 MiB ConfigMap (they take
    ~50 KB)."""
    return encode_entries([encode_entry(key, target)
                           for key, target in sorted(snapshot.targets.items())],
                          clean=snapshot.clean, saved_at=snapshot.saved_at, skew=snapshot.skew)


def encode_entries(entries: Iterable[str], *, clean: bool, saved_at: float,
                   skew: tuple[float, float] | None = None) -> bytes:
    """``encode`` from each target's ``encode_entry`` text, which a caller may keep from an
    earlier write for a target whose entry did not change. Gzip level 1: at 10,000 targets
    half the time of the default level for 50 KB instead of 38."""
    targets = ",".join(entries)
    clock = "" if skew is None else f'"skew":[{float(skew[0])!r},{float(skew[1])!r}],'
    text = (f'{{"version":{FORMAT_VERSION},"clean":{"true" if clean else "false"},'
            f'"savedAt":{float(saved_at)!r},{clock}"targets":{{{targets}}}}}')
    return pack(text.encode())


def pack(text: bytes) -> bytes:
    """``text`` as gzip data under our ``HEADER`` (what ``gzip.compress`` writes, plus the mark)."""
    deflate = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(text) + deflate.flush()
    return HEADER + body + struct.pack("<II", zlib.crc32(text), len(text) & 0xFFFFFFFF)


def marked(data: bytes) -> bool:
    """Whether ``data`` starts with our mark: a store of ours, whatever state the rest is in."""
    return data.startswith(HEADER)


def owned(data: bytes) -> bool:
    """Whether ``data`` is recognisably a store of ours: marked, or (before the mark) a state
    an earlier version wrote that decodes whole."""
    if marked(data):
        return True
    try:
        decode(data)
    except StateFormatError:
        return False
    return True


def encode_entry(key: str, target: SavedTarget) -> str:
    """``"key":{...}``: one target's entry of the ``targets`` object."""
    return f"{json.dumps(key)}:{encode_target(target)}"


def encode_target(target: SavedTarget) -> str:
    """One target's entry as JSON text, written directly (10,000 targets: ~4x faster than
    building the lists for ``json.dumps``). Timestamps and counts are finite numbers, so
    their ``repr`` is their JSON."""
    history = target.history
    parts = [
        '"r":[' + ",".join(f"[{r.replicas},{float(r.timestamp)!r}]"
                           for r in essential_recommendations(history.recommendations)) + "]",
        '"u":[' + ",".join(map(_event_text, history.scale_up_events)) + "]",
        '"d":[' + ",".join(map(_event_text, history.scale_down_events)) + "]",
    ]
    intent = target.intent
    if intent is not None:
        parts.append(f'"w":[{intent.previous},{intent.desired},'
                     f'{json.dumps(intent.resource_version)},{float(intent.at)!r}]')
        if intent.also:
            parts.append('"wa":[' + ",".join(map(str, intent.also)) + "]")
    zero = target.zero
    if zero != _NO_ZERO:
        last = "null" if zero.last_active is None else repr(float(zero.last_active))
        parts.append(f'"z":[{"true" if zero.scaled_to_zero else "false"},{last}]')
        if zero.adopted_from is not None:
            parts.append(f'"za":{json.dumps(zero.adopted_from)}')
    if target.first_seen is not None:
        parts.append(f'"fs":{float(target.first_seen)!r}')
    if target.forecasts:
        parts.append('"f":' + json.dumps({key: _series_to_json(series)
                                          for key, series in target.forecasts.items()},
                                         separators=(",", ":")))
    return "{" + ",".join(parts) + "}"


def _event_text(event: ScaleEvent) -> str:
    return f"[{event.change},{float(event.timestamp)!r},{'true' if event.outdated else 'false'}]"


def decode(data: bytes) -> Snapshot:
    """The inverse of ``encode`` (and of version 1's); ``StateFormatError`` on anything else."""
    body = _json(inflate(data))
    if not isinstance(body, dict) or body.get("version") not in READABLE_VERSIONS:
        version = body.get("version") if isinstance(body, dict) else None
        raise StateFormatError(f"state has an unknown format (version {version!r}; this "
                               f"daemon reads versions {', '.join(map(str, READABLE_VERSIONS))})")
    targets = body.get("targets")
    if not isinstance(targets, dict):
        raise StateFormatError("state has no 'targets' object")
    try:
        saved_at = _time(body.get("savedAt", 0.0))
        skew = body.get("skew")
        skew = None if skew is None else (_time(skew[0]), _time(skew[1]))
    except (TypeError, ValueError, OverflowError, IndexError, KeyError) as error:
        raise StateFormatError(f"state has a malformed savedAt or skew: {error}") from error
    return Snapshot(
        targets={str(key): _target_from_json(value) for key, value in targets.items()},
        # Version 1 was written every few seconds while running, never at a stop.
        clean=body.get("version") != 1 and body.get("clean") is True,
        saved_at=saved_at, skew=skew,
        journaled=body.get("version") == FORMAT_VERSION,
    )


def inflate(data: bytes, *, limit: int = MAX_INFLATED_BYTES) -> bytearray:
    """Gunzip ``data``, refusing (``StateFormatError``) to produce more than ``limit`` bytes.

    Inflated a mebibyte at a time into one growing buffer, so a refused bomb costs about
    ``limit`` bytes of memory, not twice that.
    """
    if not data:
        raise StateFormatError("state is empty")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing
    out = bytearray()
    pending = data
    try:
        while not inflater.eof:
            out += inflater.decompress(pending, _CHUNK)
            pending = inflater.unconsumed_tail
            if len(out) > limit:
                raise StateFormatError(
                    f"state inflates past the limit of {limit // (1024 * 1024)} MiB (refused)")
            if not pending and not inflater.eof:
                out += inflater.flush()
                if not inflater.eof:
                    raise StateFormatError("state is truncated (the gzip stream does not end)")
    except zlib.error as error:
        raise StateFormatError(f"state is not gzip-compressed: {error}") from error
    return out


_CHUNK = 1024 * 1024


def _json(text: bytes | bytearray) -> Any:
    # ValueError covers malformed JSON, bad UTF-8 and an integer past Python's 4,300 digits.
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise StateFormatError(f"state is not JSON: {error}") from error


_INT32 = 2**31 - 1


def _count(raw: Any) -> int:
    """A replica count or change as Kubernetes holds one (int32), or ``ValueError``."""
    value = int(raw)  # an infinity raises OverflowError, a ValueError's sibling: see callers
    if not -_INT32 - 1 <= value <= _INT32:
        raise ValueError(f"{value:.3g} is beyond int32")
    return value


_LATEST = 1e11
"""Seconds of Unix time past which no saved bucket can be (the year 5138)."""


def _bucket(raw: Any, step: float) -> int:
    """A forecast bucket number whose time a clock can reach, or ``ValueError``."""
    value = int(raw)
    if not abs(value) * step <= _LATEST:
        raise ValueError(f"bucket {value:.3g} of {step:g}s is past any clock")
    return value


def _time(raw: Any) -> float:
    """A finite number (a Unix time, a forecast value), or ``ValueError`` (an event at +inf
    would hold scale-downs forever and never be pruned)."""
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"the time {value} is not finite")
    return value


_NO_ZERO = ZeroMemory()


def _series_to_json(series: Series) -> list[Any]:
    return [series.step, series.first, [None if v is None else _short(v) for v in series.values],
            series.open_index, _short(series.open_sum), series.open_count]


def _short(value: float) -> float:
    return float(f"{value:.6g}")


def _series_from_json(raw: Any) -> Series:
    step, first, values, open_index, open_sum, open_count = raw
    step = _time(step)
    if not step > 0 or not isinstance(values, list):
        raise ValueError(f"a forecast history needs a positive step and a list, got {raw!r:.80}")
    return Series(step=step, first=_bucket(first, step),
                  values=tuple(None if v is None else _time(v) for v in values),
                  open_index=None if open_index is None else _bucket(open_index, step),
                  open_sum=_time(open_sum), open_count=int(open_count))


def _target_from_json(value: Any) -> SavedTarget:
    try:
        history = History(
            recommendations=tuple(
                Recommendation(replicas=_count(r), timestamp=_time(t)) for r, t in value["r"]
            ),
            scale_up_events=tuple(_event(e) for e in value["u"]),
            scale_down_events=tuple(_event(e) for e in value["d"]),
        )
        intent = None
        if value.get("w") is not None:
            previous, desired, version, at = value["w"]
            intent = Intent(previous=_count(previous), desired=_count(desired),
                            resource_version=str(version), at=_time(at),
                            also=tuple(_count(c) for c in value.get("wa") or ()))
        zero = _NO_ZERO
        if value.get("z") is not None:
            scaled, last_active = value["z"]
            adopted = value.get("za")
            zero = ZeroMemory(scaled_to_zero=scaled is True,
                              last_active=None if last_active is None else _time(last_active),
                              adopted_from=None if adopted is None else str(adopted))
        forecasts = {str(key): _series_from_json(raw)
                     for key, raw in (value.get("f") or {}).items()}
        first_seen = None if value.get("fs") is None else _time(value["fs"])
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as error:
        raise StateFormatError(f"state has a malformed history: {error!r}") from error
    return SavedTarget(history=history, intent=intent, zero=zero, forecasts=forecasts,
                       first_seen=first_seen)


def _event(raw: Any) -> ScaleEvent:
    change, timestamp, outdated = raw
    return ScaleEvent(change=_count(change), timestamp=_time(timestamp), outdated=bool(outdated))


def set_aside_name(name: str, now: float) -> str:
    """``name`` with a UTC timestamp: where an undecodable state is kept."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dt%H%M%Sz")
    return f"{name}.unreadable-{stamp}"


# --- the state file ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Stored:
    """A state file as read: its bytes, and which file it was (to notice a later swap)."""

    data: bytes
    identity: tuple[int, int]
    """``(st_dev, st_ino)``."""


def read_store(path: Path, *, whole: bool = True) -> Stored | None:
    """The state file at ``path`` if it is ours (``owned``); ``None`` if there is none.

    The file is opened without following a link and without blocking (a FIFO), and read
    within ``MAX_STORED_BYTES``. ``StateNotOursError``: anything not recognisably ours (a
    link, not a regular file, a file we may not read, bytes that are not ours); it was only
    read. ``StateUnavailableError``: it could not be read now (an I/O error). A store of ours
    over the size limit is a ``StateFormatError`` (set it aside). ``whole=False`` reads only
    what it takes to tell whether the file is ours (the mark, or else all of it).
    """
    try:
        descriptor = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _unusable(path, error) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
            raise StateNotOursError(str(path), f"it is {kind}, not a state file")
        data = _read_at_most(descriptor, len(HEADER))
        if not marked(data) or whole:
            data += _read_at_most(descriptor, MAX_STORED_BYTES + 1 - len(data))
    except OSError as error:
        raise _unusable(path, error) from None
    finally:
        os.close(descriptor)
    if len(data) > MAX_STORED_BYTES:
        limit = f"over the limit of {MAX_STORED_BYTES // (1024 * 1024)} MiB"
        if marked(data):
            raise StateFormatError(f"it is {limit}")
        raise StateNotOursError(str(path), f"it is not a state file of this daemon ({limit}, "
                                "without the state file's mark)")
    if not owned(data):
        what = "it is empty" if not data else (
            "it neither starts with the state file's mark nor decodes as a state an earlier "
            "version wrote")
        raise StateNotOursError(str(path), f"it is not a state file of this daemon ({what})")
    return Stored(data=data, identity=(info.st_dev, info.st_ino))


_READ_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
               | getattr(os, "O_NOFOLLOW", 0))
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


def _unusable(path: Path, error: OSError) -> Exception:
    """What an ``OSError`` on the state file means: transient (try again) or not ours."""
    if error.errno == errno.ELOOP:
        return StateNotOursError(str(path), "it is a symbolic link, and the daemon follows no "
                                 "link to its state file (give the file's own path)")
    if error.errno in {errno.EACCES, errno.EPERM}:
        return StateNotOursError(str(path), f"cannot read it ({error.strerror}), so cannot "
                                 "tell that it is a state file")
    if error.errno in {errno.ENOTDIR, errno.ENXIO, errno.EISDIR}:
        return StateNotOursError(str(path), error.strerror or str(error))
    return StateUnavailableError(f"cannot read {path}: {error.strerror or error}")


def _read_at_most(descriptor: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    while limit > 0:
        chunk = os.read(descriptor, min(limit, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)
