"""bench/config_load.py at small N, so it cannot rot: it loads the ring's config in a child
and reports figures that are consistent (no figure is asserted: they are the bench's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_smoke_run_reports_each_size(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    finished = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "config_load.py"), "--targets=200",
         "--targets=400", f"--json={out}"],
        capture_output=True, text=True, timeout=110, check=False)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    rows = json.loads(out.read_text())
    assert [row["targets"] for row in rows] == [200, 400]
    for row in rows:
        assert row["importsMB"] > 50  # the daemon's imports were counted first
        assert row["peakOverImportsMB"] >= row["keptOverImportsMB"]
        assert row["configMiB"] > 0
    assert "| 400 |" in finished.stdout
