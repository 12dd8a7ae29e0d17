"""What a simulation run produced, in numbers: the timeline files and the summary.

Counting rules (each step stands for one sync period, from its time to the next step's):

- replica-hours: ``spec.replicas`` after each step's decision (the pods asked for, Pending
  ones included, as they are billed once scheduled) times the sync period.
- over target: a step whose worst metric is above its target (true per-pod load over the
  target, not what the lagging samples showed), or that has load and no Ready pod at all.
  The depth is how far above, in percent of the target (150% of target is 50% deep); steps
  without a Ready pod count in the time, not in the depth. "Beyond tolerance" counts only
  steps above the target by more than the scale-up tolerance: where the HPA itself acts.
- scale events: steps whose decision changed the count; a direction change is a scale-up
  following a scale-down or the reverse.
- with prediction: steps where a forecast was used, and steps where it changed the desired
  count (or would have, in forecastOnly) against the live metrics alone.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from autoscaler.algorithm.behavior import tolerances_for
from autoscaler.config.files import replacing
from autoscaler.simulate.engine import Timeline
from autoscaler.simulate.rows import Row
from autoscaler.terminal import columns

OVER = 1.0 + 1e-9  # float noise at exactly on-target must not count as over


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    label: str
    steps: int
    hours: float
    replica_hours: float
    ready_pod_hours: float
    mean_replicas: float
    min_replicas: int
    max_replicas: int
    scale_events: int
    scale_ups: int
    scale_downs: int
    direction_changes: int
    over_target_seconds: float
    over_target_percent_of_time: float
    beyond_tolerance_seconds: float
    max_over_target_percent: float
    mean_over_target_percent: float
    no_ready_pod_seconds: float
    invalid_metric_seconds: float
    predictive: bool = False
    forecast_used_seconds: float = 0.0
    forecast_changed_seconds: float = 0.0


def worst_ratio(row: Row) -> float | None:
    ratios = [m.load.ratio for m in row.metrics if m.load.ratio is not None]
    return max(ratios) if ratios else None


def _starved(row: Row) -> bool:
    """Load arrives and no pod is Ready to take it."""
    return row.ready == 0 and any(m.load.total for m in row.metrics)


def summarize(timeline: Timeline) -> Summary:
    rows, sync = timeline.rows, timeline.scenario.sync_period
    hours = len(rows) * sync / 3600
    changes = [row.desired - row.current for row in rows if row.desired != row.current]
    flips = sum(1 for a, b in pairwise(changes) if (a > 0) != (b > 0))
    worst = [worst_ratio(row) or 0 for row in rows]  # once: a week is 40,320 rows
    starved = [_starved(row) for row in rows]
    depths = [(r - 1) * 100 for r in worst if r > OVER]
    over = sum(1 for r, no_pod in zip(worst, starved, strict=True) if no_pod or r > OVER)
    limit = OVER + tolerances_for(timeline.scenario.spec.behavior, timeline.scenario.settings) \
        .scale_up
    beyond = sum(1 for r, no_pod in zip(worst, starved, strict=True) if no_pod or r > limit)
    replicas = [row.desired for row in rows]
    return Summary(
        label=timeline.scenario.label,
        steps=len(rows),
        hours=hours,
        replica_hours=sum(replicas) * sync / 3600,
        ready_pod_hours=sum(row.ready for row in rows) * sync / 3600,
        mean_replicas=sum(replicas) / len(rows) if rows else 0.0,
        min_replicas=min(replicas, default=0),
        max_replicas=max(replicas, default=0),
        scale_events=len(changes),
        scale_ups=sum(1 for c in changes if c > 0),
        scale_downs=sum(1 for c in changes if c < 0),
        direction_changes=flips,
        over_target_seconds=over * sync,
        over_target_percent_of_time=100 * over / len(rows) if rows else 0.0,
        beyond_tolerance_seconds=beyond * sync,
        max_over_target_percent=max(depths, default=0.0),
        mean_over_target_percent=sum(depths) / len(depths) if depths else 0.0,
        no_ready_pod_seconds=sum(starved) * sync,
        invalid_metric_seconds=sum(1 for row in rows if row.error) * sync,
        predictive=any(row.predictive is not None for row in rows),
        forecast_used_seconds=sum(
            1 for row in rows if any(m.forecast_used for m in row.metrics)) * sync,
        forecast_changed_seconds=sum(
            1 for row in rows if row.predictive is not None and row.predictive != row.reactive
        ) * sync,
    )


def metric_columns(timeline: Timeline) -> list[str]:
    """One prefix per metric: its name, made unique when two metrics share one."""
    names = [m.name for m in timeline.scenario.spec.metrics]
    return [name if names.count(name) == 1 else f"{name}{i + 1}" for i, name in enumerate(names)]


def predictive_columns(timeline: Timeline) -> bool:
    """Whether the timeline files carry the forecast columns: a run with prediction decides
    every step with it, so the first row tells for all (and every row has the same keys)."""
    return bool(timeline.rows) and timeline.rows[0].predictive is not None


def timeline_columns(timeline: Timeline) -> list[str]:
    """The timeline files' columns, in the order ``row_values`` gives a row's values."""
    predictive = predictive_columns(timeline)
    columns = ["time", "demand", "current", "desired", "pending", "starting", "ready",
               "deleting", "proposal"]
    for prefix in metric_columns(timeline):
        columns += [f"{prefix}_total", f"{prefix}_per_pod", f"{prefix}_ratio", f"{prefix}_seen",
                    f"{prefix}_proposal"]
        if predictive:
            columns += [f"{prefix}_forecast", f"{prefix}_forecast_used"]
    columns += ["steps", "limited", "error"]
    if predictive:
        columns += ["reactive", "predictive"]
    return columns


def row_values(row: Row, *, predictive: bool) -> list[Any]:
    """One row of the timeline files, in ``timeline_columns`` order."""
    values: list[Any] = [row.time, row.demand, row.current, row.desired, row.pending,
                         row.starting, row.ready, row.deleting, row.proposal]
    for metric in row.metrics:
        load = metric.load
        values += (load.total, load.per_pod, load.ratio, metric.seen, metric.proposal)
        if predictive:
            values += (metric.forecast, metric.forecast_used)
    values += ("+".join(row.steps), row.limited, row.error or "")
    if predictive:
        values += (row.reactive, row.predictive)
    return values


def our_timeline_csv(head: bytes) -> bool:
    """A timeline CSV ``simulate`` wrote (its header), which a later run may replace."""
    return head.startswith((b"time,demand,current,desired,", b"time\r\n"))


def our_timeline_json(head: bytes) -> bool:
    return head.startswith(b'{"label":')


def our_summary(head: bytes) -> bool:
    return head.startswith(b'{\n  "runs": [')


PLOT_SOFTWARE = "autoscaler simulate (Matplotlib)"
"""The plot's PNG Software text: how a later run knows the file is its own to replace."""


