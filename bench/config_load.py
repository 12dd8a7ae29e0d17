"""What loading a config of many targets costs: time, and peak RSS over the imports.

    .venv/bin/python bench/config_load.py [--targets 50000] [--json FILE]

A ring member (dynamic sharding) loads every target of the fleet, so this is part of each
replica's memory whatever its share (``bench/ring_scale.py``'s config: one inline table a
target, merged over ``[defaults]`` with two metrics). Each size runs in a child process of
its own: its imports first (``VmRSS``), then ``load_config`` (``VmHWM`` after it: the peak,
which the document being converted sets), then the RSS the loaded config keeps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.procfs import memory_kib  # noqa: E402

SIZES = (1_000, 10_000, 50_000)


def _mb(field: str) -> float:
    return memory_kib(os.getpid(), field) / 1024


def measure_here(targets: int) -> dict[str, float]:
    """In this process: the figures of one load (run by ``main`` in a fresh child)."""
    from bench.ring_scale import ring_config_file

    with ring_config_file(targets, prefix="config-load-") as path:
        size = path.stat().st_size
        import autoscaler.app  # noqa: F401 - the daemon's imports, counted before the load
        from autoscaler.config.loader import load_config

        imports = _mb("VmRSS")
        started = time.perf_counter()
        config = load_config(path, check_files=False)
        seconds = time.perf_counter() - started
    assert len(config.targets) == targets
    return {"targets": targets, "configMiB": round(size / 2**20, 2),
            "seconds": round(seconds, 2), "importsMB": round(imports, 1),
            "peakOverImportsMB": round(_mb("VmHWM") - imports, 1),
            "keptOverImportsMB": round(_mb("VmRSS") - imports, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, action="append",
                        help=f"a size to load (repeatable; default {', '.join(map(str, SIZES))})")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_here(args.child)))
        return
    rows = []
    for targets in args.targets or SIZES:
        child = subprocess.run([sys.executable, __file__, f"--child={targets}"],
                               capture_output=True, text=True, check=True, timeout=600)
        rows.append(json.loads(child.stdout))
    print("| targets | config (MiB) | load (s) | imports (MB) | peak over imports (MB) "
          "| kept over imports (MB) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['targets']:,} | {row['configMiB']} | {row['seconds']} | "
              f"{row['importsMB']} | {row['peakOverImportsMB']} | {row['keptOverImportsMB']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
