"""Durations: Go-style text or seconds, never negative."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.config.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(("value", "seconds"), [
    ("15s", 15.0), ("5m", 300.0), ("1h30m", 5400.0), ("250ms", 0.25), ("1.5s", 1.5),
    ("1d", 86400.0), ("1w", 604800.0), (" 2m ", 120.0), (15, 15.0), (0.5, 0.5), (0, 0.0),
], ids=["s", "m", "h-m", "ms", "fraction", "d", "w", "padded", "int", "float", "zero"])
def test_parses(value: object, seconds: float) -> None:
    """Text with units and plain numbers of seconds both parse."""
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", [
    "15", "5 m", "m", "", "1h30", "-5s", -1, float("inf"), True, [15], "15sec",
], ids=["no-unit", "space", "no-number", "empty", "trailing-number", "negative-text",
        "negative", "inf", "bool", "list", "word-unit"])
def test_rejects(value: object) -> None:
    """Anything else is a DurationError naming the value."""
    with pytest.raises(DurationError, match="must be a"):
        parse_duration(value)


@given(st.integers(min_value=0, max_value=10**7))
def test_format_round_trips(seconds: int) -> None:
    """format_duration's text parses back to the same number of seconds."""
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(("seconds", "text"), [
    (300, "5m"), (90, "1m30s"), (0, "0s"), (3600, "1h"), (0.25, "0.25s"),
], ids=["minutes", "mixed", "zero", "hour", "fraction"])
def test_format(seconds: float, text: str) -> None:
    """The shortest exact form."""
    assert format_duration(seconds) == text
