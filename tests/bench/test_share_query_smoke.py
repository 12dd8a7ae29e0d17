"""bench/share_query.py at small N, so it cannot rot: a real Prometheus answers the
fleet-wide query and its cuts; each cut holds its share of the series (no time is
asserted: the figures are the bench's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(180)
def test_smoke_run_reports_each_variant(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    finished = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "share_query.py"), "--smoke", f"--json={out}"],
        capture_output=True, text=True, timeout=170, check=False)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-4000:]
    figures = json.loads(out.read_text())
    # 60 targets x 5 pods over 50 namespaces: 10 of them hold 2 targets, 40 one.
    assert figures["whole"]["series"] == 300
    assert figures["cut to 1/3"]["series"] == 17 * 5 + 4 * 5  # ns 0, 3, ..., 48; 0-9 hold two
    assert figures["cut to 1/6"]["series"] == 9 * 5 + 2 * 5
    assert figures["wrapped 1/6"]["series"] == figures["cut to 1/6"]["series"]
    assert figures["cut to 1/6"]["bytes"] < figures["cut to 1/3"]["bytes"] < figures["whole"]["bytes"]
    assert "cut to 1/6" in finished.stdout
