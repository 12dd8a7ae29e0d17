"""How a reconciler runs: the algorithm's settings, dry-run, concurrency, leadership, Events
and the store that makes scale writes durable. Replaced as a whole at a config reload."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from autoscaler.algorithm import AlgorithmSettings

Persist = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileOptions:
    algorithm: AlgorithmSettings = field(default_factory=AlgorithmSettings)
    dry_run: bool = False
    concurrency: int = 10
    may_write: Callable[[str], bool] = lambda key: True
    """``may_write(target_key)``, checked right before every write of that target: false once
    this instance may no longer write it (no longer the leader; later: no longer its owner)."""
    record_events: bool = True
    persist: Persist | None = None
    """Makes every target's history and intents durable; a pass calls it once before its
    scale writes and sends none of them if it fails (None: nothing is persisted)."""
    pods_per_read: int | None = None
    """A pass over more pods reads its metrics in parts (``observe.read_parts``), each part's
    answer gone before the next is read; None: in one read."""

