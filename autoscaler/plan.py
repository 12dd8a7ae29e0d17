"""``autoscaler plan``: one pass against the live Prometheus and cluster that changes nothing.

It runs the daemon's own reconcile pass in dry-run with events off, then prints per target
each metric's current value against its target, the bounds, the current and desired counts
and why (our step vocabulary next to upstream's condition reasons). ``--explain`` adds the
computation behind each number; ``--output json`` is for scripts. With a state file it reads
the daemon's history (read-only), so stabilization windows are judged as the daemon would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from autoscaler.algorithm import ConditionType, Decision, MetricOutcome, format_milli
from autoscaler.config import Config, ConfigError, TargetConfig, load_config
from autoscaler.errors import AutoscalerError
from autoscaler.observability.logs import configure_logging
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.status import TargetState
from autoscaler.state import FileStateStore
from autoscaler.wiring import connect, wait_synced, watch_namespaces

log = structlog.get_logger("autoscaler.plan")


async def plan(config: Config, *, targets: Sequence[TargetConfig]) -> dict[str, TargetState]:
    async with connect(config, record_events=False) as components:
        reconciler = Reconciler(
            scales=components.scales, pods=components.pods, metrics=components.metrics,
            events=components.events, owners=components.owners,
            options=ReconcileOptions(algorithm=config.daemon.algorithm, dry_run=True,
                                     concurrency=config.daemon.concurrency,
                                     may_write=lambda: False, record_events=False),
            telemetry=DaemonMetrics())
        await _load_history(config, reconciler)
        namespaces = {t.namespace for t in targets}
        await watch_namespaces(components, namespaces)
        await asyncio.wait_for(wait_synced(components, namespaces), timeout=30)
        period = min((t.sync_period for t in targets), default=15.0)
        await reconciler.run_pass(targets, deadline=time.monotonic() + period)
        return {t.key: reconciler.state(t.key) for t in targets}


async def _load_history(config: Config, reconciler: Reconciler) -> None:
    """The daemon's saved history, if it keeps one in a file (read, never moved or written)."""
    if config.daemon.state_file is None:
        return
    try:
        snapshot = await FileStateStore(config.daemon.state_file, read_only=True).load()
    except AutoscalerError as error:
        log.warning("planning without the saved history", error=str(error))
        return
    for key, saved in (snapshot.targets if snapshot is not None else {}).items():
        reconciler.state(key).history = saved.history


def reason_of(state: TargetState) -> str:
    """Our steps with upstream's condition reasons, e.g. 'PolicyLimited (ScaleUpLimit)'."""
    decision = state.last_decision
    if decision is None:
        return state.last_outcome + (f": {state.last_error}" if state.last_error else "")
    steps = ", ".join(decision.steps)
    reasons = [c.reason for c in decision.conditions
               if c.type is not ConditionType.ABLE_TO_SCALE or c.reason != "SucceededGetScale"]
    return f"{steps} ({', '.join(reasons)})" if reasons else steps


def metric_cell(outcome: MetricOutcome) -> str:
    target = outcome.spec.target
    wanted = (f"{target.average_utilization}%" if target.average_utilization is not None
              else format_milli(target.average_value if target.average_value is not None
                                else target.value or 0))
    if outcome.proposal is None:
        return f"{outcome.spec.name}: invalid/{wanted}"
    current = outcome.proposal.current
    if current.average_utilization is not None and target.average_utilization is not None:
        now = f"{current.average_utilization}%"
    else:
        now = format_milli(current.average_value if current.average_value is not None
                           else current.value or 0)
    return f"{outcome.spec.name}: {now}/{wanted}"


def rows(config: Config, states: dict[str, TargetState]) -> list[list[str]]:
    table = [["TARGET", "METRICS (current/target)", "MIN", "MAX", "CURRENT", "DESIRED", "REASON"]]
    for target in config.targets:
        state = states.get(target.key)
        if state is None:
            continue
        decision = state.last_decision
        table.append([
            target.key,
            "; ".join(metric_cell(m) for m in decision.metrics) if decision else "-",
            str(target.spec.min_replicas), str(target.spec.max_replicas),
            str(decision.current_replicas) if decision else "?",
            str(decision.desired_replicas) if decision else "?",
            reason_of(state),
        ])
    return table


def render_table(table: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table)


def explain(decision: Decision) -> list[str]:
    lines = []
    for outcome in decision.metrics:
        p = outcome.proposal
        if p is None:
            lines.append(f"    {outcome.description}: invalid: {outcome.error}")
            continue
        pods = (f"pods ready {p.ready_pods}, unready {p.unready_pods}, missing {p.missing_pods},"
                f" ignored {p.ignored_pods}") if p.ready_pods is not None else "no pod list used"
        rebalanced = (
            f", after counting unready/missing pods conservatively {p.rebalanced_ratio:.4f}"
            if p.rebalanced_ratio is not None else "")
        tolerance = " (within tolerance: keep current)" if p.within_tolerance else ""
        lines.append(f"    {outcome.description}: ratio {p.ratio:.4f}{rebalanced}{tolerance};"
                     f" {pods} -> proposes {p.replicas}")
    lines.append(f"    combined proposal {decision.proposal} (largest wins);"
                 f" after stabilization {decision.stabilized};"
                 f" after rate limits and bounds {decision.desired_replicas}")
    lines += [f"    {c.type}={'True' if c.status else 'False'} {c.reason}: {c.message}"
              for c in decision.conditions]
    return lines


def to_json(config: Config, states: dict[str, TargetState]) -> dict[str, Any]:
    return {"targets": [
        {"target": t.key, "minReplicas": t.spec.min_replicas, "maxReplicas": t.spec.max_replicas,
         "reason": reason_of(states[t.key]), **states[t.key].to_json()}
        for t in config.targets if t.key in states
    ]}


def command(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="autoscaler plan", description=__doc__)
    parser.add_argument("--config", "-c", type=Path, required=True)
    parser.add_argument("--target", action="append", help="only this target key (repeatable)")
    parser.add_argument("--explain", action="store_true", help="show the computation")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except (ConfigError, OSError) as error:
        print(f"autoscaler plan: {error}", file=sys.stderr)
        return 1
    configure_logging(log_format="console", level="warning")
    targets = [t for t in config.targets if not args.target or t.key in args.target]
    states = asyncio.run(plan(config, targets=targets))
    if args.output == "json":
        print(json.dumps(to_json(config, states), indent=2))
        return 0
    print(render_table(rows(config, states)))
    if args.explain:
        for target in targets:
            decision = states[target.key].last_decision
            if decision is not None:
                print(f"\n{target.key}:")
                print("\n".join(explain(decision)))
    return 0
