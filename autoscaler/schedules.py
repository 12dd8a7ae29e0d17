"""Scheduled bounds: time windows that replace a target's minReplicas and/or maxReplicas.

A schedule is active during a window given as a cron expression plus a duration, a daily
window (``08:00``-``20:00`` on chosen weekdays, wrapping midnight if the end is earlier), or
an absolute window (a campaign). Times are wall-clock times in the schedule's IANA time zone,
so "08:00 Asia/Seoul" stays 08:00 across daylight-saving changes; durations are elapsed time.
A local time that does not exist on a DST day (02:30 when clocks jump from 02:00 to 03:00)
starts at the first instant after the gap.

While schedules are active, the largest active floor and the smallest active ceiling replace
the target's own bounds; with none active the target's bounds apply. Pure: ``at`` is passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from autoscaler.algorithm import AutoscalerSpec, Bounds

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass(frozen=True, slots=True, kw_only=True)
class CronWindow:
    cron: str
    duration: timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class DailyWindow:
    start: time
    end: time
    days: frozenset[int] = frozenset(range(7))
    """Weekdays (Monday = 0) on which the window *starts*."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AbsoluteWindow:
    start: datetime  # naive: local time in the schedule's zone
    end: datetime


Window = CronWindow | DailyWindow | AbsoluteWindow


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    name: str
    window: Window
    timezone: str = "UTC"
    min_replicas: int | None = None
    max_replicas: int | None = None
    immediate: bool = False
    """Jump to a new floor at once instead of going through the behavior policies."""

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActiveBounds:
    min_replicas: int
    max_replicas: int
    immediate: bool
    active: tuple[str, ...]
    """Names of the schedules in force."""


def active_window(schedule: Schedule, at: datetime) -> tuple[datetime, datetime] | None:
    """The (start, end) in UTC of the window containing ``at``, or None if inactive."""
    zone = schedule.zone
    window = schedule.window
    if isinstance(window, CronWindow):
        last: datetime = croniter(
            window.cron, at.astimezone(zone) + timedelta(microseconds=1)).get_prev(datetime)
        start = last.astimezone(UTC)
        end = start + window.duration
        return (start, end) if start <= at < end else None
    if isinstance(window, AbsoluteWindow):
        start, end = _local(window.start, zone), _local(window.end, zone)
        return (start, end) if start <= at < end else None
    local_day = at.astimezone(zone).date()
    for day in (local_day - timedelta(days=1), local_day):
        span = _daily_span(window, day, zone)
        if span is not None and span[0] <= at < span[1]:
            return span
    return None


def next_activation(schedule: Schedule, after: datetime) -> datetime | None:
    """The next start strictly after ``after`` (UTC), or None if there is none."""
    zone = schedule.zone
    window = schedule.window
    if isinstance(window, CronWindow):
        nxt: datetime = croniter(window.cron, after.astimezone(zone)).get_next(datetime)
        return nxt.astimezone(UTC)
    if isinstance(window, AbsoluteWindow):
        start = _local(window.start, zone)
        return start if start > after else None
    day = after.astimezone(zone).date()
    for offset in range(8):
        span = _daily_span(window, day + timedelta(days=offset), zone)
        if span is not None and span[0] > after:
            return span[0]
    return None


def effective_bounds(
    schedules: Sequence[Schedule], *, min_replicas: int, max_replicas: int, at: datetime
) -> ActiveBounds:
    """The bounds in force at ``at``: active schedules replace the target's own."""
    active = [s for s in schedules if active_window(s, at) is not None]
    floors = [s.min_replicas for s in active if s.min_replicas is not None]
    ceilings = [s.max_replicas for s in active if s.max_replicas is not None]
    floor = max(floors) if floors else min_replicas
    ceiling = min(ceilings) if ceilings else max_replicas
    # A floor above the ceiling cannot both hold: keep the capacity (the floor wins).
    ceiling = max(ceiling, floor)
    immediate = any(s.immediate for s in active if s.min_replicas is not None)
    return ActiveBounds(min_replicas=floor, max_replicas=ceiling, immediate=immediate,
                        active=tuple(s.name for s in active))


def bounds_at(
    schedules: Sequence[Schedule], spec: AutoscalerSpec, at: datetime
) -> tuple[Bounds | None, ActiveBounds | None]:
    """The core's ``Bounds`` for a target at ``at`` (None without schedules), and the view.

    With schedules, bounds are always gradual (moved into through the rate limits), unless an
    active floor is marked immediate.
    """
    if not schedules:
        return None, None
    active = effective_bounds(schedules, min_replicas=spec.min_replicas,
                              max_replicas=spec.max_replicas, at=at)
    return Bounds(min_replicas=active.min_replicas, max_replicas=active.max_replicas,
                  gradual=not active.immediate), active


def _local(moment: datetime, zone: ZoneInfo) -> datetime:
    """A naive local time to UTC. An ambiguous time (clocks set back) is its first occurrence;
    a time inside a DST gap (clocks set forward) becomes the first instant after the gap."""
    first = moment.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == moment:
        return first
    low, high = sorted((moment.replace(tzinfo=zone, fold=1).astimezone(UTC), first))
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).replace(tzinfo=None) >= moment:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


def _daily_span(window: DailyWindow, day: date, zone: ZoneInfo) -> tuple[datetime, datetime] | None:
    if day.weekday() not in window.days:
        return None
    start = _local(datetime.combine(day, window.start), zone)
    end_day = day + timedelta(days=1) if window.end <= window.start else day
    return start, _local(datetime.combine(end_day, window.end), zone)
