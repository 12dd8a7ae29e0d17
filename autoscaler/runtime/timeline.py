"""The daemon's timeline: the ``now`` every window, period and stored timestamp is read on.

**Within one process** the timeline is the monotonic clock, anchored once to the wall clock
at start: ``now() = wall at start + (monotonic() - monotonic at start)``. A step of the
machine's clock (NTP setting it, an operator's ``date -s``) moves nothing: stabilization
windows and policy periods keep counting true seconds. The step is noticed (``wall_step``)
and said, never followed; the daemon's times stay on its start's clock until it restarts.

**Across processes** (the history in the store outlives the process that wrote it, and may
be read on another machine) timestamps are only comparable through a clock both processes
can see: the API server's. Every answer of the API server carries a ``Date`` header (one
second resolution): a request sent at monotonic ``s`` and answered at ``r`` with ``Date: D``
says the server's clock minus our monotonic clock lies in ``[D - r, D + 1 - s]``
(``ServerClock``, which intersects those intervals). The timeline's *skew* (its ``now``
minus the server's) is known to that interval's width, a few milliseconds once a few answers
have come. A store records its writer's skew (``Snapshot.skew``); a reader shifts the stored
timestamps by the difference of the two skews (``history_shift``) when the two clocks can be
told apart, taking the end of that difference's interval that makes them later (windows and
periods then hold longer, never shorter: the conservative side, off by at most the
interval's width), and clamps any timestamp still
later than its ``now`` to ``now`` (``restamp``): a writer whose skew is unknown can hold a
window or period for at most its length from the restore, never for as long as its clock
was ahead.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.snapshot import SavedTarget

STEP_TOLERANCE = 1.0
"""Seconds by which clocks may disagree before it is called a step or a skew: the ``Date``
header's resolution."""

Interval = tuple[float, float]
"""(lowest, highest) possible value."""


class ServerClock:
    """The API server's clock relative to our monotonic clock, from ``Date`` headers."""

    def __init__(self) -> None:
        self.offset: Interval | None = None
        """Server time minus monotonic time lies in this interval (None: no answer yet)."""
        self.steps = 0
        """Times an answer contradicted every earlier one (the server's clock stepped)."""
        self.observed: Callable[[], None] = lambda: None
        """Told of every answer that was used."""

    def observe(self, date: str | None, sent: float, received: float) -> None:
        """An answer's ``Date`` header, with the monotonic times the request was sent and
        its answer received."""
        if not date:
            return
        try:
            stamp = parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return
        low, high = stamp - received, stamp + 1.0 - sent
        if self.offset is None:
            self.offset = (low, high)
        elif low > self.offset[1] or high < self.offset[0]:
            self.steps += 1  # no single offset explains both: the server's clock moved
            self.offset = (low, high)
        else:
            self.offset = (max(low, self.offset[0]), min(high, self.offset[1]))
        self.observed()


class Timeline:
    """``now`` on the monotonic clock, anchored to the wall clock once, at start."""

    def __init__(self, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._wall, self._monotonic = wall, monotonic
        self._anchor = wall() - monotonic()
        self.server = ServerClock()
        self.stepped = 0.0
        """How far the wall clock has moved from the timeline, as last said."""

    def now(self) -> float:
        return self._anchor + self._monotonic()

    def wall_step(self) -> float | None:
        """How far the wall clock moved from the timeline since the last step said, when
        it moved by more than ``STEP_TOLERANCE`` (then it is said: the next call compares
        with where it is now); ``None`` otherwise."""
        moved = self._wall() - self.now()
        if abs(moved - self.stepped) <= STEP_TOLERANCE:
            return None
        step, self.stepped = moved - self.stepped, moved
        return step

    def skew(self) -> Interval | None:
        """The timeline minus the API server's clock (None until the server answered)."""
        offset = self.server.offset
        if offset is None:
            return None
        return self._anchor - offset[1], self._anchor - offset[0]


def history_shift(writer: Interval | None, reader: Interval | None) -> float | None:
    """Seconds to add to timestamps a writer of skew ``writer`` stored, to put them on the
    timeline of a reader of skew ``reader``; ``None`` when either skew is unknown.

    The shift lies in ``[reader low - writer high, reader high - writer low]``. When that
    interval holds 0 the clocks cannot be told apart (they agree to within what the ``Date``
    headers can tell): 0. Otherwise the end that makes stored times latest (windows and
    periods hold longer, never shorter)."""
    if writer is None or reader is None:
        return None
    low, high = reader[0] - writer[1], reader[1] - writer[0]
    return 0.0 if low <= 0.0 <= high else high


def restamp(saved: SavedTarget, *, shift: float, now: float) -> tuple[SavedTarget, bool]:
    """``saved`` with every timestamp moved by ``shift`` and none later than ``now``; and
    whether any had to be clamped to ``now``."""
    clamped = False

    def at(stamp: float) -> float:
        nonlocal clamped
        moved = stamp + shift
        if moved > now:
            clamped = True
            return now
        return moved

    history = saved.history
    moved = History(
        recommendations=tuple(Recommendation(replicas=r.replicas, timestamp=at(r.timestamp))
                              for r in history.recommendations),
        scale_up_events=tuple(_event(e, at(e.timestamp)) for e in history.scale_up_events),
        scale_down_events=tuple(_event(e, at(e.timestamp)) for e in history.scale_down_events))
    intent = saved.intent and dataclasses.replace(saved.intent, at=at(saved.intent.at))
    zero = saved.zero
    if zero.last_active is not None:
        zero = dataclasses.replace(zero, last_active=at(zero.last_active))
    first_seen = None if saved.first_seen is None else at(saved.first_seen)
    return dataclasses.replace(saved, history=moved, intent=intent, zero=zero,
                               first_seen=first_seen), clamped


def _event(event: ScaleEvent, stamp: float) -> ScaleEvent:
    return ScaleEvent(change=event.change, timestamp=stamp, outdated=event.outdated)