def our_plot(head: bytes) -> bool:
    return head.startswith(b"\x89PNG\r\n\x1a\n") and (
        b"tEXtSoftware\x00" + PLOT_SOFTWARE.encode()) in head


def write_timeline_csv(timeline: Timeline, path: Path) -> None:
    predictive = predictive_columns(timeline)
    with replacing(path, ours=our_timeline_csv) as handle:
        writer = csv.writer(handle)  # (it writes None as an empty field)
        writer.writerow(timeline_columns(timeline) if timeline.rows else ["time"])
        writer.writerows(row_values(row, predictive=predictive) for row in timeline.rows)


def write_timeline_json(timeline: Timeline, path: Path) -> None:
    scenario = timeline.scenario
    prefixes = metric_columns(timeline)
    columns, predictive = timeline_columns(timeline), predictive_columns(timeline)
    document = {
        "label": scenario.label,
        "sync_period": scenario.sync_period,
        "origin": timeline.origin,
        "metrics": [
            {"column": prefix, "type": str(m.type), "name": m.name, "target": str(m.target.type)}
            for prefix, m in zip(prefixes, scenario.spec.metrics, strict=True)
        ],
        "rows": [dict(zip(columns, row_values(row, predictive=predictive), strict=True))
                 for row in timeline.rows],
    }
    # Compact: a week at 15 s is 40,320 rows.
    with replacing(path, ours=our_timeline_json) as handle:
        handle.write(json.dumps(document, separators=(",", ":")) + "\n")


def write_summary(summaries: Sequence[Summary], path: Path) -> None:
    document = {"runs": [asdict(summary) for summary in summaries]}
    with replacing(path, ours=our_summary) as handle:
        handle.write(json.dumps(document, indent=2) + "\n")


_TABLE = (
    ("simulated hours", "hours", "{:.2f}"),
    ("steps", "steps", "{}"),
    ("replica-hours", "replica_hours", "{:.2f}"),
    ("ready-pod-hours", "ready_pod_hours", "{:.2f}"),
    ("mean replicas", "mean_replicas", "{:.2f}"),
    ("min replicas", "min_replicas", "{}"),
    ("max replicas", "max_replicas", "{}"),
    ("scale events (up/down)", None, None),
    ("direction changes", "direction_changes", "{}"),
    ("time over target", "over_target_seconds", None),
    ("time beyond tolerance", "beyond_tolerance_seconds", None),
    ("worst overshoot", "max_over_target_percent", "+{:.1f}%"),
    ("mean overshoot (when over)", "mean_over_target_percent", "+{:.1f}%"),
    ("time with load, no ready pod", "no_ready_pod_seconds", None),
    ("time with invalid metrics", "invalid_metric_seconds", None),
)
_PREDICTION_TABLE = (
    ("time a forecast was used", "forecast_used_seconds", None),
    ("time the forecast changed the count", "forecast_changed_seconds", None),
)
"""Rows shown only when a run has prediction (a reactive-only table stays as it was)."""


def _cell(summary: Summary, attribute: str | None, fmt: str | None) -> str:
    if attribute is None:
        return f"{summary.scale_events} ({summary.scale_ups}/{summary.scale_downs})"
    value = getattr(summary, attribute)
    if fmt is None:  # a duration
        share = 100 * value / (summary.hours * 3600) if summary.hours else 0.0
        return f"{format_elapsed(value)} ({share:.1f}%)"
    return fmt.format(value)


def render_table(summaries: Sequence[Summary]) -> str:
    header = ["", *(s.label for s in summaries)]
    rows = _TABLE + (_PREDICTION_TABLE if any(s.predictive for s in summaries) else ())
    body = [[label, *(_cell(s, attr, fmt) for s in summaries)] for label, attr, fmt in rows]
    return columns([header, *body], gap="  ")


def format_elapsed(seconds: float) -> str:
    """Whole seconds as ``1h05m03s``, minutes and seconds padded so a column of them reads
    like a clock (the config's ``format_duration`` is the exact form a config takes)."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
