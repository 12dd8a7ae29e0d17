"""What a ring member's share of a fleet-wide query costs, against the whole answer.

A per-pod query written for the whole fleet (``sum by (namespace, pod)
(app_requests_per_second)``, no namespace or pod placeholder) answers every pod's series to
whoever asks. A ring member (or a static shard) runs it cut to the namespaces its pass
reads (``queries.narrowed``, docs/sharding.md). This bench starts Debian's Prometheus
scraping the synthetic exporter (T targets x 5 pods over 50 namespaces), then times the
query as written and cut to 1/3 and 1/6 of the namespaces (a member's pass in a ring of 3,
a failover's gained buckets; by matchers in its selector, as the daemon cuts this query),
and 1/6 by wrapping it (as the daemon cuts a query that mixes namespaces), each read as
the daemon reads it (HTTP, then the JSON parsed
into the per-pod index), and prints per variant: series, bytes, median and max seconds
over the rounds. The machine's other work counts: run it on an idle machine.

    .venv/bin/python bench/share_query.py                  # 3,000 targets (15,000 pods)
    .venv/bin/python bench/share_query.py --smoke          # 60 targets, 3 rounds (CI)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.adapters.prometheus.parse import parse_pod_answer  # noqa: E402
from autoscaler.adapters.prometheus.share import narrowed, wrapped  # noqa: E402
from bench.exporter import SyntheticExporter  # noqa: E402
from tests.sim.prometheus import start_prometheus  # noqa: E402

PODS = 5
NAMESPACES = 50
FLEET_WIDE = "sum by (namespace, pod) (app_requests_per_second)"


def read(url: str, promql: str) -> tuple[int, int, float]:
    """(series, bytes, seconds) of one instant query, parsed as the daemon parses it."""
    started = time.perf_counter()
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=60) as answer:  # loopback
        body = answer.read()
    parsed = parse_pod_answer(json.loads(body)["data"]["result"])
    return parsed.size, len(body), time.perf_counter() - started


def run(targets: int, rounds: int) -> dict[str, Any]:
    namespaces = [f"ns-{n:03d}" for n in range(NAMESPACES)]
    pods = [(namespaces[t % NAMESPACES], f"web-{t}-{p}") for t in range(targets)
            for p in range(PODS)]
    variants = {"whole": FLEET_WIDE,
                "cut to 1/3": narrowed(FLEET_WIDE, namespaces[::3]),
                "cut to 1/6": narrowed(FLEET_WIDE, namespaces[::6]),
                "wrapped 1/6": wrapped(FLEET_WIDE, namespaces[::6])}
    with SyntheticExporter(pods, series=("rps",)) as exporter, start_prometheus(
            scrape_targets=[exporter.target], scrape_interval=5.0) as prometheus:
        deadline = time.monotonic() + 120
        while read(prometheus.url, FLEET_WIDE)[0] < len(pods):
            if time.monotonic() > deadline:
                raise TimeoutError("Prometheus never held every pod's series")
            time.sleep(1)
        seen: dict[str, list[tuple[int, int, float]]] = {name: [] for name in variants}
        for _ in range(rounds):  # interleaved, so a slow moment of the machine hits them all
            for name, promql in variants.items():
                seen[name].append(read(prometheus.url, promql))
    return {name: {"series": runs[0][0], "bytes": runs[0][1],
                   "medianSeconds": round(statistics.median(r[2] for r in runs), 4),
                   "maxSeconds": round(max(r[2] for r in runs), 4)}
            for name, runs in seen.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.smoke:
        args.targets, args.rounds = 60, 3
    result = run(args.targets, args.rounds)
    print(f"{args.targets} targets x {PODS} pods over {NAMESPACES} namespaces, "
          f"{args.rounds} rounds")
    for name, figures in result.items():
        print(f"  {name:12s} {figures['series']:6d} series {figures['bytes']:9d} bytes  "
              f"median {figures['medianSeconds'] * 1000:7.1f} ms  "
              f"max {figures['maxSeconds'] * 1000:7.1f} ms")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
