"""The PNG: demand, replicas and Ready pods, per-pod load against the target, and for each
metric with a ``prediction`` its total against the forecast made for it.

The forecast is drawn at the time it was made *for* (``forecast_at``: the pass plus the
horizon), so where it leads the total it is ahead of the load, as the daemon acts on it;
solid where it was used (usable, and acted on unless forecastOnly), faint where not.
Drawn on a bare ``Figure`` with the Agg canvas: no pyplot global state and no display, so it
works on a server and in tests. Runs given together share the axes (``--compare``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from autoscaler.config.files import replacing
from autoscaler.simulate.engine import Timeline
from autoscaler.simulate.report import PLOT_SOFTWARE, metric_columns, our_plot

WIDTH, HEIGHT, DPI = 12.0, 9.0, 100
"""The PNG is WIDTH x DPI by HEIGHT x DPI pixels (and FORECAST_HEIGHT more per predicted
metric)."""
FORECAST_HEIGHT = 2.5
COLORS = ("tab:blue", "tab:orange")
TOTAL_COLOR = "tab:gray"


def plot(timelines: Sequence[Timeline], path: Path, *, title: str = "") -> None:
    """Write the comparison plot of one or two runs on the same trace to ``path``."""
    if not timelines or not timelines[0].rows:
        raise ValueError("nothing to plot: no simulated steps")
    predicted = _predicted(timelines)
    figure = Figure(figsize=(WIDTH, HEIGHT + FORECAST_HEIGHT * len(predicted)), dpi=DPI,
                    layout="constrained")
    FigureCanvasAgg(figure)
    demand_axes, replica_axes, load_axes, *forecast_axes = figure.subplots(
        3 + len(predicted), 1, sharex=True,
        height_ratios=[3, 3, 3, *[FORECAST_HEIGHT] * len(predicted)])
    _demand(demand_axes, timelines[0])
    for index, timeline in enumerate(timelines):
        color = COLORS[index % len(COLORS)]
        _replicas(replica_axes, timeline, color)
        _load(load_axes, timeline, color)
    load_axes.axhline(100, color="tab:red", linewidth=1, linestyle=":", label="target")
    for axes, metric in zip(forecast_axes, predicted, strict=True):
        _forecast(axes, timelines, metric)
    for axes in (replica_axes, load_axes, *forecast_axes):
        axes.legend(loc="upper left", fontsize="small", ncols=2)
    (forecast_axes or [load_axes])[-1].set_xlabel(_time_label(timelines[0]))
    figure.suptitle(title or " vs ".join(t.scenario.label for t in timelines))
    with replacing(path, ours=our_plot, binary=True) as handle:
        figure.savefig(handle, format="png", metadata={"Software": PLOT_SOFTWARE})



def _hours(timeline: Timeline) -> list[float]:
    return [row.time / 3600 for row in timeline.rows]


def _time_label(timeline: Timeline) -> str:
    if timeline.origin is None:
        return "hours since the start of the trace"
    start = datetime.fromtimestamp(timeline.origin, tz=UTC).isoformat(timespec="minutes")
    return f"hours since {start}"


def _demand(axes: Axes, timeline: Timeline) -> None:
    """The ``demand`` column, or each metric's total when the trace gives them directly."""
    hours = _hours(timeline)
    if any(row.demand is not None for row in timeline.rows):
        axes.plot(hours, _nan([row.demand for row in timeline.rows]), color="tab:gray")
        axes.set_ylabel("demand")
    else:
        for i, name in enumerate(metric_columns(timeline)):
            axes.plot(hours, _nan([row.metrics[i].load.total for row in timeline.rows]),
                      label=name)
        axes.set_ylabel("metric totals")
        axes.legend(loc="upper left", fontsize="small")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)


def _replicas(axes: Axes, timeline: Timeline, color: str) -> None:
    hours, label = _hours(timeline), timeline.scenario.label
    axes.step(hours, [row.desired for row in timeline.rows], where="post", color=color,
              label=f"{label}: replicas")
    axes.step(hours, [row.ready for row in timeline.rows], where="post", color=color,
              linestyle="--", alpha=0.7, label=f"{label}: ready pods")
    axes.set_ylabel("pods")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)


def _load(axes: Axes, timeline: Timeline, color: str) -> None:
    hours, label = _hours(timeline), timeline.scenario.label
    styles = ("-", "-.", ":", "--")
    for i, name in enumerate(metric_columns(timeline)):
        ratios = [row.metrics[i].load.ratio for row in timeline.rows]
        axes.plot(hours, _nan([None if r is None else r * 100 for r in ratios]), color=color,
                  linestyle=styles[i % len(styles)], linewidth=1, label=f"{label}: {name}")
    axes.set_ylabel("per-pod load, % of target")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)


def _predicted(timelines: Sequence[Timeline]) -> list[int]:
    """The metrics (by index) some run forecast, in ``spec.metrics`` order."""
    return sorted({i for t in timelines for i, p in enumerate(t.scenario.predictions)
                   if p is not None})


def _forecast(axes: Axes, timelines: Sequence[Timeline], metric: int) -> None:
    """The metric's total (the trace's, shared by the runs) and each run's forecast of it."""
    first = timelines[0]
    name = metric_columns(first)[metric]
    axes.plot(_hours(first), _nan([row.metrics[metric].load.total for row in first.rows]),
              color=TOTAL_COLOR, linewidth=1, label=f"{name}: total")
    for index, timeline in enumerate(timelines):
        if metric >= len(timeline.scenario.predictions) or \
                timeline.scenario.predictions[metric] is None:
            continue
        color, label = COLORS[index % len(COLORS)], timeline.scenario.label
        rows = [row.metrics[metric] for row in timeline.rows]
        at = [float("nan") if m.forecast_at is None else m.forecast_at / 3600 for m in rows]
        axes.plot(at, _nan([m.forecast for m in rows]), color=color, linewidth=1, alpha=0.3)
        axes.plot(at, _nan([m.forecast if m.forecast_used else None for m in rows]),
                  color=color, linewidth=1.2, label=f"{label}: forecast (faint: not used)")
    axes.set_ylabel(f"{name} total")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)


def _nan(values: Sequence[float | None]) -> list[float]:
    """Gaps (no value in the trace, no Ready pod) become breaks in the line."""
    return [float("nan") if v is None else v for v in values]
