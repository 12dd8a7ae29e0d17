"""``autoscaler decide SCENARIO.toml``: one decision of the pure core, from a scenario file.

A scenario names a spec, the scale, the pods with their requests and one sample per pod, and
prints what the controller would do and why. It needs no cluster and no Prometheus.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autoscaler.algorithm import (
    AutoscalerSpec,
    Container,
    Decision,
    History,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    Pod,
    PodMetricValues,
    PodSample,
    ScaleState,
    decide,
    parse_milli,
)


def _scenario_decision(data: dict[str, Any]) -> Decision:
    now = float(data.get("now", 1000.0))
    resource = str(data["resource"])
    pods = [
        Pod(
            name=str(pod["name"]),
            start_time=0.0,
            ready_transition_time=0.0,
            containers=(Container(name="app", requests={resource: parse_milli(pod["request"])}),),
        )
        for pod in data["pods"]
    ]
    samples = {
        str(pod["name"]): PodSample(value=parse_milli(pod["usage"]), timestamp=now)
        for pod in data["pods"]
        if "usage" in pod
    }
    spec = AutoscalerSpec(
        min_replicas=int(data.get("minReplicas", 1)),
        max_replicas=int(data["maxReplicas"]),
        metrics=(
            MetricSpec(
                type=MetricSourceType.RESOURCE,
                name=resource,
                target=MetricTarget(
                    type=MetricTargetType.UTILIZATION,
                    average_utilization=int(data["averageUtilization"]),
                ),
            ),
        ),
    )
    return decide(
        spec=spec,
        scale=ScaleState(spec_replicas=len(pods), status_replicas=len(pods)),
        metrics=[PodMetricValues(samples=samples)],
        pods=pods,
        history=History(),
        now=now,
    )


def render(decision: Decision) -> str:
    lines = [f"current replicas: {decision.current_replicas}"]
    for outcome in decision.metrics:
        if outcome.proposal is None:
            lines.append(f"  {outcome.description}: invalid ({outcome.error})")
            continue
        p = outcome.proposal
        lines.append(
            f"  {outcome.description}: {p.current.average_utilization}% "
            f"(ratio {p.ratio:.3f}) -> {p.replicas} replicas "
            f"[ready {p.ready_pods}, unready {p.unready_pods}, missing {p.missing_pods}]"
        )
    lines.append(f"desired replicas: {decision.desired_replicas}")
    lines.append("steps: " + ", ".join(decision.steps))
    lines += [
        f"  {c.type}={'True' if c.status else 'False'} {c.reason}: {c.message}"
        for c in decision.conditions
    ]
    return "\n".join(lines)


def command(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="autoscaler decide", description=__doc__)
    parser.add_argument("scenario", type=Path)
    args = parser.parse_args(argv)
    with args.scenario.open("rb") as handle:
        print(render(_scenario_decision(tomllib.load(handle))))
    sys.stdout.flush()
    return 0
