"""Store writes per scaling pass: what putting scale writes on record, and their outcomes,
costs in writes of the history store (the README's "What is persisted").

    .venv/bin/python bench/store_writes.py

One pass of the real ``Reconciler`` and ``HistoryKeeper`` over a file store, with k targets
that all scale (every PUT answered after 2-20 ms, at the daemon's default concurrency of
ten); counts the store's writes in that pass, then in a pass that scales nothing, then in
the pass after one PUT was answered 500 (its outcome unknown until a fresh read) and in the
pass that settles it. The median of 5 runs per k.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.adapters.local_state import FileStateStore
from autoscaler.algorithm import ExternalMetricValues, Milli, Pod
from autoscaler.config import ScaleTargetRef, TargetConfig, parse_config
from autoscaler.errors import TransientError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler


@dataclass(frozen=True, slots=True)
class Scale:
    spec_replicas: int
    status_replicas: int
    resource_version: str
    selector: str = "app=x"
    annotations: dict[str, str] | None = None


class Cluster:
    """Workloads in memory; each PUT answered after 2-20 ms; names in ``failing`` get a 500
    (not applied) once."""

    def __init__(self) -> None:
        self.replicas: dict[str, int] = {}
        self.versions: dict[str, int] = {}
        self.failing: set[str] = set()
        self.random = random.Random(7)

    def _scale(self, name: str) -> Scale:
        replicas = self.replicas.setdefault(name, 2)
        return Scale(spec_replicas=replicas, status_replicas=replicas,
                     resource_version=str(self.versions.setdefault(name, 1)),
                     annotations={})

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> Scale:
        return self._scale(ref.name)

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> Scale:
        return self._scale(ref.name)

    async def update_scale(self, namespace: str, ref: ScaleTargetRef, replicas: int,
                           resource_version: str) -> Scale:
        await asyncio.sleep(self.random.uniform(0.002, 0.020))
        if ref.name in self.failing:
            self.failing.discard(ref.name)
            raise TransientError("HTTP 500")
        self.replicas[ref.name] = replicas
        self.versions[ref.name] += 1
        return self._scale(ref.name)

    def pods_for(self, namespace: str, selector: str) -> Sequence[Pod]:
        return ()

    async def record(self, namespace: str, ref: ScaleTargetRef, *, warning: bool, reason: str,
                     message: str) -> None:
        return None

    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        return ()

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        return ()


class Depth:
    """Every target's queue at ``units`` (10 per replica)."""

    units = 20

    async def fetch_metrics(self, wanted: Sequence[MetricsWanted], *,
                            deadline: float) -> FetchedMetrics:
        value = ExternalMetricValues(values=(Milli(self.units * 1000),))
        return FetchedMetrics(values={w.target.key: (value,) for w in wanted}, pods={})


class CountingStore(FileStateStore):
    saves = 0

    async def save(self, data: bytes) -> None:
        self.saves += 1
        await super().save(data)


def fleet(count: int) -> list[TargetConfig]:
    return list(parse_config("".join(f"""
[[autoscaler]]
namespace = "shop"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "app-{i}" }}
maxReplicas = 100
behavior = {{ scaleDown = {{ stabilizationWindowSeconds = 0 }} }}

[[autoscaler.metrics]]
type = "External"
external.metric.name = "depth"
external.target = {{ type = "AverageValue", averageValue = "10" }}
external.query = "sum(depth)"
""" for i in range(count))).targets)


async def run(count: int) -> tuple[int, int, int, int, float]:
    targets, cluster, metrics = fleet(count), Cluster(), Depth()
    with tempfile.TemporaryDirectory() as directory:
        store = CountingStore(Path(directory) / "state")
        reconciler = Reconciler(scales=cluster, pods=cluster, metrics=metrics,
                                events=cluster, owners=cluster, telemetry=DaemonMetrics(),
                                options=ReconcileOptions(concurrency=10))
        keeper = HistoryKeeper(store, reconciler.states)
        reconciler.options = ReconcileOptions(concurrency=10, persist=keeper.persist)
        await keeper.restore([t.key for t in targets])

        async def one_pass() -> int:
            before = store.saves
            await reconciler.run_pass(targets, deadline=time.monotonic() + 60)
            await asyncio.sleep(0.05)  # anything still under way after the pass
            return store.saves - before

        metrics.units = 40  # 2 -> 4 everywhere
        started = time.perf_counter()
        scaling = await one_pass()
        took = time.perf_counter() - started
        steady = await one_pass()
        metrics.units = 60  # 4 -> 6, one PUT answered 500
        cluster.failing.add(targets[0].scale_target_ref.name)
        failed = await one_pass()
        settling = await one_pass()
    return scaling, steady, failed, settling, took


async def main() -> None:
    print("targets scaling | store writes: scaling pass | steady pass | pass with a 500 | "
          "next pass (settles it) | scaling pass (s)")
    for count in (1, 10, 100, 1_000):
        runs = [await run(count) for _ in range(5)]
        scaling, steady, failed, settling, took = (statistics.median(column)
                                                   for column in zip(*runs, strict=True))
        print(f"{count:>15,} | {scaling:>26} | {steady:>11} | {failed:>15} | "
              f"{settling:>22} | {took:>16.2f}")


if __name__ == "__main__":
    asyncio.run(main())
