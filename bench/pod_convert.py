"""What converting a listed pod to the core's ``Pod`` costs (``pod_json.pod_from_json``), as a
relist does for every pod of the namespaces a daemon caches (a ring member: its share and
its standby, up to the whole fleet's 250,000 pods at 50,000 targets).

    .venv/bin/python bench/pod_convert.py [--pods 50000] [--rounds 3] [--json FILE]

The pods are the simulated API server's (``bench/cluster.py``: one container requesting
``200m`` CPU and ``128Mi``, Running and Ready, its applied requests in its status), each a
distinct dict as a LIST page decodes them. Prints the best round's seconds and microseconds
a pod.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.adapters.kube.pod_json import pod_from_json  # noqa: E402

STAMP = "2026-11-29T00:00:00Z"


def listed_pod(index: int) -> dict[str, Any]:
    requests = {"cpu": "200m", "memory": "128Mi"}
    return {
        "metadata": {"name": f"app-{index:05d}-0", "namespace": f"bench-{index % 500:03d}",
                     "uid": f"uid-{index}", "resourceVersion": str(index + 1),
                     "labels": {"app": f"app-{index:05d}"}, "creationTimestamp": STAMP},
        "spec": {"containers": [{"name": "app", "resources": {"requests": dict(requests)}}]},
        "status": {"phase": "Running", "startTime": STAMP,
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": STAMP}],
                   "containerStatuses": [{"name": "app", "ready": True,
                                          "resources": {"requests": dict(requests)}}]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    pods = [listed_pod(i) for i in range(args.pods)]
    best = float("inf")
    for _ in range(args.rounds):
        started = time.perf_counter()
        converted = [pod_from_json(raw) for raw in pods]
        best = min(best, time.perf_counter() - started)
    assert all(p.containers[0].requests["cpu"] == 200 for p in converted)
    figures = {"pods": args.pods, "seconds": round(best, 3),
               "usPerPod": round(best / args.pods * 1e6, 1)}
    print(f"{args.pods:,} pods converted in {figures['seconds']} s (best of {args.rounds}): "
          f"{figures['usPerPod']} us a pod")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
