"""The daemon's timeline: monotonic within a process, whatever the wall clock does; the API
server's clock from Date headers; stored timestamps moved onto a reader's clock on the side
that holds windows and periods longer, and never later than now."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.algorithm.zero_values import ZeroMemory
from autoscaler.runtime.clock import TEST_WALL_CLOCK_OFFSET, wall_clock
from autoscaler.runtime.timeline import ServerClock, Timeline, history_shift, restamp
from autoscaler.snapshot import Intent, SavedTarget

DATE = "Thu, 26 Nov 2026 02:00:00 GMT"
AT = 1_795_658_400.0
"""``DATE`` as a Unix time."""


class Clocks:
    """A wall clock and a monotonic clock a test moves."""

    def __init__(self) -> None:
        self.wall_time, self.monotonic_time = 1_000.0, 50.0

    def wall(self) -> float:
        return self.wall_time

    def monotonic(self) -> float:
        return self.monotonic_time

    def advance(self, seconds: float) -> None:
        self.wall_time += seconds
        self.monotonic_time += seconds


def timeline(clocks: Clocks) -> Timeline:
    return Timeline(clocks.wall, clocks.monotonic)


@pytest.mark.parametrize("step", [120.0, -120.0])
def test_a_wall_clock_step_moves_not_the_timeline_and_is_said_once(step: float) -> None:
    """now() follows the monotonic clock; the step is reported once, then not again."""
    clocks = Clocks()
    line = timeline(clocks)
    clocks.advance(10)
    assert line.now() == 1_010.0
    clocks.wall_time += step
    assert line.now() == 1_010.0
    assert line.wall_step() == step
    clocks.advance(5)
    assert (line.now(), line.wall_step()) == (1_015.0, None)


def test_a_drift_within_the_tolerance_is_no_step() -> None:
    clocks = Clocks()
    line = timeline(clocks)
    clocks.wall_time += 0.5
    assert line.wall_step() is None


def test_the_server_clock_narrows_as_answers_straddle_its_second() -> None:
    """Sent at 100.0 and answered at 100.2 with Date D: server - monotonic is within
    [D - 100.2, D + 1 - 100.0]; an answer at 100.9 with D + 1 narrows it from below."""
    server = ServerClock()
    server.observe(DATE, 100.0, 100.2)
    assert server.offset == pytest.approx((AT - 100.2, AT + 1 - 100.0))
    server.observe("Thu, 26 Nov 2026 02:00:01 GMT", 100.6, 100.9)
    assert server.offset == pytest.approx((AT + 1 - 100.9, AT + 1 - 100.6))
    assert server.steps == 0


def test_an_answer_no_offset_explains_is_a_server_step() -> None:
    server = ServerClock()
    server.observe(DATE, 100.0, 100.1)
    server.observe("Thu, 26 Nov 2026 02:05:00 GMT", 101.0, 101.1)
    assert server.steps == 1
    assert server.offset == pytest.approx((AT + 300 - 101.1, AT + 301 - 101.0))


@pytest.mark.parametrize("date", [None, "", "yesterday", "Thu, 99 Nov 2026 02:00:00 GMT"])
def test_no_date_or_a_garbled_one_teaches_nothing(date: str | None) -> None:
    server = ServerClock()
    server.observe(date, 1.0, 1.1)
    assert server.offset is None


def test_skew_is_the_timeline_minus_the_server() -> None:
    """A machine whose clock is 100 s behind the server's: skew about -100."""
    clocks = Clocks()
    clocks.wall_time, clocks.monotonic_time = AT - 100, 100.0
    line = timeline(clocks)
    assert line.skew() is None
    line.server.observe(DATE, 100.0, 100.1)
    low, high = line.skew()  # type: ignore[misc]
    assert low <= -100 <= high
    assert high - low == pytest.approx(1.1)


@pytest.mark.parametrize(("writer", "reader", "shift"), [
    ((-100.2, -100.0), (0.0, 0.1), 100.3),   # the writer was behind: its times move later
    ((100.0, 100.2), (0.0, 0.1), -99.9),     # it was ahead: earlier, by the least the
    ((0.0, 0.9), (-0.5, 0.5), 0.0),          # intervals allow; told apart from ours: none
    (None, (0.0, 0.1), None),
    ((0.0, 0.1), None, None),
], ids=["writer-behind", "writer-ahead", "indistinguishable", "writer-unknown", "ours-unknown"])
def test_history_shift_takes_the_latest_the_skews_allow(
    writer: tuple[float, float] | None, reader: tuple[float, float] | None,
    shift: float | None,
) -> None:
    assert history_shift(writer, reader) == (None if shift is None else pytest.approx(shift))


def test_restamp_moves_every_timestamp_and_clamps_those_past_now() -> None:
    saved = SavedTarget(
        history=History(recommendations=(Recommendation(replicas=4, timestamp=900.0),),
                        scale_up_events=(ScaleEvent(change=2, timestamp=950.0, outdated=True),),
                        scale_down_events=(ScaleEvent(change=1, timestamp=990.0),)),
        intent=Intent(previous=4, desired=3, resource_version="7", at=980.0),
        zero=ZeroMemory(scaled_to_zero=True, last_active=940.0))
    moved, clamped = restamp(saved, shift=50.0, now=1_000.0)
    assert clamped
    assert moved.history.recommendations == (Recommendation(replicas=4, timestamp=950.0),)
    assert moved.history.scale_up_events == (
        ScaleEvent(change=2, timestamp=1_000.0, outdated=True),)
    assert moved.history.scale_down_events == (ScaleEvent(change=1, timestamp=1_000.0),)
    assert moved.intent is not None
    assert moved.intent.at == 1_000.0
    assert moved.zero == ZeroMemory(scaled_to_zero=True, last_active=990.0)
    assert restamp(saved, shift=0.0, now=1_000.0) == (saved, False)


def test_the_test_hook_offsets_the_wall_clock_from_its_file(tmp_path: Path) -> None:
    """Only with the variable set; the file is read again when it changes."""
    path = tmp_path / "offset"
    path.write_text("120\n")
    clock = wall_clock({TEST_WALL_CLOCK_OFFSET: str(path)})
    assert clock() - time.time() == pytest.approx(120, abs=1)
    path.write_text("-30.5\n")
    assert clock() - time.time() == pytest.approx(-30.5, abs=1)
    assert wall_clock({}) is time.time
