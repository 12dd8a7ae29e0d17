"""The opt-in fallback (KEDA's ``fallback``): after a number of passes in a row with every
metric invalid, go to a configured replica count.

Upstream's HPA has none: with every metric invalid it holds the current count (never a
scale-down on missing data). The fallback is the user's explicit choice of a count for
that case; it scales down only where ``allowScaleDown`` says so.
"""

from __future__ import annotations

from typing import Protocol

from autoscaler.algorithm.decision_values import Decision


class FallbackRule(Protocol):
    """A target's ``fallback`` (``autoscaler.config.Fallback``)."""

    @property
    def failure_threshold(self) -> int: ...
    @property
    def replicas(self) -> int: ...
    @property
    def allow_scale_down(self) -> bool: ...


def fallback_replicas(decision: Decision, rule: FallbackRule | None, *,
                      consecutive_invalid: int) -> int | None:
    """The count the fallback sets after ``decision``, or ``None`` when it does not apply:
    no rule, a valid metric, or fewer than ``failure_threshold`` such passes in a row
    (``consecutive_invalid`` counts this one)."""
    if rule is None or not decision.all_metrics_invalid:
        return None
    if consecutive_invalid < rule.failure_threshold:
        return None
    if rule.allow_scale_down:
        return rule.replicas
    return max(rule.replicas, decision.current_replicas)


def fallback_reason(consecutive_invalid: int) -> str:
    """Why a fallback step is taken (only when ``fallback_replicas`` set the count)."""
    return f"fallback after {consecutive_invalid} passes without valid metrics"
