"""What the scheduler's gate costs a ring member at each wake, asked about every configured
target or only about the candidates (the targets of the buckets it holds).

    .venv/bin/python bench/scheduler_gate.py [--targets 50000] [--members 5] [--seconds 4]

Every ring member loads the whole fleet's config; its scheduler wakes at least once a
second, and at each bucket gained and pass ended. This loads ``ring_scale.py``'s config of N
targets, builds a real ``RingMember`` (its Lease ports replaced by fixed views: it holds
1/members of the buckets, or none, as while the ring forms) and a real ``Scheduler`` gated
by it, runs the scheduler's loop for a few seconds woken every 10 ms, and prints per
variant: gate questions and CPU milliseconds per wake (the loop's passes do nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.config import TargetConfig  # noqa: E402
from autoscaler.config.loader import load_config  # noqa: E402
from autoscaler.observability.metrics import DaemonMetrics  # noqa: E402
from autoscaler.runtime import ring  # noqa: E402
from autoscaler.runtime.ring import BucketLease  # noqa: E402
from autoscaler.runtime.ring_member import Claim, ClaimState, RingMember, RingParts  # noqa: E402
from autoscaler.runtime.scheduler import Scheduler  # noqa: E402
from bench.ring_scale import ring_config_file  # noqa: E402

WARMUP, WAKE_EVERY = 1.0, 0.01


def fleet_config(targets: int) -> list[TargetConfig]:
    with ring_config_file(targets, prefix="scheduler-gate-") as path:
        return list(load_config(path, check_files=False).targets)


def member_holding(configured: list[TargetConfig], share: float) -> RingMember:
    """A ring member "a" holding ``share`` of the configured targets' buckets, fenced and
    restored (what ``may_run`` asks), its ports fixed views."""
    restored = asyncio.Event()
    restored.set()
    view: dict[int, Any] = {}
    leases = SimpleNamespace(view=view, get=view.get)
    membership = SimpleNamespace(incarnation="a", valid=lambda: True)
    member = RingMember(
        parts=RingParts(membership=membership, leases=leases,  # type: ignore[arg-type]
                        store=None, keeper=None),  # type: ignore[arg-type]
        timings=ring.Timings(), placement="namespace", targets=lambda: configured,
        ready=lambda: True, run_now=print, gained=print, lost=print, idle=print,  # type: ignore[arg-type]
        warm=print, cached=print, monotonic=time.monotonic,  # type: ignore[arg-type]
        telemetry=DaemonMetrics(), ring_name="bench")
    buckets = sorted({member.bucket_of(t) for t in configured})
    for bucket in buckets[:round(len(buckets) * share)]:
        member.claims[bucket] = Claim(bucket=bucket, epoch=1, state=ClaimState.ACTIVE,
                                      keeper=SimpleNamespace(restored=restored))  # type: ignore[arg-type]
        view[bucket] = SimpleNamespace(lease=BucketLease(holder="a"), epoch=1)
    return member


async def per_wake(configured: list[TargetConfig], member: RingMember,
                   candidates: Callable[[], Any], measured: float) -> dict[str, float]:
    asked = wakes = 0

    def may_run(key: str) -> bool:
        nonlocal asked
        asked += 1
        return member.may_run(key)

    def counted() -> Any:
        nonlocal wakes
        wakes += 1
        return candidates()

    async def run_pass(targets: Sequence[TargetConfig], deadline: float) -> None:
        pass

    scheduler = Scheduler(run_pass, may_run=may_run, candidates=counted)
    scheduler.set_targets(configured)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    started = time.monotonic()
    cpu = 0.0
    while time.monotonic() - started < WARMUP + measured:
        if cpu == 0.0 and time.monotonic() - started >= WARMUP:
            asked, wakes, cpu = 0, 0, time.process_time()
        scheduler.run_now(())  # a wake, as a bucket gained or a pass ended gives
        await asyncio.sleep(WAKE_EVERY)
    used = time.process_time() - cpu
    stop.set()
    await task
    return {"wakes": wakes, "asksPerWake": round(asked / wakes, 1),
            "cpuMsPerWake": round(used * 1000 / wakes, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=50_000)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0, help="measured per variant")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    configured = fleet_config(args.targets)
    figures: dict[str, Any] = {"targets": args.targets}
    print(f"{args.targets:,} targets; wakes every {WAKE_EVERY * 1000:g} ms for {args.seconds:g} s")
    print(f"{'holds':<12} {'asks':<10} {'wakes':>6} {'asks/wake':>10} {'CPU ms/wake':>12}")
    for holds, share in (("nothing", 0.0), (f"1/{args.members}", 1 / args.members)):
        member = member_holding(configured, share)
        for asks, candidates in (("everyone", lambda: None), ("candidates", member.candidates)):
            row = asyncio.run(per_wake(configured, member, candidates, args.seconds))
            figures[f"holds {holds}, asks {asks}"] = row
            print(f"{holds:<12} {asks:<10} {row['wakes']:>6} {row['asksPerWake']:>10,.1f} "
                  f"{row['cpuMsPerWake']:>12.3f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
