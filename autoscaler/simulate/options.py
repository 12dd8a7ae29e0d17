"""The simulation's own settings: the workload model, from a small TOML file and flags.

These live outside the daemon's config on purpose: the daemon's validation rejects keys it
does not know, and a capacity or a start-up delay says nothing about how to scale. A
workload file has one ``[simulate]`` table (camelCase like the daemon's config); flags given
on the command line override it::

    [simulate]
    capacity = 80            # demand units one pod serves at 100% of its request
    startup = "20s"          # created -> Running
    readiness = "10s"        # Running -> Ready
    termination = "0s"       # deleting -> gone
    replicas = 2             # at the start (default: minReplicas)
    metricWindow = "1m"      # each sample averages this long
    saturation = 150         # usage cap, % of the request (default: none)
    requests = { cpu = "500m" }
    interpolation = "linear" # between trace points: "step" (default) or "linear"
"""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autoscaler.algorithm import Milli, QuantityError, parse_milli
from autoscaler.config.durations import DurationError
from autoscaler.config.durations import parse_duration as config_parse_duration
from autoscaler.simulate.simulation_error import SimulationError
from autoscaler.simulate.trace import Interpolation, parse_time
from autoscaler.simulate.workload import WorkloadModel

_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_KEYS = (
    "capacity", "startup", "readiness", "termination", "replicas", "metricWindow",
    "saturation", "requests", "interpolation",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateSettings:
    model: WorkloadModel
    interpolation: Interpolation = "step"


def parse_duration(text: str | float, *, what: str) -> float:
    """``90``, ``1.5``, ``30s``, ``5m``, ``1h30m``, ``7d``: seconds, non-negative. The
    config's duration rule, and a number given as text (a flag's value) is seconds too."""
    value: object = text.strip() if isinstance(text, str) else text
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        value = float(value)
    try:
        return config_parse_duration(value)
    except DurationError as error:
        raise SimulationError(f"{what}: {error}") from None


def parse_instant(text: str, *, what: str, now: float | None = None) -> float:
    """``now``, ``now-7d``, Unix seconds or ISO 8601 (naive means UTC): Unix seconds."""
    now = time.time() if now is None else now
    text = text.strip()
    if text == "now":
        return now
    if text.startswith("now-"):
        return now - parse_duration(text[4:], what=what)
    return parse_time(text, where=what)


def load_workload_file(path: Path) -> dict[str, Any]:
    """The ``[simulate]`` table of a workload file, with unknown keys rejected."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise SimulationError(f"cannot read {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SimulationError(f"{path}: invalid TOML: {error}") from None
    extra = sorted(set(data) - {"simulate"})
    table = data.get("simulate")
    if extra or not isinstance(table, dict):
        raise SimulationError(f"{path}: expected one [simulate] table, found {sorted(data)}")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise SimulationError(
            f"{path}: unknown key(s) {', '.join(unknown)} in [simulate]; "
            f"known keys: {', '.join(_KEYS)}"
        )
    return table


def build_settings(values: Mapping[str, Any], *, source: str) -> SimulateSettings:
    """Validate ``[simulate]``-style values (file and flags merged) into settings."""
    model = WorkloadModel()
    fields: dict[str, Any] = {}
    if (capacity := values.get("capacity")) is not None:
        fields["capacity"] = _positive(capacity, f"{source}: capacity")
    for key, attribute in (("startup", "startup"), ("readiness", "readiness"),
                           ("termination", "termination"), ("metricWindow", "metric_window")):
        if values.get(key) is not None:
            fields[attribute] = parse_duration(values[key], what=f"{source}: {key}")
    if fields.get("metric_window") == 0:
        raise SimulationError(f"{source}: metricWindow must be positive")
    if (saturation := values.get("saturation")) is not None:
        fields["saturation"] = _positive(saturation, f"{source}: saturation")
    if (replicas := values.get("replicas")) is not None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise SimulationError(f"{source}: replicas must be a whole number >= 0, "
                                  f"got {replicas!r}")
        fields["replicas"] = replicas
    if (requests := values.get("requests")) is not None:
        # Merged over the default (cpu: 1), so naming only memory keeps the cpu request.
        fields["requests"] = {**model.requests, **_requests(requests, source)}
    interpolation = values.get("interpolation") or "step"
    if interpolation not in ("step", "linear"):
        raise SimulationError(
            f"{source}: interpolation must be 'step' or 'linear', got {interpolation!r}"
        )
    mode: Interpolation = "linear" if interpolation == "linear" else "step"
    return SimulateSettings(model=replace(model, **fields), interpolation=mode)


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SimulationError(f"{what}: expected a positive number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise SimulationError(f"{what}: expected a positive number, got {value!r}") from None
    if not number > 0 or number == float("inf"):
        raise SimulationError(f"{what}: expected a positive number, got {value!r}")
    return number


def _requests(value: Any, source: str) -> dict[str, Milli]:
    if not isinstance(value, Mapping):
        raise SimulationError(f"{source}: requests must be a table like {{cpu = \"500m\"}}")
    out: dict[str, Milli] = {}
    for name, quantity in value.items():
        try:
            out[str(name)] = parse_milli(quantity)
        except QuantityError as error:
            raise SimulationError(f"{source}: requests.{name}: {error}") from None
        if out[str(name)] <= 0:
            raise SimulationError(f"{source}: requests.{name} must be positive")
    return out
