"""A target's ``schedules``: validated into ``autoscaler.schedules.Schedule`` values.

Each schedule is a cron expression with a ``duration``, a daily window (``start``/``end`` as
``HH:MM``, optional ``days`` such as ``["Mon-Fri"]``), or an absolute window (``start``/``end``
as local ISO date-times); a ``timezone`` (IANA name, default UTC); and ``minReplicas``,
``maxReplicas`` or both, with ``immediate`` to jump to a new floor instead of going through
the behavior policies. Problems are reported with their field paths; a floor above a ceiling
is an error wherever the file alone can tell, and so is a cron expression that never fires
(``0 0 30 2 *``): it must fire within ``CRON_HORIZON_YEARS`` of the time the file is loaded.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from autoscaler.config.fields import show
from autoscaler.config.issues import Loc, Problems, did_you_mean
from autoscaler.config.schema import ScheduleModel
from autoscaler.schedules import (
    WEEKDAYS,
    AbsoluteWindow,
    CronWindow,
    DailyWindow,
    Schedule,
    Window,
)

CRON_HORIZON_YEARS = 5
"""A cron expression must fire within this many years (February 29 fires every four)."""

_CRON_FIELDS = 6
"""Minute to day of week, plus croniter's seconds; a seventh field would be a year."""


def convert_schedules(
    models: list[ScheduleModel] | None, *, loc: Loc, problems: Problems,
    min_replicas: int | None, max_replicas: int | None,
) -> tuple[Schedule, ...]:
    schedules: list[Schedule] = []
    names: set[str] = set()
    for index, model in enumerate(models or ()):
        where = (*loc, "schedules", index)
        before = len(problems.items)
        name = model.name or f"schedule-{index}"
        if name in names:
            problems.add((*where, "name"), f"duplicate schedule name {show(name)}")
        names.add(name)
        zone = _zone(model.timezone or "UTC", (*where, "timezone"), problems)
        window = _window(model, where, problems, zone)
        _check_bounds(model, where, problems, min_replicas, max_replicas)
        if len(problems.items) == before and window is not None and zone is not None:
            schedules.append(Schedule(
                name=name, window=window, timezone=zone, min_replicas=model.min_replicas,
                max_replicas=model.max_replicas, immediate=bool(model.immediate)))
    return tuple(schedules)


def _zone(name: str, where: Loc, problems: Problems) -> str | None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        problems.add(where, f"unknown time zone {show(name)} (expected an IANA name such as "
                     "'Europe/Berlin' or 'UTC')")
        return None
    return name


def _window(
    model: ScheduleModel, where: Loc, problems: Problems, zone: str | None
) -> Window | None:
    if model.cron is not None:
        return _cron_window(model, model.cron, where, problems, zone)
    if model.start is None or model.end is None:
        problems.add(where, "needs either cron and duration, or start and end")
        return None
    if model.duration is not None:
        problems.add((*where, "duration"), "only with cron (start and end give the window)")
    return _span_window(model, model.start, model.end, where, problems)


def _cron_window(
    model: ScheduleModel, cron: str, where: Loc, problems: Problems, zone: str | None
) -> Window | None:
    for key, value in (("start", model.start), ("end", model.end), ("days", model.days)):
        if value is not None:
            problems.add((*where, key), "not allowed with cron (use duration)")
    if not croniter.is_valid(cron):
        problems.add((*where, "cron"), f"not a valid cron expression: {show(cron)}")
        return None
    if len(cron.split()) > _CRON_FIELDS:
        # A year field fires in one year only, and before it there is no last firing
        # to measure the window from: a one-off window is start and end.
        problems.add((*where, "cron"), f"a year field is not supported: {show(cron)} (for a "
                     "one-off window use start and end)")
        return None
    if zone is not None and not _fires(cron, zone):
        problems.add((*where, "cron"), f"never fires: {show(cron)} matches no time in the "
                     f"next {CRON_HORIZON_YEARS} years (in {zone})")
        return None
    if model.duration is None:
        problems.add((*where, "duration"), "required with cron (how long each run lasts)")
        return None
    return CronWindow(cron=cron, duration=timedelta(seconds=model.duration))


def _fires(cron: str, zone: str) -> bool:
    """Whether ``cron`` fires within the horizon from now in ``zone``."""
    try:
        croniter(cron, datetime.now(ZoneInfo(zone)),
                 max_years_between_matches=CRON_HORIZON_YEARS).get_next(datetime)
    except CroniterError:
        return False
    return True


def _span_window(
    model: ScheduleModel, start: str, end: str, where: Loc, problems: Problems
) -> Window | None:
    daily = _parse_time(start), _parse_time(end)
    if daily[0] is not None and daily[1] is not None:
        days = _days(model.days, (*where, "days"), problems)
        return None if days is None else DailyWindow(start=daily[0], end=daily[1], days=days)
    absolute = _parse_datetime(start), _parse_datetime(end)
    if absolute[0] is None or absolute[1] is None:
        bad = "start" if daily[0] is None and absolute[0] is None else "end"
        problems.add((*where, bad), "expected a time of day 'HH:MM' (daily) or a local date-time"
                     f" 'YYYY-MM-DDTHH:MM' (one-off), both alike, got "
                     f"{show(getattr(model, bad))}")
        return None
    if model.days is not None:
        problems.add((*where, "days"), "only with a daily window (start and end as 'HH:MM')")
    if absolute[1] <= absolute[0]:
        problems.add((*where, "end"), "must be after start")
        return None
    return AbsoluteWindow(start=absolute[0], end=absolute[1])


def _parse_time(text: str) -> time | None:
    try:
        parsed = time.fromisoformat(text)
    except ValueError:
        return None
    return parsed if len(text) in (5, 8) and parsed.tzinfo is None else None


def _parse_datetime(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is None and "T" in text else None


def _days(days: list[str] | None, where: Loc, problems: Problems) -> frozenset[int] | None:
    if days is None:
        return frozenset(range(7))
    chosen: set[int] = set()
    for index, item in enumerate(days):
        first, _, last = item.partition("-")
        try:
            start = WEEKDAYS.index(first)
            end = WEEKDAYS.index(last) if last else start
        except ValueError:
            wrong = first if first not in WEEKDAYS else last
            problems.add((*where, index), f"unknown day {show(wrong)}"
                         f"{did_you_mean(wrong, WEEKDAYS, listing='days')}")
            continue
        span = range(start, end + 1) if end >= start else [*range(start, 7), *range(end + 1)]
        chosen.update(span)
    return frozenset(chosen) if chosen else None


def _check_bounds(model: ScheduleModel, where: Loc, problems: Problems,
                  min_replicas: int | None, max_replicas: int | None) -> None:
    low, high = model.min_replicas, model.max_replicas
    if low is None and high is None:
        problems.add(where, "sets neither minReplicas nor maxReplicas")
    elif low is not None and high is not None and low > high:
        problems.add((*where, "maxReplicas"),
                     f"must be greater than or equal to its minReplicas ({low}), got {high}")
    elif low is not None and high is None and max_replicas is not None and low > max_replicas:
        problems.add((*where, "minReplicas"), f"a floor of {low} exceeds the target's "
                     f"maxReplicas ({max_replicas}); set the schedule's maxReplicas too")
    elif high is not None and low is None and high < (1 if min_replicas is None else min_replicas):
        problems.add((*where, "maxReplicas"), f"a ceiling of {high} is below the target's "
                     f"minReplicas ({1 if min_replicas is None else min_replicas}); set the "
                     "schedule's minReplicas too")
