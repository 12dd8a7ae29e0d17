"""The README's main command as a new user meets it: ``./scripts/demo.sh`` in a fresh clone.

    python3 bench/first_mile.py              # ~1 minute: fresh clone, then a rerun
    python3 bench/first_mile.py --json FILE  # the figures, for a script

It clones this repository's HEAD into a temporary directory (so nothing of this checkout's
``.venv`` or ``out/`` is reused), runs ``./scripts/demo.sh`` there with an empty pip cache
(every package is fetched as on a fresh machine, from the indexes this machine's pip is
configured with), then runs it again with nothing changed. It prints the wall time of each
run, the stage lines the demo printed, and checks that the picture was written. The goals
(issue #35): at most 60 s for the first run including the install, at most 10 s for a rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"first run": 60.0, "rerun": 10.0}


def run_demo(clone: Path, environment: dict[str, str]) -> tuple[float, list[str]]:
    """The demo's wall time and its stage lines (``== ...``)."""
    started = time.monotonic()
    done = subprocess.run(["./scripts/demo.sh"], cwd=clone, env=environment, text=True,
                          capture_output=True, timeout=900, check=False)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"demo.sh failed ({done.returncode}):\n"
                 f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    if not (clone / "out" / "simulation.png").is_file():
        sys.exit("demo.sh did not write out/simulation.png")
    return elapsed, [line for line in done.stdout.splitlines() if line.startswith("==")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the figures here too")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="first-mile-") as work:
        clone = Path(work) / "autoscaler"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)],  # noqa: S607
                       check=True, timeout=120)
        environment = {**os.environ, "PIP_CACHE_DIR": str(Path(work) / "pip-cache")}
        figures = {}
        for label, goal in GOALS.items():
            elapsed, stages = run_demo(clone, environment)
            figures[label] = round(elapsed, 1)
            print(f"{label:9}  {elapsed:5.1f} s  (goal: at most {goal:.0f} s)")
            for stage in stages:
                print(f"           {stage}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if options.json:
        options.json.write_text(json.dumps(figures) + "\n")


if __name__ == "__main__":
    main()
