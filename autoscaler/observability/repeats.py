"""Warnings that repeat every pass, said as a person would want them: when they start, when
they change or end, and at most every few minutes in between with a count.

A metric that cannot be read (a query that matches nothing, a target at 0 replicas whose
pods are gone) would otherwise warn every sync period, for every target, for as long as it
lasts: the line that matters, the first, scrolls away among thousands of copies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

REMIND_EVERY = 300.0
"""Seconds between reminders of a warning that goes on unchanged."""


@dataclass(slots=True)
class _Ongoing:
    reason: str
    started: float
    reminded: float
    repeats: int = 0
    """Times it recurred since it was last logged."""


class RepeatedWarnings:
    """Logs ``warn`` for a key on its first occurrence, on a change of reason and every
    ``every`` seconds while it repeats; ``clear`` logs once that it ended."""

    def __init__(self, logger: Any, *, every: float = REMIND_EVERY,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log, self._every, self._clock = logger, every, clock
        self._ongoing: dict[Hashable, _Ongoing] = {}

    def __bool__(self) -> bool:
        """Whether any warning is ongoing (callers skip ``clear`` work when none is)."""
        return bool(self._ongoing)

    def warn(self, key: Hashable, event: str, *, reason: str, **fields: Any) -> None:
        now = self._clock()
        ongoing = self._ongoing.get(key)
        if ongoing is None or ongoing.reason != reason:
            if ongoing is not None:
                fields["previous_reason"] = ongoing.reason
            self._ongoing[key] = _Ongoing(reason=reason, started=now, reminded=now)
            self._log.warning(event, reason=reason, **fields)
            return
        ongoing.repeats += 1
        if now - ongoing.reminded >= self._every:
            self._log.warning(event, reason=reason, repeated=ongoing.repeats,
                              for_seconds=round(now - ongoing.started), **fields)
            ongoing.reminded, ongoing.repeats = now, 0

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s warning without a word (its subject is gone: a removed target)."""
        self._ongoing.pop(key, None)

    def clear(self, key: Hashable, event: str, **fields: Any) -> None:
        ongoing = self._ongoing.pop(key, None)
        if ongoing is not None:
            self._log.info(event, previous_reason=ongoing.reason,
                           after_seconds=round(self._clock() - ongoing.started), **fields)
