"""A target's schedules in the config: converted, and rejected with field paths."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from autoscaler.commands.config_summary import summary
from autoscaler.config import ConfigError, parse_config
from autoscaler.schedules import AbsoluteWindow, CronWindow, DailyWindow

HEAD = """
[[autoscaler]]
namespace = "shop"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "web" }
minReplicas = 2
maxReplicas = 20
"""


def load(schedules: str):  # type: ignore[no-untyped-def]
    return parse_config(HEAD + f"schedules = [\n{schedules}\n]\n", source="s.toml")


def test_the_three_window_forms() -> None:
    """Daily (with days), cron with duration, and a one-off window all convert."""
    (target,) = load("""
  { name = "business", timezone = "Asia/Seoul", start = "08:00", end = "20:00", days = ["Mon-Fri"], minReplicas = 10 },
  { name = "nightly", cron = "0 2 * * *", duration = "3h", maxReplicas = 4 },
  { name = "sale", start = "2026-11-27T00:00", end = "2026-11-28T00:00", minReplicas = 15, immediate = true },
""").targets
    business, nightly, sale = target.schedules
    assert business.window == DailyWindow(start=time(8), end=time(20), days=frozenset(range(5)))
    assert (business.timezone, business.min_replicas, business.max_replicas) == ("Asia/Seoul", 10, None)
    assert nightly.window == CronWindow(cron="0 2 * * *", duration=timedelta(hours=3))
    assert nightly.timezone == "UTC"
    assert sale.window == AbsoluteWindow(start=datetime(2026, 11, 27), end=datetime(2026, 11, 28))
    assert sale.immediate


@pytest.mark.parametrize(
    ("schedule", "path", "message"),
    [
        ('{ cron = "61 * * * *", duration = "1h", minReplicas = 3 }', "schedules[0].cron",
         "not a valid cron expression"),
        ('{ cron = "0 * * * *", minReplicas = 3 }', "schedules[0].duration", "required with cron"),
        ('{ timezone = "Mars/Olympus", cron = "0 * * * *", duration = "1h", minReplicas = 3 }',
         "schedules[0].timezone", "unknown time zone"),
        ('{ start = "08:00", end = "20:00" }', "schedules[0]", "sets neither minReplicas"),
        ('{ start = "08:00", end = "20:00", minReplicas = 30 }', "schedules[0].minReplicas",
         "exceeds the target's maxReplicas (20)"),
        ('{ start = "08:00", end = "20:00", maxReplicas = 1 }', "schedules[0].maxReplicas",
         "below the target's minReplicas (2)"),
        ('{ start = "08:00", end = "20:00", minReplicas = 9, maxReplicas = 5 }',
         "schedules[0].maxReplicas", "greater than or equal to its minReplicas (9)"),
        ('{ start = "8am", end = "20:00", minReplicas = 3 }', "schedules[0].start",
         "expected a time of day"),
        ('{ start = "08:00", end = "20:00", days = ["Fry"], minReplicas = 3 }',
         "schedules[0].days[0]", "unknown day"),
        ('{ start = "2026-11-28T00:00", end = "2026-11-27T00:00", minReplicas = 3 }',
         "schedules[0].end", "must be after start"),
        ('{ start = "08:00", end = "20:00", minReplicas = 3, every = "day" }',
         "schedules[0].every", ""),
    ],
    ids=["bad-cron", "cron-without-duration", "unknown-zone", "no-bounds", "floor-over-max",
         "ceiling-under-min", "own-min-over-max", "bad-time", "bad-day", "end-before-start",
         "unknown-key"],
)
def test_broken_schedules_are_rejected_with_their_path(schedule: str, path: str,
                                                       message: str) -> None:
    """Each mistake names the schedule's field path, and the line it is on."""
    with pytest.raises(ConfigError) as caught:
        load(schedule)
    (issue,) = [i for i in caught.value.issues if i.path.startswith("autoscaler[0].schedules")]
    assert issue.path == f"autoscaler[0].{path}"
    assert message in issue.message
    assert issue.line == 8


def test_check_shows_the_next_activation() -> None:
    """`check` lists each schedule, whether it is active, and when it starts next (local)."""
    config = load('{ name = "business", timezone = "Asia/Seoul", start = "08:00", end = "20:00",'
                  ' days = ["Mon-Fri"], minReplicas = 10 }')
    text = summary(config, now=datetime(2026, 11, 28, 1, tzinfo=UTC))  # Saturday 10:00 KST
    assert ("schedule shop/Deployment/web 'business': minReplicas 10; inactive;"
            " next start 2026-11-30T08:00+09:00") in text
