"""What keeping the explanation costs: the memory a target's last decision holds for /status.

A decision keeps, for ``status``, the values each metric was computed from (each pod's
value and the query text; until 2026-12-02 each pod's sample, with its time and window) and
the named pod groups; before those were kept, they died with the pass.
This builds one pass's decisions for N targets (5 pods, 2 per-pod metrics each, as
``bench/daemon_scale.py``) and prints the memory the kept decisions hold with and without
those references, so the difference is what a daemon holds between passes for /status.

    .venv/bin/python bench/status_retention.py [--targets 10000]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import tracemalloc
from typing import Any

from autoscaler.algorithm import (
    AutoscalerSpec,
    Container,
    DecisionInput,
    History,
    MetricSourceType,
    MetricSpec,
    MetricTarget,
    MetricTargetType,
    Milli,
    Pod,
    PodMetricValues,
    PodSample,
    ScaleState,
    decide,
)

NOW = 1_800_000_000.0
SPEC = AutoscalerSpec(min_replicas=1, max_replicas=20, metrics=(
    MetricSpec(type=MetricSourceType.RESOURCE, name="cpu",
               target=MetricTarget(type=MetricTargetType.UTILIZATION, average_utilization=60)),
    MetricSpec(type=MetricSourceType.PODS, name="rps",
               target=MetricTarget(type=MetricTargetType.AVERAGE_VALUE,
                                   average_value=Milli(100_000))),
))


def one_pass(targets: int) -> list[Any]:
    decisions = []
    for t in range(targets):
        pods = [Pod(name=f"web-{t}-{i}", start_time=0.0, ready_transition_time=0.0,
                    containers=(Container(name="app", requests={"cpu": 500}),))
                for i in range(5)]
        query = f'sum by (pod) (rate(http_requests_total{{namespace="ns-{t % 50}",pod=~"...' \
                f'{t}"}}[2m]))'
        values = [PodMetricValues(samples={p.name: PodSample(value=Milli(300), timestamp=NOW)
                                           for p in pods}),
                  PodMetricValues(samples={p.name: PodSample(value=Milli(90_000), timestamp=NOW)
                                           for p in pods}, query=query)]
        decisions.append(decide(DecisionInput(spec=SPEC,
                                              scale=ScaleState(spec_replicas=5, status_replicas=5),
                                              metrics=values, pods=pods, history=History(),
                                              now=NOW)))
    return decisions


def without_explanation(decision: Any) -> Any:
    """The decision as it was kept before: no values, no named pod groups."""
    outcomes = tuple(dataclasses.replace(
        m, values=None,
        proposal=None if m.proposal is None else dataclasses.replace(m.proposal, pods=None))
        for m in decision.metrics)
    return dataclasses.replace(decision, metrics=outcomes)


def held(build: Any) -> int:
    gc.collect()
    tracemalloc.start()
    kept = build()
    gc.collect()
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=10_000)
    count = parser.parse_args().targets
    now = held(lambda: one_pass(count))
    before = held(lambda: [without_explanation(d) for d in one_pass(count)])
    mib = 2**20
    print(f"{count} targets: decisions kept for /status hold {now / mib:.1f} MiB "
          f"({before / mib:.1f} MiB without the per-pod values and named pods): "
          f"+{(now - before) / mib:.1f} MiB, {(now - before) / count:.0f} bytes per target")


if __name__ == "__main__":
    main()
