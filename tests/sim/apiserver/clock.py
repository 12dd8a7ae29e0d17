"""Injectable clocks: the simulator's notion of now for timestamps and pod lifecycle delays.

``SystemClock`` follows the wall clock (short real delays); ``ManualClock`` only moves when a
test calls ``advance``, so closed-loop tests run without sleeping. Both give aware UTC times,
and a monotonic reading in seconds (``monotonic``) that stamps the request log and the Lease
history, so an oracle orders what happened by one clock that never steps back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def seconds_until(self, when: datetime) -> float | None:
        """How long a timer should sleep before ``when`` is due (None: only wake on demand)."""
        return max(0.0, (when - self.now()).total_seconds())


class ManualClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._elapsed = 0.0
        self.on_advance: list[Callable[[], None]] = []

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        """Seconds advanced since the clock was made."""
        return self._elapsed

    def seconds_until(self, when: datetime) -> float | None:
        return None

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        self._elapsed += seconds
        for callback in list(self.on_advance):
            callback()
        return self._now


Clock = SystemClock | ManualClock


def rfc3339(when: datetime) -> str:
    """metav1.Time: seconds precision, UTC with Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(when: datetime) -> str:
    """metav1.MicroTime: exactly six fractional digits, UTC with Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
