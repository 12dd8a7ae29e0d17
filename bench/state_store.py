"""What putting a pass's scale writes on record costs: one store write of every target's
history, measured for the file store (encode + write + fsync + rename + directory fsync).

    .venv/bin/python bench/state_store.py            # 100, 1,000 and 10,000 targets

Each target carries a window's worth of history (20 recommendations, a scale event); one in
ten has a pending intent. Prints the encoded size and the median of 15 runs per size of:
a full encode (a clean stop's write), and the history keeper's write before a pass's scale
writes when ten targets scaled (only changed entries are re-encoded). A pass that scales
nothing writes nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.adapters.local_state import FileStateStore
from autoscaler.algorithm import History, Recommendation, ScaleEvent
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.status import TargetState
from autoscaler.snapshot import Intent, SavedTarget, Snapshot, encode


def snapshot(targets: int) -> Snapshot:
    return Snapshot(targets={
        f"ns-{i % 50}/Deployment/app-{i}": SavedTarget(
            history=History(
                recommendations=tuple(Recommendation(replicas=3 + j % 4,
                                                     timestamp=1.7e9 + 15 * j)
                                      for j in range(20)),
                scale_up_events=(ScaleEvent(change=1, timestamp=1.7e9),)),
            intent=Intent(previous=3, desired=4, resource_version=str(i), at=1.7e9)
            if i % 10 == 0 else None)
        for i in range(targets)}, saved_at=1.7e9)


async def measure(targets: int, runs: int = 15) -> tuple[int, float, float]:
    state = snapshot(targets)
    states: dict[str, TargetState] = {
        key: TargetState(key=key, history=saved.history, intent=saved.intent)
        for key, saved in state.targets.items()}
    encode_times, persist_times = [], []
    with tempfile.TemporaryDirectory() as directory:
        keeper = HistoryKeeper(FileStateStore(Path(directory) / "state"), states)
        keeper.restored.set()
        await keeper.persist()
        keys = list(states)
        for run in range(runs):
            started = time.perf_counter()
            data = encode(state)
            encode_times.append(time.perf_counter() - started)
            for key in keys[run * 10:(run + 1) * 10]:  # ten targets scaled this pass
                states[key].intent = Intent(previous=3, desired=5, resource_version="x",
                                            at=float(run))
            started = time.perf_counter()
            await keeper.persist()
            persist_times.append(time.perf_counter() - started)
    return len(data), statistics.median(encode_times), statistics.median(persist_times)


async def main() -> None:
    print("targets | encoded (KB) | full encode (ms) | write before a pass's scale writes (ms)")
    for targets in (100, 1_000, 10_000):
        size, encoded, persisted = await measure(targets)
        print(f"{targets:>7,} | {size / 1024:>12.0f} | {encoded * 1000:>16.1f} | "
              f"{persisted * 1000:>39.1f}")


if __name__ == "__main__":
    asyncio.run(main())
