"""bench/config_load.py at small N, so it cannot rot: it loads the ring's config in a child
and reports figures that are consistent (no figure is asserted: they are the bench's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench


@pytest.mark.timeout(120)
def test_smoke_run_reports_each_size(tmp_path: Path) -> None:
    rows, printed = run_bench("config_load.py", tmp_path / "figures.json", "--targets=200",
                              "--targets=400", timeout=110)
    assert [row["targets"] for row in rows] == [200, 400]
    for row in rows:
        assert row["importsMB"] > 50  # the daemon's imports were counted first
        assert row["peakOverImportsMB"] >= row["keptOverImportsMB"]
        assert row["configMiB"] > 0
    assert "| 400 |" in printed
