"""A warning that repeats every pass is said when it starts, changes or ends, and every few
minutes in between with a count."""

from __future__ import annotations

import structlog
from structlog.testing import capture_logs

from autoscaler.observability.repeats import RepeatedWarnings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def passes(repeats: RepeatedWarnings, clock: Clock, reasons: list[str | None],
           period: float = 15.0) -> list[dict[str, object]]:
    """One pass every ``period`` seconds; ``None``: the metric is fine that pass."""
    with capture_logs() as logs:
        for reason in reasons:
            if reason is None:
                repeats.clear("web/rps", "metric available again")
            else:
                repeats.warn("web/rps", "metric unavailable", reason=reason)
            clock.now += period
    return logs


def test_a_warning_every_pass_is_logged_once_then_reminded_with_a_count() -> None:
    """An hour of passes every 15 s: the first, then one reminder each 5 minutes."""
    clock = Clock()
    logs = passes(RepeatedWarnings(structlog.get_logger(), clock=clock), clock,
                  ["empty result"] * 240)
    assert len(logs) == 12
    assert "repeated" not in logs[0]
    assert [log["repeated"] for log in logs[1:]] == [20] * 11
    assert logs[1]["for_seconds"] == 300


def test_a_change_of_reason_and_the_end_are_said_at_once() -> None:
    """A new reason is logged with the old one; the end is logged once, at info."""
    clock = Clock()
    logs = passes(RepeatedWarnings(structlog.get_logger(), clock=clock), clock,
                  ["empty", "empty", "timeout", None, None, "empty"])
    assert [(log["log_level"], log["event"], log.get("reason")) for log in logs] == [
        ("warning", "metric unavailable", "empty"),
        ("warning", "metric unavailable", "timeout"),
        ("info", "metric available again", None),
        ("warning", "metric unavailable", "empty")]
    assert logs[1]["previous_reason"] == "empty"
    assert logs[2]["previous_reason"] == "timeout"


def test_nothing_ongoing_is_falsy() -> None:
    """Callers skip the per-metric clear while nothing is ongoing."""
    repeats = RepeatedWarnings(structlog.get_logger(), clock=Clock())
    assert not repeats
    with capture_logs():
        repeats.warn("k", "e", reason="r")
    assert repeats
