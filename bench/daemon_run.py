"""The measured process: the daemon's real code path for a few full passes, and nothing else.

Run by ``bench/daemon_scale.py`` as its own process, so its CPU time and peak RSS are the
daemon's alone (the simulated API server, the exporter and Prometheus run elsewhere)::

    python bench/daemon_run.py CONFIG --control URL --passes 3 --out result.json

It builds the adapters with ``autoscaler.wiring.connect`` (KubeSession, ScaleClient over
discovery, the pod watch cache, EventRecorder, OwnerCheck, PrometheusSource), waits for the
caches to sync and every watch to begin, then runs ``Reconciler.run_pass`` over every target
(dry-run: decisions are made and reported, no scale is written) with the deadline the scheduler
gives it (0.9 of the sync period). Per pass it records wall time, CPU time, the split between
observing (GET /scale, pods from the cache), fetching metrics and deciding, the queries issued,
and the API requests the simulator saw, and right after each pass the Prometheus floor (the
pass's batched queries sent directly, JSON decoded, nothing else; the median of a few),
measured from a child process so its decoded answers never count toward the daemon's peak RSS.
Afterwards, in the same process and against the same servers: the per-target baseline (one
query per target and metric, through the same client class), N GET /scale over HTTP on their
own (what the workload watch cache saves a pass), and a scrape of the passes' ``/metrics``: the
exposition rendered in-process (median time, bytes, lines; gzipped at the level the endpoint
uses) and GET /metrics over loopback HTTP as Prometheus sends it (Accept-Encoding: gzip).

Diagnostics (environment, passed through by ``daemon_scale.py``, which copies their lines to
its stderr before it deletes the log): ``BENCH_TRACEMALLOC=1`` prints the top allocations at
each pass's metrics fetch, ``=sync`` those held once the caches have synced, ``=retained``
those the passes left alive (with their tracebacks);
``BENCH_HEAP=1`` where the RSS is once synced and after each pass (``heap_report``);
``BENCH_GC=default`` skips the daemon's GC tuning (``settle_heap``) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gzip
import json
import multiprocessing
import os
import resource
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autoscaler.adapters.prometheus import TargetRequest, batch, queries
from autoscaler.adapters.prometheus.client import PrometheusClient
from autoscaler.adapters.prometheus.parse import parse_result
from autoscaler.adapters.prometheus.port import PrometheusMetrics
from autoscaler.config import Config, TargetConfig, load_config
from autoscaler.observability.http import Probes, bound_port, build_app, serve
from autoscaler.observability.logs import configure_logging
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.heap import settle_heap
from autoscaler.runtime.ports import FetchedMetrics, MetricsWanted
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.wiring import Components, connect, wait_synced, watch_namespaces
from tests.procfs import memory_kib

FLOOR_REPEATS = 3
BASELINE_TEMPLATES = {
    "cpu": "sum by (namespace, pod) (rate(container_cpu_usage_seconds_total"
           f"{{{queries.CADVISOR_FILTER},${{pod_selector}}}}[60s]))",
    "app_requests_per_second": "sum by (namespace, pod) (app_requests_per_second"
                               "{${pod_selector}})",
}


class TimedMetrics:
    """The real ``PrometheusMetrics``, remembering what each pass asked and how long it took."""

    def __init__(self, inner: PrometheusMetrics) -> None:
        self.inner = inner
        self.wanted: Sequence[MetricsWanted] = ()
        self.queries_issued = 0
        self.started = self.seconds = 0.0
        self.snapshot = False
        self.rss_before_fetch = self.rss_after_fetch = 0

    async def fetch_metrics(
        self, wanted: Sequence[MetricsWanted], *, deadline: float
    ) -> FetchedMetrics:
        self.wanted, self.started = wanted, time.monotonic()
        self.rss_before_fetch = _max_rss()
        result = await self.inner.fetch_metrics(wanted, deadline=deadline)
        self.rss_after_fetch = _max_rss()
        self.seconds = time.monotonic() - self.started
        if self.snapshot:
            import tracemalloc
            print("tracemalloc peak MB", tracemalloc.get_traced_memory()[1] / 2**20,
                  file=sys.stderr)
            for stat in tracemalloc.take_snapshot().statistics("lineno")[:20]:
                print("tracemalloc", stat, file=sys.stderr)
            tracemalloc.reset_peak()
        self.queries_issued = result.queries_issued
        return result


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _control(url: str, path: str, *, post: bool = False) -> Any:
    request = urllib.request.Request(url + path, method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


async def wait_watching(components: Components, namespaces: set[str], control: str, *,
                        timeout: float) -> None:
    """Until every cache, the owner cache too, has LISTed and begun its watch: a watch that
    began during a measured pass would count as that pass's API request (its stream starts
    when the loop next runs after the LIST, and a pass of 20 targets lasts ~10 ms)."""
    await asyncio.wait_for(asyncio.gather(*(components.owners.wait_synced(ns)
                                            for ns in namespaces)), timeout)
    deadline = time.monotonic() + timeout
    while left := await asyncio.to_thread(_control, control, "/unwatched"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no watch began in {timeout:.0f} s on {', '.join(left)}")
        await asyncio.sleep(0.05)


def _requests_of(wanted: Sequence[MetricsWanted]) -> list[TargetRequest]:
    return [TargetRequest(key=w.target.key, namespace=w.target.namespace,
                          name=w.target.scale_target_ref.name,
                          kind=w.target.scale_target_ref.kind, server=w.target.prometheus,
                          pods=w.pods, metrics=w.target.spec.metrics,
                          queries=w.target.metric_queries) for w in wanted]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def heap_report(label: str) -> None:
    """``BENCH_HEAP=1``: where the RSS is, to stderr: glibc's heap (in use, free inside its
    arenas, mapped on its own; ``mallinfo2``) and pymalloc's arenas (``sys._debugmallocstats``),
    against VmRSS and what ``smaps_rollup`` says is anonymous."""
    if not os.environ.get("BENCH_HEAP"):
        return
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    rollup = dict(line.split(":", 1) for line in
                  Path("/proc/self/smaps_rollup").read_text().splitlines()[1:])
    mb = 2**20
    print(f"heap {label}: VmRSS {memory_kib(os.getpid()) / 1024:.1f} MB, anonymous "
          f"{int(rollup['Anonymous'].split()[0]) / 1024:.1f} MB; glibc in use "
          f"{info.uordblks / mb:.1f}, free in its arenas {info.fordblks / mb:.1f} (top "
          f"{info.keepcost / mb:.1f}), mapped alone {info.hblkhd / mb:.1f} MB", file=sys.stderr,
          flush=True)
    sys._debugmallocstats()  # pymalloc's own summary, to the same stderr


async def run_passes(
    reconciler: Reconciler, metrics: TimedMetrics, targets: Sequence[TargetConfig], *,
    passes: int, period: float, control: str, floor_of: Callable[[list[str]], float],
) -> list[dict[str, Any]]:
    """Each pass, then right after it the floor of its own batched queries, so the two are
    measured under the same conditions (Prometheus's answer time drifts by 2x over a run:
    head compaction, scrapes of the exporter landing in the middle of a query)."""
    results = []
    _control(control, "/reset", post=True)
    for number in range(passes):
        since, cpu, started = time.time(), time.process_time(), time.monotonic()
        await reconciler.run_pass(targets, deadline=started + period * 0.9)
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        decided = sum(1 for t in targets if (s := reconciler.states.get(t.key)) is not None
                      and s.last_outcome == "ok" and s.last_decision is not None
                      and s.last_reconcile is not None and s.last_reconcile >= since)
        observe = metrics.started - started if metrics.started >= started else wall
        results.append({
            "pass": number, "wall": wall, "cpu": cpu, "observe": observe,
            "fetch": metrics.seconds, "decide": max(0.0, wall - observe - metrics.seconds),
            "queries": metrics.queries_issued, "decided": decided,
            "api": _control(control, "/counts"),
            "floor": floor_of(batched_promql(metrics.wanted)),
            "max_rss_mb": {"before_fetch": metrics.rss_before_fetch / 2**20,
                           "after_fetch": metrics.rss_after_fetch / 2**20,
                           "after_pass": _max_rss() / 2**20},
        })
        heap_report(f"after pass {number}")
        _control(control, "/reset", post=True)
    return results


def batched_promql(wanted: Sequence[MetricsWanted]) -> list[str]:
    """The pass's batched queries, as the daemon's planner makes them."""
    return [k.promql for k in batch.plan(_requests_of(wanted), lambda _: True).queries]


def floor(base_url: str, promql: Sequence[str], workers: int) -> float:
    """Median time Prometheus takes to answer ``promql`` (concurrently), JSON decoded only."""
    url = base_url.rstrip("/") + "/api/v1/query"
    session = requests.Session()

    def one(query: str, at: float) -> int:
        answer = session.post(url, data={"query": query, "time": f"{at:.3f}"}, timeout=60)
        answer.raise_for_status()
        return len(answer.json()["data"]["result"])

    times = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in range(FLOOR_REPEATS):
            at, started = time.time(), time.monotonic()
            list(pool.map(lambda q: one(q, at), promql))  # noqa: B023 - used at once
            times.append(time.monotonic() - started)
    return statistics.median(times)


async def baseline(
    config: Config, wanted: Sequence[MetricsWanted], workers: int
) -> dict[str, float]:
    """One query per target per metric, rendered with the target's own pods (per-target
    pollers), sent through the same client class the daemon uses, answers parsed."""
    client = PrometheusClient(config.prometheus_servers, max_workers=workers)
    rendered = [
        queries.render(BASELINE_TEMPLATES[spec.name], namespace=w.target.namespace,
                       name=w.target.scale_target_ref.name, kind=w.target.scale_target_ref.kind,
                       pods=[p.name for p in w.pods])
        for w in wanted for spec in w.target.spec.metrics
    ]
    at, cpu, started = time.time(), time.process_time(), time.monotonic()
    deadline = started + 600

    async def one(promql: str) -> int:
        return len(parse_result(await client.query("default", promql, at=at, deadline=deadline)))

    series = await asyncio.gather(*(one(q) for q in rendered))
    wall = time.monotonic() - started
    client.close()
    return {"queries": len(rendered), "wall": wall, "cpu": time.process_time() - cpu,
            "series": sum(series)}


async def scale_reads(components: Components, targets: Sequence[TargetConfig],
                      concurrency: int) -> float:
    """N GET /scale over HTTP (kubernetes-asyncio, the pass's concurrency), alone: what a
    pass would pay without the workload watch cache."""
    # Imported here, after the daemon's modules: imported first, kubernetes-asyncio would
    # come in whole (its 768 models), not by parts as the daemon imports it.
    from kubernetes_asyncio.client import CustomObjectsApi

    limit = asyncio.Semaphore(concurrency)
    api = CustomObjectsApi(components.api_client)

    async def one(target: TargetConfig) -> None:
        async with limit:
            await api.get_namespaced_custom_object_scale(
                "apps", "v1", target.namespace, "deployments", target.scale_target_ref.name)

    started = time.monotonic()
    await asyncio.gather(*(one(t) for t in targets))
    return time.monotonic() - started


async def scrape(telemetry: DaemonMetrics, repeats: int = 5) -> dict[str, Any]:
    """What a scrape of the daemon's /metrics costs once the passes have filled it: GET
    /metrics over loopback as Prometheus sends it (gzip), the peak RSS it adds, then the
    exposition rendered whole in-process (time, bytes, lines) and gzipped at level 1."""
    runner = await serve(build_app(Probes(), telemetry), "127.0.0.1:0")
    url = f"http://127.0.0.1:{bound_port(runner)}/metrics"

    def get() -> tuple[float, int]:
        request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as answer:
            size = len(answer.read())
        return time.perf_counter() - started, size

    rss_before = _max_rss()
    try:
        gets = [await asyncio.to_thread(get) for _ in range(repeats)]
    finally:
        await runner.cleanup()
    rss_scraped = _max_rss()
    renders, body = [], b""
    for _ in range(repeats):
        started = time.perf_counter()
        body = telemetry.render()
        renders.append(time.perf_counter() - started)
    started = time.perf_counter()
    packed = gzip.compress(body, compresslevel=1)
    gzip_s = time.perf_counter() - started
    return {"render_s": statistics.median(renders), "bytes": len(body),
            "lines": body.count(b"\n"), "gzip_bytes": len(packed), "gzip_s": gzip_s,
            "http_s": statistics.median(g[0] for g in gets), "http_bytes": gets[0][1],
            "http_rss_added_mb": (rss_scraped - rss_before) / 2**20}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    if os.environ.get("BENCH_TRACEMALLOC") == "sync":
        import tracemalloc
        tracemalloc.start()
    config = load_config(args.config)
    configure_logging(log_format=config.daemon.log_format, level=config.daemon.log_level)
    targets = list(config.targets)
    workers = min(8, max(2, config.daemon.concurrency))  # as wiring.connect sizes the pool
    async with connect(config) as components:
        metrics = TimedMetrics(components.metrics)
        telemetry = DaemonMetrics()
        reconciler = Reconciler(
            scales=components.scales, pods=components.pods, metrics=metrics,
            events=components.events, owners=components.owners, telemetry=telemetry,
            options=ReconcileOptions(algorithm=config.daemon.algorithm, dry_run=True,
                                     concurrency=config.daemon.concurrency))
        started = time.monotonic()
        namespaces = {t.namespace for t in targets}
        await watch_namespaces(components, namespaces)  # pods and workloads, as the daemon
        await asyncio.wait_for(wait_synced(components, namespaces), 600)
        synced = time.monotonic() - started
        await wait_watching(components, namespaces, args.control, timeout=120)
        peak_after_sync = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        heap_report("synced")
        if os.environ.get("BENCH_TRACEMALLOC") == "sync":  # what the synced caches hold
            import tracemalloc
            print("tracemalloc synced MB", tracemalloc.get_traced_memory(), file=sys.stderr)
            for stat in tracemalloc.take_snapshot().statistics("lineno")[:25]:
                print("tracemalloc", stat, file=sys.stderr)
        elif os.environ.get("BENCH_TRACEMALLOC") == "retained":  # what passes leave alive
            import tracemalloc
            tracemalloc.start(8)
            before_passes = tracemalloc.take_snapshot()
        elif os.environ.get("BENCH_TRACEMALLOC"):  # where memory goes: a pass's peak, by line
            import tracemalloc
            tracemalloc.start()
            metrics.snapshot = True
        if os.environ.get("BENCH_GC") != "default":  # the daemon's tuning, unless compared
            settle_heap()
        # Spawned, not forked: a fork of this process would copy its threads' locks. The loop
        # blocks while the floor is measured, on purpose: between passes, nothing competing.
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
            url = config.prometheus_servers["default"].url
            passes = await run_passes(
                reconciler, metrics, targets, passes=args.passes,
                period=config.daemon.sync_period, control=args.control,
                floor_of=lambda promql: child.submit(floor, url, promql, workers).result())
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if os.environ.get("BENCH_TRACEMALLOC") == "retained":
            import gc
            import tracemalloc
            gc.collect()
            retained = tracemalloc.take_snapshot().compare_to(before_passes, "traceback")
            print("tracemalloc retained MB",
                  round(sum(stat.size_diff for stat in retained) / 2**20, 1), file=sys.stderr)
            for stat in retained[:12]:
                print(f"tracemalloc {stat}", file=sys.stderr)
                for frame in stat.traceback.format()[-12:]:
                    print(f"tracemalloc   {frame}", file=sys.stderr)
        batched = batched_promql(metrics.wanted)
        floor_s = statistics.median(p["floor"] for p in passes[1:] or passes)
        base = await baseline(config, metrics.wanted, workers) if args.baseline else None
        scale_s = await scale_reads(components, targets, config.daemon.concurrency)
        scraped = await scrape(telemetry)
    return {"targets": len(targets), "sync_seconds": synced, "passes": passes,
            "peak_rss_bytes": peak_rss, "peak_rss_after_sync_bytes": peak_after_sync,
            "floor_seconds": floor_s,
            "floor_queries": len(batched), "baseline": base, "scale_reads_seconds": scale_s,
            "concurrency": config.daemon.concurrency, "scrape": scraped}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--control", required=True)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-baseline", dest="baseline", action="store_false")
    arguments = parser.parse_args()
    arguments.out.write_text(json.dumps(asyncio.run(main(arguments)), indent=1))
