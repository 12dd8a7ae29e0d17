"""bench/answer_decode.py at small N, so it cannot rot (no time or size is asserted: the
figures are the bench's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench


@pytest.mark.timeout(60)
def test_smoke_run_reads_the_answer_both_ways(tmp_path: Path) -> None:
    figures, printed = run_bench("answer_decode.py", tmp_path / "figures.json",
                                 "--series=500", "--rounds=1", timeout=50)
    assert figures["series"] == 500
    assert figures["whole"]["peakMB"] > 0
    assert figures["streamed"]["peakMB"] > 0
    assert "500 series" in printed
