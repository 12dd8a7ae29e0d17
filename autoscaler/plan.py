"""One pass against the live Prometheus and cluster that changes nothing (``autoscaler plan``).

It runs the daemon's own reconcile pass in dry-run with events off and returns each target's
state; ``document`` turns them into ``/status`` bodies whose conditions say what the pass
would do. With a state file it reads the daemon's history (read-only), so stabilization
windows are judged as the daemon would; a predicted metric's history is read from
Prometheus as the daemon reads it at start. The command is ``autoscaler.commands.plan``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from autoscaler.adapters.local_state import FileStateStore
from autoscaler.algorithm.model import DEFAULT_SYNC_PERIOD
from autoscaler.config import Config, TargetConfig
from autoscaler.errors import AutoscalerError, TransientError
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.runtime.backfill import HistoryBackfill
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.status import TargetState, target_status
from autoscaler.wiring import Components, connect, wait_synced, watch_namespaces

log = structlog.get_logger("autoscaler.plan")

SYNC_TIMEOUT = 30.0
"""Seconds the API server gets to list what the watch caches need."""
HISTORY_WAIT = 10.0
"""Seconds the forecast history queries get (while the caches fill); a plan without it
shows the model learning."""


async def plan(config: Config, *, targets: Sequence[TargetConfig]) -> dict[str, TargetState]:
    async with connect(config) as components:
        reconciler = components.reconciler(
            options=ReconcileOptions(algorithm=config.daemon.algorithm, dry_run=True,
                                     concurrency=config.daemon.concurrency,
                                     may_write=lambda key: False, record_events=False),
            telemetry=DaemonMetrics())
        await _load_history(config, reconciler)
        # Forecast history from Prometheus, as the daemon reads it at start: a prediction
        # with history there is shown usable rather than learning.
        backfill = HistoryBackfill(components.history, reconciler.state)
        backfill.want(targets)
        history = asyncio.ensure_future(backfill.settle(HISTORY_WAIT))
        try:
            await _sync(components, {t.namespace for t in targets})
            await history
        finally:
            history.cancel()
        period = min((t.sync_period for t in targets), default=DEFAULT_SYNC_PERIOD)
        await reconciler.run_pass(targets, deadline=time.monotonic() + period)
        return {t.key: reconciler.state(t.key) for t in targets}


async def _sync(components: Components, namespaces: set[str]) -> None:
    await watch_namespaces(components, namespaces)
    try:
        await asyncio.wait_for(wait_synced(components, namespaces), timeout=SYNC_TIMEOUT)
    except TimeoutError:
        raise TransientError(
            f"the API server did not list the pods and workloads of {len(namespaces)} "
            f"namespace{'s' if len(namespaces) != 1 else ''} within {SYNC_TIMEOUT:g}s; "
            "check that it answers (kubectl get pods) and that the account may list "
            "them") from None


async def _load_history(config: Config, reconciler: Reconciler) -> None:
    """The daemon's saved history, if it keeps one in a file (read, never moved or written)."""
    if config.daemon.state_file is None:
        return
    try:
        snapshot = await FileStateStore(config.daemon.state_file, read_only=True).load()
    except AutoscalerError as error:
        log.warning("planning without the saved history", error=str(error))
        return
    for key, saved in (snapshot.targets if snapshot is not None else {}).items():
        state = reconciler.state(key)
        state.history, state.forecasts = saved.history, dict(saved.forecasts)


UNEVALUATED = frozenset({"error", "invalid_metrics", "pending"})
"""Outcomes of a target whose desired count could not be computed: ``plan`` exits 1."""


def document(config: Config, states: Mapping[str, TargetState]) -> dict[str, Any]:
    """What ``plan`` shows: each target's ``/status`` body as if a pass had run now, with
    the conditions saying what it would do, and the config's bounds where no decision
    could carry them."""
    bodies = []
    for target in config.targets:
        state = states.get(target.key)
        if state is None:
            continue
        bodies.append(target_status(state, target, planned=True))
    return {"targets": bodies}


def unevaluated(states: Mapping[str, TargetState]) -> list[str]:
    """The keys of the targets whose desired count could not be computed."""
    return [key for key, state in states.items() if state.last_outcome in UNEVALUATED]
