"""Durations as the config spells them: ``"15s"``, ``"5m"``, ``"1h30m"``, ``"250ms"`` or seconds.

The text form follows Go's ``time.ParseDuration`` (which Kubernetes flags use) minus the
units below a millisecond, plus Prometheus's days and weeks (``"7d"``, ``"1w"``: a weekly
season reads as one); a bare number is a count of seconds. Negative durations are
rejected here, so callers only check their own upper and lower bounds.
"""

from __future__ import annotations

import math
import re

from autoscaler.config.issues import quote

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"^(?:(?:\d+(?:\.\d+)?|\.\d+)(?:ms|s|m|h|d|w))+$")


class DurationError(ValueError):
    """The value is not a duration."""


def parse_duration(value: object) -> float:
    """Seconds from ``"1h30m"``-style text or a number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise DurationError(
            f"must be a duration such as \"30s\", \"5m\" or \"1h30m\", got {_show(value)}"
        )
    seconds = _parse_text(value) if isinstance(value, str) else float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"must be a non-negative duration, got {_show(value)}")
    return seconds


def _parse_text(text: str) -> float:
    compact = text.strip()
    if not _WHOLE.match(compact):
        raise DurationError(
            f"must be a duration such as \"30s\", \"5m\", \"1h30m\" or a number of seconds, "
            f"got {_show(text)}"
        )
    return sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(compact))


def _show(value: object) -> str:
    return quote(value) if isinstance(value, str) else repr(value)


def format_duration(seconds: float) -> str:
    """The shortest exact text form: ``300.0`` -> ``"5m"``, ``90`` -> ``"1m30s"``."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    remaining, text = int(seconds), ""
    for unit, size in (("h", 3600), ("m", 60)):
        count, remaining = divmod(remaining, size)
        text += f"{count}{unit}" if count else ""
    return text + (f"{remaining}s" if remaining or not text else "")
