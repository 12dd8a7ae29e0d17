"""What /metrics shows after real passes of the reconciler (its ports filled by the in-memory
doubles of tests/runtime): real scale writes and dry-run's would-be writes counted apart."""

from __future__ import annotations

import asyncio
import time

from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from tests.observability.exposition import exposition, value
from tests.runtime.doubles import Depths, Fleet, NoPods, depth, targets

BUSY = {"namespace": "shop", "kind": "Deployment", "name": "busy"}


async def passes(count: int, *, dry_run: bool) -> tuple[DaemonMetrics, Fleet]:
    """``count`` passes over ``busy``, whose queue wants 6 replicas of its 2."""
    cluster, telemetry = Fleet({}), DaemonMetrics()
    telemetry.set_dry_run(dry_run)
    reconciler = Reconciler(scales=cluster, pods=NoPods(), metrics=Depths({"busy": depth(60)}),
                            events=cluster, owners=cluster, telemetry=telemetry,
                            options=ReconcileOptions(dry_run=dry_run, record_events=False))
    fleet = targets("busy")
    async with asyncio.timeout(30):
        for _ in range(count):
            await reconciler.run_pass(fleet, deadline=time.monotonic() + 5)
    return telemetry, cluster


async def test_dry_run_counts_no_scale_event_and_one_would_be_per_change() -> None:
    """50 dry-run passes of one would-be 2 -> 4: no scale event, one would-be scale."""
    telemetry, cluster = await passes(50, dry_run=True)
    text = exposition(telemetry)
    assert cluster.log == []  # nothing was written
    assert value(text, "autoscaler_scale_events_total", **BUSY, direction="up") == 0
    assert value(text, "autoscaler_would_scale_events_total", **BUSY, direction="up") == 1
    assert value(text, "autoscaler_desired_replicas", **BUSY) == 4
    assert value(text, "autoscaler_reconciles_total", **BUSY, outcome="ok") == 50


async def test_a_landed_write_is_a_scale_event() -> None:
    """A pass that writes 2 -> 4 counts one real scale event and no would-be one."""
    telemetry, cluster = await passes(1, dry_run=False)
    text = exposition(telemetry)
    assert cluster.log == [("busy", "write 4")]
    assert value(text, "autoscaler_scale_events_total", **BUSY, direction="up") == 1
    assert value(text, "autoscaler_would_scale_events_total", **BUSY, direction="up") is None


async def test_a_pass_shows_bounds_tolerance_conditions_and_its_period() -> None:
    """After a pass: min/max, tolerance, the core's conditions and the pass's duration."""
    telemetry, _ = await passes(1, dry_run=False)
    text = exposition(telemetry)
    assert (value(text, "autoscaler_min_replicas", **BUSY),
            value(text, "autoscaler_max_replicas", **BUSY)) == (1, 10)
    assert value(text, "autoscaler_recommended_replicas", **BUSY) == 6
    assert value(text, "autoscaler_tolerance_ratio", **BUSY, direction="down") == 0.1
    assert value(text, "autoscaler_status_condition", **BUSY, condition="AbleToScale",
                 status="true") == 1
    assert value(text, "autoscaler_metric_value", **BUSY, metric="depth",
                 metric_type="External") == 30  # 60 over 2 replicas
    assert value(text, "autoscaler_pass_duration_seconds_count", period="15s") == 1
