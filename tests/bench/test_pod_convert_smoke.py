"""bench/pod_convert.py at small N, so it cannot rot (no time is asserted: the figures are
the bench's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench


@pytest.mark.timeout(60)
def test_smoke_run_converts_every_pod(tmp_path: Path) -> None:
    figures, printed = run_bench("pod_convert.py", tmp_path / "figures.json",
                                 "--pods=200", "--rounds=1", timeout=50)
    assert figures["pods"] == 200
    assert figures["usPerPod"] > 0
    assert "200 pods converted" in printed
