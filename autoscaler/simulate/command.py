"""``autoscaler simulate``: a config against a demand trace, in virtual time, with a plot.

The arguments are parsed in ``autoscaler.commands.simulate``; this module runs them.
Example (no cluster, no Prometheus)::

    autoscaler simulate --config config/examples/simulate/web.toml \\
        --workload config/examples/simulate/workload.toml \\
        --trace config/examples/simulate/day.csv --out out/

writes timeline.csv, timeline.json, summary.json and simulation.png to ``out/`` and prints
the summary. ``--compare OTHER.toml`` runs a second config on the same trace and workload.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from autoscaler.config.files import NotOursError, Recognise, check_replaceable
from autoscaler.simulate.engine import Progress, Scenario, Timeline, simulate
from autoscaler.simulate.jobs import Job, run_jobs
from autoscaler.simulate.options import (
    SimulateSettings,
    build_settings,
    load_workload_file,
    parse_duration,
    parse_instant,
)
from autoscaler.simulate.report import (
    Summary,
    our_plot,
    our_summary,
    our_timeline_csv,
    our_timeline_json,
    render_table,
    summarize,
    write_summary,
    write_timeline_csv,
    write_timeline_json,
)
from autoscaler.simulate.simulation_error import FlagError, OutputError, SimulationError
from autoscaler.simulate.trace import DEMAND, Trace, load_trace

REACTIVE = Path()
"""``--compare`` without a file: the same config with every ``prediction`` removed."""

PROGRESS_MIN_STEPS = 5_000
"""Runs shorter than this finish before a progress bar would help."""

NO_MATPLOTLIB = ("note: no plot: matplotlib is not installed (pip install 'autoscaler[plot]', "
                 "or --no-plot to skip it); the timeline and summary are written")
"""What ``simulate`` says when the ``plot`` extra is missing; it still writes the rest."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outputs:
    directory: Path
    written: tuple[Path, ...]
    notes: tuple[str, ...] = ()


def run(args: argparse.Namespace) -> int:
    """Run the simulation ``args`` (parsed by ``autoscaler.commands.simulate``) describes."""
    settings = _settings(args)
    scenarios = [_scenario(args.config, args.target, settings)]
    if args.compare == REACTIVE:
        scenarios.append(_reactive(scenarios[0]))
    elif args.compare is not None:
        other = _scenario(args.compare, args.compare_target, settings)
        if other.label == scenarios[0].label:
            other = _relabel(other, f"{other.label}-2")
        scenarios.append(other)
    trace = _trace(args, sync_period=scenarios[0].sync_period)
    _warn_unused_columns(trace, scenarios)
    plot_png = not args.no_plot and find_spec("matplotlib") is not None
    _refuse_files_not_ours(output_files(args.out, runs=len(scenarios), plot_png=plot_png))
    timelines = [
        simulate(s, trace, interpolation=settings.interpolation, progress=_progress(s.label))
        for s in scenarios
    ]
    summaries, outputs = write_outputs(timelines, args.out, plot_png=not args.no_plot)
    print(render_table(summaries))
    print()
    for path in outputs.written:
        print(f"wrote {path}")
    for note in outputs.notes:
        print(note, file=sys.stderr)
    return 0


def _settings(args: argparse.Namespace) -> SimulateSettings:
    values: dict[str, Any] = load_workload_file(args.workload) if args.workload else {}
    flags = {
        "capacity": args.capacity, "startup": args.startup, "readiness": args.readiness,
        "termination": args.termination, "replicas": args.replicas,
        "metricWindow": args.metric_window, "saturation": args.saturation,
        "interpolation": args.interpolation,
    }
    given = {key: value for key, value in flags.items() if value is not None}
    if args.request:
        given["requests"] = _pairs(args.request, "--request")
    try:  # the flags alone first: a bad one is a usage error, a bad file a failure
        build_settings(given, source="flags")
    except SimulationError as error:
        raise FlagError(str(error)) from None
    requests = {**values.get("requests", {}), **given.pop("requests", {})}
    values.update(given)
    if requests:
        values["requests"] = requests
    return build_settings(values, source=str(args.workload or "flags"))


