"""bench/share_query.py at small N, so it cannot rot: a real Prometheus answers the
fleet-wide query and its cuts; each cut holds its share of the series (no time is
asserted: the figures are the bench's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench


@pytest.mark.timeout(180)
def test_smoke_run_reports_each_variant(tmp_path: Path) -> None:
    figures, printed = run_bench("share_query.py", tmp_path / "figures.json", "--smoke",
                                 timeout=170)
    # 60 targets x 5 pods over 50 namespaces: 10 of them hold 2 targets, 40 one.
    assert figures["whole"]["series"] == 300
    assert figures["cut to 1/3"]["series"] == 17 * 5 + 4 * 5  # ns 0, 3, ..., 48; 0-9 hold two
    assert figures["cut to 1/6"]["series"] == 9 * 5 + 2 * 5
    assert figures["wrapped 1/6"]["series"] == figures["cut to 1/6"]["series"]
    assert figures["cut to 1/6"]["bytes"] < figures["cut to 1/3"]["bytes"] < figures["whole"]["bytes"]
    assert "cut to 1/6" in printed
