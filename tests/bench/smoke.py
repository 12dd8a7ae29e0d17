"""Running a bench script as its smoke test does: in a child, writing its figures as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, out: Path, *args: str, timeout: float) -> tuple[Any, str]:
    """``bench/<script>`` with ``args`` and ``--json=out``: its figures and what it printed;
    the run must succeed (its output tail is the failure's message)."""
    finished = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args, f"--json={out}"],
        capture_output=True, text=True, timeout=timeout, check=False)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    return json.loads(out.read_text()), finished.stdout
