"""Pausing a target, by config or by annotation on the target as KEDA users expect it.

A paused target is left alone (``autoscaler.dev/paused``, ``paused = true``) or held at a
count (``autoscaler.dev/paused-replicas``, ``pausedReplicas``); the config wins over the
annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

PAUSED_ANNOTATION = "autoscaler.dev/paused"
PAUSED_REPLICAS_ANNOTATION = "autoscaler.dev/paused-replicas"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """Leave the target alone (``replicas`` None) or hold it at ``replicas``; and why."""

    replicas: int | None
    source: str

    def write_to(self, current: int, *, shadow: bool) -> int | None:
        """The count to write to hold the target, or ``None``: nothing to write (left
        alone, already there, or in shadow mode, where the other autoscaler writes)."""
        if self.replicas is None or self.replicas == current or shadow:
            return None
        return self.replicas

    @property
    def reason(self) -> str:
        """The rescale reason of a hold."""
        return f"paused at {self.replicas} replicas ({self.source})"


def pause_of(target: TargetConfig, annotations: Mapping[str, str]) -> Pause | None:
    """The config's pause wins; else the target's annotations, as KEDA users expect them.

    An unreadable ``paused-replicas`` pauses without holding: leaving a workload alone is
    the safe reading of a pause the user asked for but mistyped.
    """
    if target.paused_replicas is not None:
        return Pause(replicas=target.paused_replicas, source="config pausedReplicas")
    if target.paused:
        return Pause(replicas=None, source="config paused")
    held = annotations.get(PAUSED_REPLICAS_ANNOTATION)
    if held is not None:
        try:
            replicas = int(held)
        except ValueError:
            replicas = -1
        if replicas >= 0:
            return Pause(replicas=replicas, source=f"annotation {PAUSED_REPLICAS_ANNOTATION}")
        return Pause(replicas=None, source=f"annotation {PAUSED_REPLICAS_ANNOTATION}={held!r} "
                     "is not a replica count: paused without holding")
    if annotations.get(PAUSED_ANNOTATION, "").strip().lower() in {"true", "1", "yes"}:
        return Pause(replicas=None, source=f"annotation {PAUSED_ANNOTATION}")
    return None
