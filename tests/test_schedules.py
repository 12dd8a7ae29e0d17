"""Scheduled bounds: windows, overlaps, time zones and daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from autoscaler.schedules import (
    AbsoluteWindow,
    CronWindow,
    DailyWindow,
    Schedule,
    active_window,
    effective_bounds,
    next_activation,
)

WEEKDAYS = frozenset(range(5))
SEOUL_BUSINESS = Schedule(
    name="business", timezone="Asia/Seoul", min_replicas=10,
    window=DailyWindow(start=time(8), end=time(20), days=WEEKDAYS),
)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("at", "active"),
    [
        (utc(2026, 11, 23, 0, 0), True),    # Mon 09:00 KST
        (utc(2026, 11, 22, 23, 0), True),   # Mon 08:00 KST: the start is inclusive
        (utc(2026, 11, 22, 22, 59), False),  # Mon 07:59 KST
        (utc(2026, 11, 23, 11, 0), False),  # Mon 20:00 KST: the end is exclusive
        (utc(2026, 11, 28, 1, 0), False),   # Sat 10:00 KST
    ],
    ids=["inside", "at-start", "before", "at-end", "weekend"],
)
def test_daily_window_in_its_time_zone(at: datetime, active: bool) -> None:
    """Weekdays 08:00-20:00 Asia/Seoul is judged on Seoul's wall clock."""
    assert (active_window(SEOUL_BUSINESS, at) is not None) is active


def test_daily_window_wrapping_midnight() -> None:
    """An end earlier than the start wraps past midnight, starting on the listed day."""
    night = Schedule(name="batch", window=DailyWindow(start=time(22), end=time(6), days=frozenset({4})))
    assert active_window(night, utc(2026, 11, 28, 3, 0)) is not None   # Sat 03:00, from Fri
    assert active_window(night, utc(2026, 11, 29, 3, 0)) is None       # Sun 03:00, Sat did not start


def test_cron_window_with_duration() -> None:
    """A cron start plus a duration: active from the firing for that long."""
    sched = Schedule(name="nightly", window=CronWindow(cron="0 2 * * *", duration=timedelta(hours=3)))
    assert active_window(sched, utc(2026, 11, 23, 4, 59)) == (utc(2026, 11, 23, 2), utc(2026, 11, 23, 5))
    assert active_window(sched, utc(2026, 11, 23, 5, 0)) is None


def test_absolute_window_for_a_campaign() -> None:
    """A one-off window in local time."""
    sched = Schedule(name="sale", timezone="America/New_York", window=AbsoluteWindow(
        start=datetime(2026, 11, 27, 0, 0), end=datetime(2026, 11, 28, 0, 0)))
    assert active_window(sched, utc(2026, 11, 27, 5, 0)) is not None   # 00:00 EST
    assert active_window(sched, utc(2026, 11, 27, 4, 59)) is None
    assert next_activation(sched, utc(2026, 11, 1)) == utc(2026, 11, 27, 5)
    assert next_activation(sched, utc(2026, 11, 27, 6)) is None


def test_wall_clock_start_survives_spring_forward() -> None:
    """08:00 Berlin is 07:00 UTC before the change and 06:00 UTC after it."""
    sched = Schedule(name="day", timezone="Europe/Berlin",
                     window=DailyWindow(start=time(8), end=time(18)))
    assert next_activation(sched, utc(2026, 3, 28, 12)) == utc(2026, 3, 29, 6)
    assert next_activation(sched, utc(2026, 3, 27, 12)) == utc(2026, 3, 28, 7)


def test_start_inside_the_dst_gap_begins_after_the_gap() -> None:
    """02:30 does not exist in Berlin on 2026-03-29: the window starts at 03:00 CEST."""
    sched = Schedule(name="odd", timezone="Europe/Berlin",
                     window=DailyWindow(start=time(2, 30), end=time(4)))
    assert active_window(sched, utc(2026, 3, 29, 1, 0)) == (utc(2026, 3, 29, 1), utc(2026, 3, 29, 2))
    assert active_window(sched, utc(2026, 3, 29, 0, 59)) is None


def test_fall_back_window_lasts_the_real_elapsed_time() -> None:
    """On the day clocks go back, 00:00-06:00 local lasts seven real hours."""
    sched = Schedule(name="n", timezone="Europe/Berlin",
                     window=DailyWindow(start=time(0), end=time(6)))
    start, end = active_window(sched, utc(2026, 10, 25, 3)) or (None, None)
    assert start is not None
    assert end is not None
    assert end - start == timedelta(hours=7)


def test_month_end_cron() -> None:
    """A month-end cron fires on the 30th in November and the 31st in December."""
    sched = Schedule(name="close", window=CronWindow(cron="0 0 L * *", duration=timedelta(days=1)))
    assert next_activation(sched, utc(2026, 11, 23)) == utc(2026, 11, 30)
    assert next_activation(sched, utc(2026, 12, 1)) == utc(2026, 12, 31)


def test_overlap_takes_largest_floor_and_smallest_ceiling() -> None:
    """Overlapping schedules: the largest floor and the smallest ceiling apply together."""
    always = DailyWindow(start=time(0), end=time(0))
    schedules = [
        Schedule(name="a", window=always, min_replicas=5, max_replicas=50),
        Schedule(name="b", window=always, min_replicas=8),
        Schedule(name="c", window=always, max_replicas=30, immediate=True),
    ]
    bounds = effective_bounds(schedules, min_replicas=2, max_replicas=100, at=utc(2026, 1, 1))
    assert (bounds.min_replicas, bounds.max_replicas) == (8, 30)
    assert bounds.active == ("a", "b", "c")
    assert not bounds.immediate  # "c" is immediate but sets no floor


def test_no_active_schedule_keeps_the_targets_bounds() -> None:
    """Outside every window the target's own minReplicas and maxReplicas apply."""
    bounds = effective_bounds([SEOUL_BUSINESS], min_replicas=2, max_replicas=20,
                              at=utc(2026, 11, 28, 1))
    assert (bounds.min_replicas, bounds.max_replicas, bounds.active) == (2, 20, ())


def test_floor_above_ceiling_keeps_the_floor() -> None:
    """A floor over a ceiling at run time: capacity wins, the ceiling rises to the floor."""
    always = DailyWindow(start=time(0), end=time(0))
    bounds = effective_bounds(
        [Schedule(name="f", window=always, min_replicas=12),
         Schedule(name="c", window=always, max_replicas=6)],
        min_replicas=1, max_replicas=20, at=utc(2026, 1, 1))
    assert (bounds.min_replicas, bounds.max_replicas) == (12, 12)
