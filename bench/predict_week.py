"""Issue #27's goal, printed: predictive against reactive on the shipped week traces.

Runs ``config/examples/simulate/web-predictive.toml`` and the same config with prediction
off on ``week.csv`` (a daily season with sharp morning ramps) and ``noise.csv`` (no season),
and prints time beyond tolerance, time over target, worst overshoot, replica-hours, scale
events and the wall and CPU time of each simulation (the goal: prediction halves the time beyond
tolerance with at most 10 % more replica-hours on the week, in under 5 s).

    .venv/bin/python bench/predict_week.py [--step 5m] [--model holtWinters] [--repeat 3]

Each simulation's time is the best of ``--repeat`` runs (the machine is shared: the best is
the one least disturbed); the load average is printed with the table. ``--digest`` adds each
run's sha256 over the repr of every row and of the summary: two commits whose digests match
simulate the same timeline, row for row (what a change made only for speed must keep).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from importlib.util import find_spec
from pathlib import Path

from autoscaler.algorithm.forecast import ModelKind
from autoscaler.config import load_config
from autoscaler.config.durations import parse_duration
from autoscaler.simulate.engine import Scenario, simulate
from autoscaler.simulate.options import build_settings, load_workload_file
from autoscaler.simulate.report import Summary, format_elapsed, summarize
from autoscaler.simulate.trace import load_trace

EXAMPLES = Path(__file__).resolve().parent.parent / "config" / "examples" / "simulate"


def scenario(args: argparse.Namespace) -> Scenario:
    config = load_config(EXAMPLES / "web-predictive.toml", check_files=False)
    target = config.targets[0]
    predictions = tuple(
        None if p is None else replace(
            p, **({"step": parse_duration(args.step)} if args.step else {}),
            **({"model": ModelKind(args.model)} if args.model else {}))
        for p in target.predictions)
    model = build_settings(load_workload_file(EXAMPLES / "workload.toml"),
                           source="workload.toml").model
    return Scenario(label="predictive", spec=target.spec, model=model,
                    settings=config.daemon.algorithm, sync_period=config.daemon.sync_period,
                    windows=tuple(q.window for q in target.metric_queries),
                    predictions=predictions)


def run(s: Scenario, trace_name: str, repeat: int = 1) -> tuple[Summary, float, float, str]:
    """The run's summary, its best wall and CPU seconds (CPU time moves less with what else
    the machine does), and the digest of its rows and summary."""
    trace = load_trace(EXAMPLES / trace_name)
    wall = cpu = math.inf
    for _ in range(max(1, repeat)):
        started, used = time.perf_counter(), time.process_time()
        timeline = simulate(s, trace, interpolation="linear")
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - used)
    summary = summarize(timeline)
    digest = hashlib.sha256((repr(timeline.rows) + repr(summary)).encode()).hexdigest()
    return summary, wall, cpu, digest


def command_seconds(repeat: int, *, plot: bool) -> float:
    """The best wall time of ``autoscaler simulate`` of the predictive week as a user runs
    it: a fresh process (imports, config, trace, the run, the files and, with ``plot``, the
    PNG)."""
    best = math.inf
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "autoscaler", "simulate",
                "--config", str(EXAMPLES / "web-predictive.toml"),
                "--workload", str(EXAMPLES / "workload.toml"),
                "--trace", str(EXAMPLES / "week.csv"), "--out", out,
                *([] if plot else ["--no-plot"])]
        for _ in range(max(1, repeat)):
            started = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=out)
            best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", help="override every prediction's step (e.g. 1m)")
    parser.add_argument("--model", help="override every prediction's model")
    parser.add_argument("--repeat", type=int, default=1, help="runs per simulation (best time)")
    parser.add_argument("--digest", action="store_true",
                        help="print each run's sha256 of its rows and summary")
    parser.add_argument("--command", action="store_true",
                        help="also time `autoscaler simulate` of the predictive week end to "
                             "end, without and with the plot")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    predictive = scenario(args)
    reactive = replace(predictive, label="reactive", predictions=())
    print("| trace | run | beyond tolerance | over target | worst overshoot | replica-hours "
          "| scale events | forecast used | simulate (s) | CPU (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    digests: list[str] = []
    for name in ("week.csv", "noise.csv"):
        results = [(s.label, *run(s, name, args.repeat)) for s in (reactive, predictive)]
        for label, summary, seconds, cpu, _ in results:
            print(f"| {name} | {label} | {format_elapsed(summary.beyond_tolerance_seconds)} "
                  f"| {format_elapsed(summary.over_target_seconds)} "
                  f"| +{summary.max_over_target_percent:.1f}% | {summary.replica_hours:.1f} "
                  f"| {summary.scale_events} | {format_elapsed(summary.forecast_used_seconds)} "
                  f"| {seconds:.2f} | {cpu:.2f} |")
        (_, base, _, _, _), (_, pred, _, _, _) = results
        cut = 1 - pred.beyond_tolerance_seconds / base.beyond_tolerance_seconds \
            if base.beyond_tolerance_seconds else 0.0
        more = pred.replica_hours / base.replica_hours - 1
        print(f"| {name} | change | {-100 * cut:+.0f}% | | | {100 * more:+.1f}% | | | | |")
        digests += [f"{name} {label}: {digest}" for label, *_, digest in results]
    if args.command:
        print("\n| `autoscaler simulate` of the predictive week | wall (s) |\n|---|---|")
        print(f"| --no-plot | {command_seconds(args.repeat, plot=False):.2f} |")
        if find_spec("matplotlib") is not None:
            print(f"| with the plot | {command_seconds(args.repeat, plot=True):.2f} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.digest:
        print("\n".join(digests))


if __name__ == "__main__":
    main()
