"""Drift: a target's ``spec.replicas`` changed between passes without our write.

A GitOps tool re-applying a manifest or a person running ``kubectl scale`` changes the
replicas under us. Like upstream's HPA we do not fight it: we report the drift (the caller
emits the event, metric and status) and continue from the observed value.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Drift:
    expected: int
    """What we last wrote or observed."""
    observed: int

    @property
    def message(self) -> str:
        return (f"replicas changed from {self.expected} to {self.observed} without the "
                "autoscaler; continuing from the observed value")


class DriftTracker:
    """Remembers, per target, the replicas we last wrote or saw."""

    def __init__(self) -> None:
        self._expected: dict[Hashable, int] = {}

    def observe(self, key: Hashable, spec_replicas: int) -> Drift | None:
        """Compare a freshly read ``spec.replicas``; the observed value becomes the baseline."""
        expected = self._expected.get(key)
        self._expected[key] = spec_replicas
        if expected is None or expected == spec_replicas:
            return None
        return Drift(expected=expected, observed=spec_replicas)

    def wrote(self, key: Hashable, replicas: int) -> None:
        """Our own write succeeded: it is the new baseline, not a drift."""
        self._expected[key] = replicas

    def forget(self, key: Hashable) -> None:
        self._expected.pop(key, None)
