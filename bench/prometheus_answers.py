"""How large the daemon's Prometheus answers are at N targets: the figures its limits rest on.

    .venv/bin/python bench/prometheus_answers.py [--targets 10000] [--pods 5]

Serves the benchmark's synthetic series (``bench/exporter.py``: N targets x P pods over 50
namespaces, pod names shaped like a Deployment's) to Debian's Prometheus, then asks it the
queries a pass of ``bench/daemon_scale.py`` sends (the built-in cpu usage query over every
namespace, the shared Pods query) plus the kube-state-metrics requests query, and prints per
query: series, bytes of the answer as sent with and without gzip, bytes per series, and the
peak RSS of a child process that reads it through ``PrometheusSource`` (``maxResponseBytes``
and ``maxSeries`` must let these answers through; the defaults are chosen from this table).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.adapters.prometheus import queries  # noqa: E402
from bench.cluster import namespace_of, target_name  # noqa: E402
from bench.daemon_scale import NAMESPACES, wait_for_data  # noqa: E402
from bench.exporter import SyntheticExporter  # noqa: E402
from tests.sim.prometheus import start_prometheus  # noqa: E402

PODS_QUERY = "sum by (namespace, pod) (app_requests_per_second)"

_CHILD = """
import asyncio, json, sys, time
from autoscaler.adapters.prometheus import PrometheusSource, TargetRequest
from autoscaler.algorithm import MetricSourceType, MetricSpec, MetricTarget, MetricTargetType
from autoscaler.config import MetricQuery, PrometheusServer

def status(field):
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork + exec.
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

url, promql = sys.argv[1], sys.argv[2]
spec = MetricSpec(type=MetricSourceType.PODS, name="m",
                  target=MetricTarget(type=MetricTargetType.AVERAGE_VALUE, average_value=1000))
request = TargetRequest(key="a/b", namespace="bench-000", name="b", kind="Deployment",
                        server="default", pods=(), metrics=(spec,),
                        queries=(MetricQuery(query=promql),))
source = PrometheusSource({"default": PrometheusServer(name="default", url=url, timeout=30)})
before = status("VmRSS")
started = time.monotonic()
result = asyncio.run(source.fetch([request], deadline=time.monotonic() + 60))
print(json.dumps({"seconds": time.monotonic() - started, "rss_before_kb": before,
                  "peak_kb": status("VmHWM"),
                  "value": repr(result.values["a/b"][0])[:200]}))
"""


def pod_names(targets: int, pods: int) -> list[tuple[str, str]]:
    """Names shaped like a Deployment's pods: ``<name>-<10-char hash>-<5-char suffix>``."""
    return [(namespace_of(i, NAMESPACES), f"{target_name(i)}-{i * 7919 % 10**10:010d}-"
             f"{j:05d}") for i in range(targets) for j in range(pods)]


def fetch(url: str, promql: str, *, compressed: bool) -> bytes:
    request = urllib.request.Request(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}",
        headers={"Accept-Encoding": "gzip" if compressed else "identity"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return bytes(answer.read())


def read_through_source(url: str, promql: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _CHILD, url, promql], capture_output=True,
                          text=True, timeout=120, check=True, cwd=ROOT)
    figures: dict[str, object] = json.loads(done.stdout.splitlines()[-1])  # after its logs
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=5)
    args = parser.parse_args(argv)
    names = pod_names(args.targets, args.pods)
    namespaces = sorted({ns for ns, _ in names})
    asked = {
        "cpu usage (built-in)": queries.usage_query("cpu", namespaces=namespaces,
                                                    per_container=False, window=60),
        "Pods metric (shared)": PODS_QUERY,
        "requests (kube-state-metrics)": queries.requests_query("cpu", namespaces=namespaces),
    }
    print(f"{args.targets:,} targets x {args.pods} pods: {len(names):,} pods")
    print("| query | series | bytes | gzip bytes | bytes/series | read (s) | child RSS "
          "before -> peak (MB) |")
    print("|---|---|---|---|---|---|---|")
    with SyntheticExporter(names) as exporter, start_prometheus(
            scrape_targets=[exporter.target], scrape_interval=5.0) as prom:
        wait_for_data(prom, len(names), timeout=120)
        time.sleep(1)
        for label, promql in asked.items():
            plain = fetch(prom.url, promql, compressed=False)
            packed = fetch(prom.url, promql, compressed=True)
            if packed[:2] == b"\x1f\x8b":
                assert gzip.decompress(packed)[:20] == plain[:20]
            series = len(json.loads(plain)["data"]["result"])
            read = read_through_source(prom.url, promql)
            before, peak = int(read["rss_before_kb"]) / 1024, int(read["peak_kb"]) / 1024
            print(f"| {label} | {series:,} | {len(plain):,} | {len(packed):,} | "
                  f"{len(plain) / max(1, series):.0f} | {float(read['seconds']):.3f} | "
                  f"{before:.0f} -> {peak:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
