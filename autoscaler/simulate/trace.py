"""Demand traces: what the simulated workload is asked to serve, and when.

A trace is a table: a ``time`` column and one or more value columns. The ``demand`` column is
the total demand (requests/s, cores, ...); a column named after one of the target's metrics
gives that metric's total directly, in the metric's own units (see ``workload``). Times are
seconds (any origin) or ISO 8601 timestamps; they are shifted so the trace starts at 0.
An empty cell or ``NaN`` is a gap: the metric is unavailable then, as when a query returns
nothing, and the core must hold rather than scale down.

Between points a value holds until the next one (``step``) or is interpolated (``linear``).
"""

from __future__ import annotations

import bisect
import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from autoscaler.simulate.simulation_error import SimulationError

DEMAND = "demand"
TIME_COLUMNS = ("time", "timestamp")
Interpolation = Literal["step", "linear"]
Value = float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """Points sorted by time; ``times[0] == 0``; every column has one value per time."""

    times: tuple[float, ...]
    columns: Mapping[str, tuple[Value, ...]]
    origin: float | None = None
    """Unix time of the first point, when the trace carried absolute times."""

    @property
    def duration(self) -> float:
        return self.times[-1]

    def on_grid(
        self, column: str, grid: Sequence[float], interpolation: Interpolation = "step"
    ) -> list[Value]:
        """The column's value at each grid time; before the first point: the first."""
        values = self.columns[column]
        return [self._at(values, t, interpolation) for t in grid]

    def _at(self, values: tuple[Value, ...], t: float, interpolation: Interpolation) -> Value:
        index = max(bisect.bisect_right(self.times, t) - 1, 0)
        value, t0 = values[index], self.times[index]
        if interpolation == "step" or t <= t0 or index + 1 == len(self.times) or value is None:
            return value
        after, t1 = values[index + 1], self.times[index + 1]
        # A gap on either side stays a gap in between.
        return None if after is None else value + (after - value) * (t - t0) / (t1 - t0)


def make_trace(
    times: Sequence[float], columns: Mapping[str, Sequence[Value]], *, source: str
) -> Trace:
    """Validate and normalize: at least one point, strictly increasing times, no negatives."""
    if not times:
        raise SimulationError(f"{source}: the trace has no points")
    if not columns:
        raise SimulationError(f"{source}: the trace has no value column (e.g. 'demand')")
    for index in range(1, len(times)):
        if times[index] <= times[index - 1]:
            raise SimulationError(
                f"{source}: times must increase strictly; point {index + 1} "
                f"({times[index]}) does not come after {times[index - 1]}"
            )
    for name, values in columns.items():
        negative = next((v for v in values if v is not None and v < 0), None)
        if negative is not None:
            raise SimulationError(f"{source}: column {name!r} has a negative value {negative}")
    origin = times[0]
    return Trace(
        times=tuple(t - origin for t in times),
        columns={name: tuple(values) for name, values in columns.items()},
        origin=origin if origin > 10**8 else None,  # looks like Unix time: keep it for plots
    )


def parse_time(text: str | float, *, where: str) -> float:
    """Seconds as a number, or an ISO 8601 timestamp (to Unix seconds; naive means UTC)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    try:
        return float(text)
    except (TypeError, ValueError):
        pass
    try:
        stamp = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise SimulationError(
            f"{where}: time {text!r} is neither seconds nor an ISO 8601 timestamp"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def parse_value(text: Any, *, where: str) -> Value:
    """A non-negative number; empty, ``NaN`` or null is a gap."""
    if text is None or (isinstance(text, str) and text.strip() == ""):
        return None
    if isinstance(text, bool):
        raise SimulationError(f"{where}: expected a number, got {text!r}")
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise SimulationError(f"{where}: expected a number, got {text!r}") from None
    if math.isnan(value):
        return None
    if math.isinf(value):
        raise SimulationError(f"{where}: value {text!r} is infinite")
    return value


def load_trace(path: Path) -> Trace:
    """Read a CSV (header row first) or JSON trace; the suffix decides which."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SimulationError(f"cannot read trace {path}: {error.strerror or error}") from None
    if path.suffix.lower() == ".json":
        return _from_json(text, source=str(path))
    return _from_csv(text, source=str(path))


def _from_csv(text: str, *, source: str) -> Trace:
    rows = [row for row in csv.reader(text.splitlines()) if row and not row[0].startswith("#")]
    if not rows:
        raise SimulationError(f"{source}: empty trace; expected a header such as 'time,demand'")
    header = [cell.strip() for cell in rows[0]]
    if header[0].lower() not in TIME_COLUMNS:
        raise SimulationError(
            f"{source}: the first column must be 'time' (seconds or ISO 8601), got {header[0]!r}"
        )
    names = header[1:]
    if len(set(names)) != len(names):
        raise SimulationError(f"{source}: duplicate column names in {header}")
    times: list[float] = []
    columns: dict[str, list[Value]] = {name: [] for name in names}
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise SimulationError(
                f"{source}:{number}: expected {len(header)} cells like the header, got {len(row)}"
            )
        times.append(parse_time(row[0], where=f"{source}:{number}"))
        for name, cell in zip(names, row[1:], strict=True):
            columns[name].append(parse_value(cell, where=f"{source}:{number} column {name!r}"))
    return make_trace(times, columns, source=source)


def _from_json(text: str, *, source: str) -> Trace:
    """``[{"time": 0, "demand": 10}, ...]`` or ``{"points": [...]}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SimulationError(f"{source}: invalid JSON: {error}") from None
    points = data.get("points") if isinstance(data, dict) else data
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise SimulationError(
            f"{source}: expected a list of points like {{\"time\": 0, \"demand\": 10}}"
        )
    names = sorted({key for point in points for key in point if key not in TIME_COLUMNS})
    times: list[float] = []
    columns: dict[str, list[Value]] = {name: [] for name in names}
    for index, point in enumerate(points):
        where = f"{source}: point {index + 1}"
        stamp = next((point[k] for k in TIME_COLUMNS if k in point), None)
        if stamp is None:
            raise SimulationError(f"{where} has no 'time'")
        times.append(parse_time(stamp, where=where))
        for name in names:
            columns[name].append(parse_value(point.get(name), where=f"{where} {name!r}"))
    return make_trace(times, columns, source=source)
