"""The benchmark at small N, so it cannot rot: it runs end to end and its counts hold.

No timing is asserted (figures are for ``bench/daemon_scale.py`` to print); what is checked
are the properties the benchmark exists to show: queries per pass do not grow with the
number of targets that share them, a pass makes no API request at all (no pod LIST, no GET
/scale, no watch begun late), every target is decided, and the per-target baseline really issues one
query per target and metric.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench


@pytest.mark.timeout(600)
def test_smoke_run_counts(tmp_path: Path) -> None:
    rows, printed = run_bench("daemon_scale.py", tmp_path / "figures.json", "--smoke",
                              f"--workdir={tmp_path / 'work'}", timeout=540)
    assert [row["targets"] for row in rows] == [10, 20]
    for row in rows:
        assert row["queries"] == [2], row  # one built-in cpu query + one shared Pods query
        assert row["baseline_queries"] == 2 * row["targets"]
        assert row["api_per_pass"] == {}, row
        # The first pass too: every watch began before it (a late one counted in CI once).
        assert row["api_first_pass"] == {}, row
        assert row["pod_lists_steady"] == 0
        assert row["decided"] == row["targets"]
        assert row["floor_s"] > 0
        assert row["pass_s"] > 0
        assert row["peak_rss_mb"] > 0
        scrape = row["scrape"]  # every target's series, over HTTP as Prometheus asks
        assert scrape["lines"] > 20 * row["targets"]
        assert 0 < scrape["http_bytes"] < scrape["bytes"]  # gzipped
    assert "| targets | pass (s) |" in printed


def test_across_runs_reports_the_spread_of_run_medians() -> None:
    """--runs K: one line per N measured more than once, ratios sorted, runs within 3x."""
    from bench.daemon_scale import across_runs

    def row(n: int, pass_s: float, x_floor: float) -> dict[str, float]:
        return {"targets": n, "pass_s": pass_s, "x_floor": x_floor}

    rows = [row(1000, 0.14, 3.2), row(1000, 0.12, 2.7), row(1000, 0.13, 3.0), row(100, 0.02, 2.5)]
    lines = across_runs(rows).splitlines()
    assert len(lines) == 3  # head, rule, and 1,000 only: 100 was measured once
    assert lines[2] == "| 1,000 | 3 | 0.120, 0.130, 0.140 | 2.70, 3.00, 3.20 | 3.00 | 2 of 3 |"
    assert across_runs([row(100, 0.02, 2.5)]) == ""
