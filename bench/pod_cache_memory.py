"""What the pod cache keeps per pod: the bytes a LIST's pods hold once converted and indexed
(``pod_cache._PodSink``, as the informer fills it), the decoded page gone.

    .venv/bin/python bench/pod_cache_memory.py [--pods 52500] [--json FILE]

52,500 pods are the share of the most loaded replica at 50,000 targets over 5 (10,500
targets of 5 pods). The pods are as the simulated API server lists them: 5 a ReplicaSet
(its labels, owner and requests), their times whole seconds, 25 pods a second (a rollout).
Counted with ``tracemalloc``: Python objects only, not the allocator's overhead around them.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.adapters.kube.pod_cache import _PodSink  # noqa: E402

PER_REPLICASET = 5


def listed_pod(index: int) -> dict[str, Any]:
    workload = index // PER_REPLICASET
    digest = f"{workload * 7919 % 99_999_999:08x}"
    stamp = f"2026-12-01T07:{index // 1500 % 60:02d}:{index // 25 % 60:02d}Z"
    return {
        "metadata": {
            "name": f"app-{workload:05d}-{digest}-{index % 100_000:05x}",
            "namespace": f"bench-{workload // 50:04d}", "uid": f"{index:032x}",
            "resourceVersion": str(100_000 + index), "creationTimestamp": stamp,
            "labels": {"app": f"app-{workload:05d}", "pod-template-hash": digest},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": f"app-{workload:05d}-{digest}", "uid": f"{workload:036x}",
                                 "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"containers": [{"name": "app", "image": "app:1", "resources": {
            "requests": {"cpu": "200m", "memory": "128Mi"}}}]},
        "status": {"phase": "Running", "startTime": stamp,
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": stamp},
                                  {"type": "PodScheduled", "status": "True",
                                   "lastTransitionTime": stamp}],
                   "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0,
                                          "started": True}]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=52_500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    body = json.dumps({"kind": "PodList", "items": [listed_pod(i) for i in range(args.pods)]})
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    sink = _PodSink()
    page = json.loads(body)
    sink.replace([sink.convert(obj) for obj in page["items"]])
    del page
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(sink.pods) == args.pods
    figures = {"pods": args.pods, "keptMB": round(kept / 1e6, 2),
               "bytesPerPod": round(kept / args.pods)}
    print(f"{args.pods:,} pods cached: {figures['keptMB']} MB kept, "
          f"{figures['bytesPerPod']} bytes a pod")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
