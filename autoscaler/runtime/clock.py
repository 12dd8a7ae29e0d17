"""The daemon's one source of wall-clock time.

Everything the daemon dates with the wall clock (the history's timestamps, conditions,
Events) reads it through the function ``wall_clock`` returns: ``time.time``, unless the
test hook below is set. A test cannot step the machine's real clock; it steps the daemon's
instead, by writing a number of seconds into the file ``AUTOSCALER_TEST_WALL_CLOCK_OFFSET``
names (read again whenever the file changes). Nothing else reads that variable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

TEST_WALL_CLOCK_OFFSET = "AUTOSCALER_TEST_WALL_CLOCK_OFFSET"
"""Test hook: the path of a file holding seconds (a float) added to the wall clock."""


def wall_clock(environ: Mapping[str, str] | None = None) -> Callable[[], float]:
    """The wall clock to use: ``time.time``, or it shifted by the test hook's file."""
    path = (os.environ if environ is None else environ).get(TEST_WALL_CLOCK_OFFSET)
    return time.time if not path else _OffsetWallClock(path)


class _OffsetWallClock:
    """``time.time()`` plus the number in a file, re-read when the file changes (a missing
    or unreadable file is an offset of 0)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._seen: tuple[int, int] | None = None
        self._offset = 0.0

    def __call__(self) -> float:
        try:
            info = os.stat(self._path)
            seen = (info.st_mtime_ns, info.st_size)
            if seen != self._seen:
                with open(self._path, encoding="ascii") as handle:
                    self._offset = float(handle.read().strip() or 0)
                self._seen = seen
        except (OSError, ValueError):
            self._offset, self._seen = 0.0, None
        return time.time() + self._offset
