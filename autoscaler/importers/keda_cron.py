"""KEDA's ``cron`` trigger as one of our ``schedules``, only where the two agree exactly.

KEDA's cron scaler is active from a ``start`` firing until the next ``end`` firing (it is
active whenever the next ``end`` comes no later than the next ``start``), and while active
asks for ``desiredReplicas``: a floor. Ours is a daily window (``HH:MM``-``HH:MM`` on the
days it starts, wall-clock time) or a cron expression with an elapsed ``duration``. A
candidate of each form is built and its windows over the next ``HORIZON_DAYS`` (a year and
more, so both daylight-saving changes are in it) are compared with KEDA's, window by window;
the first that matches is used. Where neither matches (windows of varying length, an end
that fires twice between starts), the trigger is not carried over, and the reason says so.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from autoscaler.config.durations import format_duration
from autoscaler.schedules import (
    WEEKDAYS,
    DailyWindow,
    Schedule,
    Window,
    active_window,
    next_activation,
)

HORIZON_DAYS = 400
MAX_WINDOWS = 400
"""Windows compared at most (a year of daily ones): an every-minute schedule is judged on
its first 400, which bounds the time one trigger takes (about 0.1 s)."""
MAX_DISTINCT = 100
"""Different (start, end, timezone) triples converted per import: ~0.1 s each, so a hostile
file of thousands cannot make an import take hours."""
_FIVE_FIELDS = re.compile(r"\S+(\s+\S+){4}")
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                          "@hourly"})


class CronWindows:
    """The cron triggers of one import: each distinct window converted once, at most
    ``MAX_DISTINCT`` of them."""

    def __init__(self, limit: int = MAX_DISTINCT) -> None:
        self.limit = limit
        self._done: dict[tuple[str, str, str], dict[str, object] | str] = {}

    def schedule(self, start: str, end: str, timezone: str) -> dict[str, object] | str:
        key = (start, end, timezone)
        if key not in self._done:
            if len(self._done) >= self.limit:
                return (f"this import already converted {self.limit} different cron windows, "
                        "the most one import does: import the rest in another run")
            self._done[key] = cron_schedule(start, end, timezone)
        return self._done[key]


def cron_schedule(start: str, end: str, timezone: str,
                  now: datetime | None = None) -> dict[str, object] | str:
    """The schedule table (without name and bounds) equal to KEDA's window, or why none is."""
    now = now or datetime.now(UTC)
    problem = _problem(start, end, timezone)
    if problem is not None:
        return problem
    try:
        keda = _keda_windows(start, end, ZoneInfo(timezone), now)
    except CroniterError:
        keda = None
    if not keda:
        return "its end does not fire between every two firings of its start"
    daily = _daily(start, end, keda, ZoneInfo(timezone))
    if daily is not None:
        window, table = daily
        if _windows(Schedule(name="x", window=window, timezone=timezone), now, len(keda)) == keda:
            return {"timezone": timezone, **table}
    length = keda[0][1] - keda[0][0]
    if all(close - begin == length for begin, close in keda):
        # Our cron window starts at each firing of `start`, as KEDA's do, for `duration`.
        return {"timezone": timezone, "cron": start,
                "duration": format_duration(length.total_seconds())}
    return ("its windows are not all the same length or time of day (a window across a "
            "daylight-saving change, an end firing twice between starts): write them as "
            "several schedules")


def _problem(start: str, end: str, timezone: str) -> str | None:
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return "its timezone is not an IANA time zone name"
    for field, expression in (("start", start), ("end", end)):
        text = expression.strip()
        if not (_FIVE_FIELDS.fullmatch(text) or text in _DESCRIPTORS) \
                or not croniter.is_valid(text):
            return f"its {field} is not a five-field cron expression"
    if start.split() == end.split():
        return "its start and end are the same (KEDA refuses this too)"
    return None


def _keda_windows(start: str, end: str, zone: ZoneInfo,
                  now: datetime) -> list[tuple[datetime, datetime]] | None:
    """KEDA's active windows starting after ``now``: from each start firing to the last end
    firing before the next start; None when some start has no end before the next one."""
    horizon = now + timedelta(days=HORIZON_DAYS)
    starts = croniter(start, now.astimezone(zone))
    ends = croniter(end, now.astimezone(zone))
    begin: datetime = starts.get_next(datetime)
    close: datetime = ends.get_next(datetime)
    windows: list[tuple[datetime, datetime]] = []
    while begin < horizon and len(windows) < MAX_WINDOWS:
        following: datetime = starts.get_next(datetime)
        while close <= begin:
            close = ends.get_next(datetime)
        if close > following:
            return None  # active until some later end: not a window of ours
        last = close
        while (close := ends.get_next(datetime)) <= following:
            last = close
        windows.append((begin.astimezone(UTC), last.astimezone(UTC)))
        begin = following
    return windows


def _windows(schedule: Schedule, now: datetime, count: int) -> list[tuple[datetime, datetime]]:
    found: list[tuple[datetime, datetime]] = []
    at = now
    while len(found) < count and (start := next_activation(schedule, at)) is not None:
        span = active_window(schedule, start)
        if span is None:
            break
        found.append(span)
        at = start
    return found


def _daily(start: str, end: str, keda: list[tuple[datetime, datetime]],
           zone: ZoneInfo) -> tuple[Window, dict[str, object]] | None:
    """A daily window when both expressions fire at one fixed time of day."""
    first, last = _time_of_day(start), _time_of_day(end)
    if first is None or last is None:
        return None
    days = sorted({begin.astimezone(zone).weekday() for begin, _ in keda})
    table: dict[str, object] = {"start": first.strftime("%H:%M"), "end": last.strftime("%H:%M")}
    if len(days) < 7:
        table["days"] = [WEEKDAYS[day] for day in days]
    return DailyWindow(start=first, end=last, days=frozenset(days)), table


def _time_of_day(expression: str) -> time | None:
    fields = expression.split()
    if len(fields) != 5 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    if fields[2] != "*" or fields[3] != "*":
        return None
    minute, hour = int(fields[0]), int(fields[1])
    return time(hour, minute) if hour < 24 and minute < 60 else None
