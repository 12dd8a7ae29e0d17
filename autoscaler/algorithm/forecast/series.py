"""A metric's history for forecasting: its total, averaged per bucket of ``step`` seconds.

Buckets are numbered from the Unix epoch (bucket ``k`` covers ``[k*step, (k+1)*step)``), so a
season that is a whole number of buckets lines up with the clock. The bucket being filled is
kept apart (``open_*``) so a pass changes three numbers, not the tuple of closed buckets. A
bucket nobody read is ``None``: a gap is never a zero. Values before the first are dropped
once more than ``keep`` buckets are closed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from autoscaler.record import seal_values


@dataclass(init=False, slots=True, unsafe_hash=True)
class Series:
    step: Final[float]
    first: Final[int]
    """The bucket number of ``values[0]``."""
    values: Final[tuple[float | None, ...]]
    """Closed buckets' means, oldest first; ``None`` where nothing was read."""
    open_index: Final[int | None]
    open_sum: Final[float]
    open_count: Final[int]

    def __init__(
        self,
        *,
        step: float,
        first: int = 0,
        values: tuple[float | None, ...] = (),
        open_index: int | None = None,
        open_sum: float = 0.0,
        open_count: int = 0,
    ) -> None:
        self.step = step
        self.first = first
        self.values = values
        self.open_index = open_index
        self.open_sum = open_sum
        self.open_count = open_count

    @property
    def end(self) -> int:
        """The bucket number after the last closed one."""
        return self.first + len(self.values)

    def bucket(self, at: float) -> int:
        return math.floor(at / self.step)

    def center(self, index: int) -> float:
        return (index + 0.5) * self.step


def observe(series: Series, *, at: float, value: float, keep: int) -> Series:
    """``series`` with ``value`` read at ``at``; a reading older than the open bucket is
    ignored (a clock that stepped back must not rewrite history), and so is one that is not
    finite (a total that overflowed is no reading, and could not be persisted)."""
    if not math.isfinite(value):
        return series
    index = series.bucket(at)
    opened = series.open_index
    if opened is not None and index == opened:
        return Series(step=series.step, first=series.first, values=series.values,
                      open_index=opened, open_sum=series.open_sum + value,
                      open_count=series.open_count + 1)
    if opened is not None and index < opened:
        return series
    closed = _closed(series, until=index, keep=keep)
    first = closed.first if closed.values else index
    return _trim(Series(step=series.step, first=first, values=closed.values, open_index=index,
                        open_sum=value, open_count=1), keep)


def _closed(series: Series, *, until: int, keep: int) -> Series:
    """The open bucket closed, the gap up to bucket ``until`` filled with ``None`` (and any
    backfilled bucket from ``until`` on dropped: this run's readings own it); of a gap
    longer than ``keep`` buckets only the ``keep`` that survive trimming are made."""
    first, values = series.first, series.values
    if series.open_index is not None:
        mean = series.open_sum / series.open_count if series.open_count else None
        first = first if values else series.open_index
        values = (*values, mean)
    if values:
        end = first + len(values)
        if until - end >= keep:  # nothing before the gap survives (a month idle; a bad clock)
            return Series(step=series.step, first=until - keep, values=(None,) * keep)
        values = values[:max(0, until - first)] + (None,) * max(0, until - end)
    return Series(step=series.step, first=first, values=values)


def _trim(series: Series, keep: int) -> Series:
    extra = len(series.values) - keep
    if extra <= 0:
        return series
    return Series(step=series.step, first=series.first + extra, values=series.values[extra:],
                  open_index=series.open_index, open_sum=series.open_sum,
                  open_count=series.open_count)


def backfill(series: Series, points: Iterable[tuple[float, float]], *, keep: int) -> Series:
    """``series`` with its gaps (and the time before it) filled from ``points`` (a range
    query's samples): a bucket that has a value keeps it. Points at or after the open bucket
    are left out: the readings of this run own it."""
    sums: dict[int, tuple[float, int]] = {}
    limit = series.open_index
    for at, value in points:
        if not math.isfinite(value):
            continue
        index = series.bucket(at)
        if limit is not None and index >= limit:
            continue
        total, count = sums.get(index, (0.0, 0))
        sums[index] = (total + value, count + 1)
    if not sums:
        return series
    start, end = min(sums), max(sums) + 1
    if series.values:
        start, end = min(start, series.first), max(end, series.end)
    if limit is not None:
        end = limit
    own = {series.first + i: v for i, v in enumerate(series.values) if v is not None}
    values = tuple(
        own.get(k, _mean(sums.get(k))) for k in range(start, end)
    )
    return _trim(Series(step=series.step, first=start, values=values,
                        open_index=series.open_index, open_sum=series.open_sum,
                        open_count=series.open_count), keep)


def _mean(pair: tuple[float, int] | None) -> float | None:
    return None if pair is None else pair[0] / pair[1]


def filled(values: Iterable[float | None], season: int) -> list[float]:
    """Gaps filled for the models: the value one season earlier, else the last value;
    leading gaps are dropped (nothing to fill them from)."""
    out: list[float] = []
    for value in values:
        if value is not None:
            out.append(value)
        elif len(out) >= season:
            out.append(out[-season])
        elif out:
            out.append(out[-1])
    return out


seal_values(globals())