def _pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise FlagError(f"{flag}: expected NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _scenario(path: Path, key: str | None, settings: SimulateSettings) -> Scenario:
    from autoscaler.config import load_config  # the daemon's loader: same validation

    # A simulation reads no credentials and no state: a production config simulated on a
    # laptop must not fail on a caFile or token file that only exists on its host.
    config = load_config(path, check_files=False)
    targets = config.targets
    if not targets:
        raise SimulationError(f"{path}: no [[autoscaler]] target to simulate")
    keys = [target.key for target in targets]
    if key is None:
        target = targets[0]
        if len(targets) > 1:
            print(f"note: {path} has targets {', '.join(keys)}; simulating {target.key} "
                  "(choose with --target)", file=sys.stderr)
    elif key in keys:
        target = targets[keys.index(key)]
    else:
        raise FlagError(f"{path}: no target {key!r}; targets: {', '.join(keys)}")
    sync = target.sync_period or config.daemon.sync_period
    return Scenario(
        label=path.stem if len(targets) == 1 else f"{path.stem}:{target.key}",
        spec=target.spec, model=settings.model, settings=config.daemon.algorithm,
        sync_period=float(sync), windows=tuple(q.window for q in target.metric_queries),
        schedules=target.schedules, predictions=target.predictions,
    )


def _reactive(scenario: Scenario) -> Scenario:
    if not any(scenario.predictions):
        raise FlagError(f"{scenario.label}: --compare without a file compares against the "
                              "same config with prediction off, and this one has no prediction")
    return replace(scenario, label=f"{scenario.label} (reactive)", predictions=())


def _relabel(scenario: Scenario, label: str) -> Scenario:
    return replace(scenario, label=label)


def _trace(args: argparse.Namespace, *, sync_period: float) -> Trace:
    if args.trace is not None:
        if args.query:
            raise FlagError("--query goes with --prometheus, not with --trace")
        return load_trace(args.trace)
    if not args.query:
        raise FlagError("--prometheus needs --query, e.g. 'sum(rate(requests_total[1m]))'")
    from autoscaler.simulate.prometheus import query_trace  # pulls in requests and pandas

    queries = dict(_query(text) for text in args.query)
    try:
        start = parse_instant(args.start, what="--start")
        end = parse_instant(args.end, what="--end")
        step = parse_duration(args.step, what="--step") if args.step else sync_period
    except SimulationError as error:
        raise FlagError(str(error)) from None
    return query_trace(url=args.prometheus, queries=queries, start=start, end=end, step=step)


def _query(text: str) -> tuple[str, str]:
    """``NAME=PROMQL`` names a column; a bare query (even one with ``=`` inside) is demand."""
    name, sep, query = text.partition("=")
    if sep and name.isidentifier() and not query.startswith("="):
        return name, query
    return DEMAND, text


def _warn_unused_columns(trace: Trace, scenarios: Sequence[Scenario]) -> None:
    used = {DEMAND} | {m.name for s in scenarios for m in s.spec.metrics}
    unused = sorted(set(trace.columns) - used)
    if unused:
        print(f"note: trace column(s) {', '.join(unused)} match no metric; ignored",
              file=sys.stderr)


def _progress(label: str) -> Progress | None:
    """A one-line bar on stderr, only for a terminal (logs and pipes stay clean)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        if total < PROGRESS_MIN_STEPS:
            return
        width = 30
        filled = width * done // total
        end = "\n" if done == total else ""
        sys.stderr.write(f"\r{label}: [{'#' * filled}{'.' * (width - filled)}] "
                         f"{done}/{total} steps{end}")
        sys.stderr.flush()

    return show


def output_files(out: Path, *, runs: int, plot_png: bool) -> list[tuple[Path, Recognise]]:
    """Every file a run writes in ``out``, each with how its own earlier output is known
    (``autoscaler.config.files.replacing`` replaces nothing else)."""
    files: list[tuple[Path, Recognise]] = []
    for index in range(runs):
        suffix = "" if index == 0 else "-compare"
        files += [(out / f"timeline{suffix}.csv", our_timeline_csv),
                  (out / f"timeline{suffix}.json", our_timeline_json)]
    files.append((out / "summary.json", our_summary))
    if plot_png:
        files.append((out / "simulation.png", our_plot))
    return files


def _refuse_files_not_ours(files: Sequence[tuple[Path, Recognise]]) -> None:
    """Before the run: an output path that holds a file simulate did not write is refused.
    What the system itself refuses (a directory in the way, no space) is said by the write,
    which still writes the other files."""
    for path, ours in files:
        try:
            check_replaceable(path, ours=ours)
        except NotOursError as error:
            raise OutputError(f"cannot write {path}: {error.strerror}") from None
        except OSError:
            pass


def write_outputs(
    timelines: Sequence[Timeline], out: Path, *, plot_png: bool
) -> tuple[list[Summary], Outputs]:
    """The timeline(s), the summary and the plot, in ``out`` (created if needed), and each
    run's summary. The files are written side by side where the machine allows, the summary
    meanwhile (``autoscaler.simulate.jobs``)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot create {out}: {error.strerror or error}") from None
    written: list[Path] = []
    jobs: list[Job] = []
    for index, timeline in enumerate(timelines):
        suffix = "" if index == 0 else "-compare"
        for name, write in (("csv", write_timeline_csv), ("json", write_timeline_json)):
            path = out / f"timeline{suffix}.{name}"
            jobs.append(partial(_writing, path, partial(write, timeline, path)))
            written.append(path)
    written.append(out / "summary.json")
    notes: tuple[str, ...] = ()
    if plot_png and find_spec("matplotlib") is None:  # the optional ``plot`` extra
        notes = (NO_MATPLOTLIB,)
    elif plot_png:
        # First: the longest job (matplotlib alone takes a while to import).
        png = out / "simulation.png"
        jobs.insert(0, partial(_writing, png, partial(_plot, timelines, png)))
        written.append(out / "simulation.png")

    def summarize_runs() -> list[Summary]:
        summaries = [summarize(timeline) for timeline in timelines]
        path = out / "summary.json"
        _writing(path, partial(write_summary, summaries, path))
        return summaries

    summaries = run_jobs(jobs, meanwhile=summarize_runs)
    return summaries, Outputs(directory=out, written=tuple(written), notes=notes)


def _writing(path: Path, write: Callable[[], None]) -> None:
    """``write`` ``path``; what the system refused (a full disk, a directory in the way, no
    permission) is said in one line, as for the output directory, not as a bug."""
    try:
        write()
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None


def _plot(timelines: Sequence[Timeline], path: Path) -> None:
    from autoscaler.simulate.plot import plot  # (imports matplotlib)

    plot(timelines, path)
