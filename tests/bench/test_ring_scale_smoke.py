"""bench/ring_scale.py at small N, so it cannot rot: it runs end to end and its counts hold.

No timing is asserted (the figures are the bench's to print); what is checked are the
properties it exists to show: each replica acts for a share and together they act for every
target once, each asks at most 2 queries a pass and decides every target every pass, a
joining replica takes a share and a leaving one hands all of its targets over, moving no
more than a fair share and a bit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# The ring's bounded load: no member holds more fair shares than this.
from autoscaler.runtime.ring import OVERLOAD as BOUND  # noqa: E402
from bench.ring_scale import Scrape, parse_metrics  # noqa: E402
from tests.bench.smoke import run_bench  # noqa: E402

TARGETS, REPLICAS = 300, 3


@pytest.mark.timeout(300)
def test_smoke_run_counts(tmp_path: Path) -> None:
    result, printed = run_bench("ring_scale.py", tmp_path / "figures.json", "--smoke",
                                f"--workdir={tmp_path / 'run'}", timeout=280)
    assert (tmp_path / "run" / "r0.log").exists()  # the logs kept where it was told
    rows = result["steady"]
    assert [r["replica"] for r in rows] == [f"r{i}" for i in range(REPLICAS)]
    assert sum(r["targets"] for r in rows) == TARGETS
    for row in rows:
        assert 0 < row["targets"] <= BOUND * TARGETS / REPLICAS + 10, row  # 10: a namespace
        assert row["queries_per_pass"] <= 2, row
        assert row["decided_every_pass"], row
        assert row["passes"] >= 2
        assert row["peak_rss_mb"] > 0
        assert row["cpu_s_per_pass"] > 0
    joined, left = result["join"], result["leave"]
    assert 0 < joined["held_after"] <= joined["targets_moved"], joined
    assert joined["targets_moved"] <= BOUND * TARGETS / (REPLICAS + 1) + 10, joined
    assert joined["handover_gap_s"] is not None
    assert left["exit_code"] == 0
    assert 0 < left["held_before"] <= left["targets_moved"], left  # every one of its targets
    assert left["targets_moved"] <= BOUND * TARGETS / REPLICAS + 10, left
    assert result["single"]["targets"] == TARGETS // REPLICAS
    assert result["single"]["decided_every_pass"]
    assert "| replica | targets | peak RSS (MB) |" in printed


METRICS = """\
autoscaler_pass_duration_seconds_count{period="15s"} 7.0
autoscaler_prometheus_query_duration_seconds_count{server="default"} 14.0
autoscaler_ring_targets{ring="autoscaler"} 2.0
autoscaler_ring_buckets{ring="autoscaler",state="claiming"} 0.0
autoscaler_ring_buckets{ring="autoscaler",state="active"} 1.0
autoscaler_ring_unowned_buckets{ring="autoscaler"} 0.0
autoscaler_last_reconcile_timestamp_seconds{namespace="a",kind="Deployment",name="x"} 100.5
autoscaler_last_reconcile_timestamp_seconds{namespace="a",kind="Deployment",name="y"} 101.0
autoscaler_reconciles_total{namespace="a",kind="Deployment",name="x",outcome="ok"} 7
autoscaler_reconciles_total{namespace="a",kind="Deployment",name="x",outcome="error"} 1
autoscaler_reconciles_total{namespace="a",kind="Deployment",name="y",outcome="ok"} 6
"""


def test_a_scrape_reads_passes_queries_and_each_held_target() -> None:
    scrape = parse_metrics(METRICS)
    assert (scrape.passes, scrape.queries, scrape.ring_targets) == (7, 14, 2)
    assert scrape.buckets == {"claiming": 0, "active": 1}
    assert scrape.ok == {"a/Deployment/x": 7, "a/Deployment/y": 6}
    assert set(scrape.last) == {"a/Deployment/x", "a/Deployment/y"}


@pytest.mark.parametrize(("last", "quiet"), [
    ({"a": 100.0, "b": 101.0}, True),  # one pass: its targets within a second
    ({"a": 100.0, "b": 110.0}, False),  # a pass in flight: b is this pass's, a the last one's
    ({"a": 105.0, "b": 105.5}, False),  # just ended: its count may not be in the scrape
    ({}, False),  # holds nothing yet
], ids=["one-pass", "in-flight", "just-ended", "empty"])
def test_quiet_means_no_pass_in_flight(last: dict[str, float], quiet: bool) -> None:
    assert Scrape(last=last, at=106.0).quiet(15.0) is quiet
