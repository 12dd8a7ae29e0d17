"""What reading a per-pod Prometheus answer costs: the whole document decoded and then parsed
(before; still what any answer not written as Prometheus writes it gets) against its series
handed to the parse one at a time as they are decoded (``transport._parse_streamed``).

    .venv/bin/python bench/answer_decode.py [--series 100000] [--rounds 3] [--json FILE]

The answer is what Prometheus sends for the built-in cpu query over the pods of a replica's
share (``{"metric":{"namespace":…,"pod":…},"value":[ts,"0.123"]}`` per pod, no spaces),
parsed into the per-pod index a pass uses (``parse_pod_answer``). Prints, for each way, the
best round's seconds, the peak of Python's allocations while reading (tracemalloc, in a
round of its own), the answer's text included, and what the answer read keeps (the index a
pass holds until every target has its samples).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.adapters.prometheus import transport  # noqa: E402
from autoscaler.adapters.prometheus.parse import PodAnswer, parse_pod_answer  # noqa: E402

EXCHANGE = transport.Exchange(server="default", url="http://127.0.0.1:9", timeout=10.0,
                              max_response_bytes=1 << 30, max_series=10_000_000,
                              follow_redirects="same-origin")


def answer(series: int) -> bytes:
    now = time.time()
    items = ",".join(
        f'{{"metric":{{"namespace":"bench-{i // 500:03d}","pod":"app-{i // 5:06d}-{i % 5}"}},'
        f'"value":[{now:.3f},"0.{i % 1000:03d}"]}}' for i in range(series))
    return f'{{"status":"success","data":{{"resultType":"vector","result":[{items}]}}}}'.encode()


def whole(body: bytes) -> PodAnswer:
    return parse_pod_answer(transport._decode(bytearray(body), EXCHANGE))


def streamed(body: bytes) -> PodAnswer:
    result: PodAnswer = transport._parse_streamed(bytearray(body), EXCHANGE, parse_pod_answer)
    return result


def measure(read: Callable[[bytes], PodAnswer], body: bytes, rounds: int,
            series: int) -> dict[str, Any]:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        got = read(body)
        best = min(best, time.perf_counter() - started)
        assert got.size == series, got.size
        del got
    tracemalloc.start()
    got = read(body)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert got.size == series
    return {"seconds": round(best, 3), "peakMB": round(peak / 2**20, 1),
            "keptMB": round(kept / 2**20, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    body = answer(args.series)
    figures: dict[str, Any] = {"series": args.series,
                               "answerMB": round(len(body) / 2**20, 1)}
    for name, read in (("whole", whole), ("streamed", streamed)):
        figures[name] = measure(read, body, args.rounds, args.series)
    print(f"a per-pod answer of {args.series:,} series ({figures['answerMB']} MB):")
    for name in ("whole", "streamed"):
        print(f"  {name:8s} {figures[name]['seconds']:.3f} s (best of {args.rounds}), "
              f"peak {figures[name]['peakMB']} MB of Python allocations while reading, "
              f"{figures[name]['keptMB']} MB kept by the answer read")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
