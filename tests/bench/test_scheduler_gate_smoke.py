"""bench/scheduler_gate.py at small N, so it cannot rot: asked about every configured
target, the gate hears of each at every wake; asked about the candidates, of none while the
member holds nothing and of at most its share when it holds one (no time is asserted: the
figures are the bench's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench


@pytest.mark.timeout(120)
def test_smoke_run_reports_the_asks_of_each_variant(tmp_path: Path) -> None:
    figures, printed = run_bench("scheduler_gate.py", tmp_path / "figures.json",
                                 "--targets=1000", "--members=5", "--seconds=0.5",
                                 timeout=110)
    assert figures["holds nothing, asks everyone"]["asksPerWake"] >= 1000
    assert figures["holds nothing, asks candidates"]["asksPerWake"] == 0
    assert 0 < figures["holds 1/5, asks candidates"]["asksPerWake"] <= 1000 / 5
    assert all(row["wakes"] > 10 for key, row in figures.items() if key != "targets")
    assert "CPU ms/wake" in printed
