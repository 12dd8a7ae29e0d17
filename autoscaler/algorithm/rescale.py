"""Why a step is taken: the rule that moved the count, in upstream's words where it has them.

Upstream works its rescale reason out from the metrics' proposal alone ("<metric> above
target", "All metrics below target") and leaves it empty when the proposal keeps the count.
The step may still come from another rule: a count lowered by hand while the scale-down
stabilization window holds a higher recommendation goes back up, a bound lifts a count below
``minReplicas``. ``step_reason`` names that rule instead, so no Event or log line of a step
says what did not cause it (issue 40: "fallback after 0 passes without valid metrics" on an
ordinary scale-up).
"""

from __future__ import annotations

from autoscaler.algorithm.decision import LIMIT_MESSAGES, STABILIZATION_MESSAGES
from autoscaler.algorithm.decision_values import Decision
from autoscaler.algorithm.reasons import Reason

ALL_BELOW = "All metrics below target"
_WINDOWS = {Reason.SCALE_DOWN_STABILIZED: "scaleDown", Reason.SCALE_UP_STABILIZED: "scaleUp"}


def step_reason(decision: Decision, desired: int) -> str:
    """Why ``decision`` takes the count from its current value to ``desired`` (its own
    desired count: a fallback or a pause says why on its own)."""
    current, reason = decision.current_replicas, decision.rescale_reason
    if reason and not _contradicts(decision, reason, up=desired > current):
        return reason
    hold = decision.hold
    if hold is not None and hold.reason in _WINDOWS and hold.held_at == decision.stabilized:
        return (f"{STABILIZATION_MESSAGES[hold.reason]} ({hold.held_at}, "
                f"{_WINDOWS[hold.reason]} stabilization window {hold.window_seconds:g}s)")
    limit = decision.limit
    if limit is not None and limit.reason in (Reason.TOO_FEW_REPLICAS, Reason.TOO_MANY_REPLICAS):
        return f"{LIMIT_MESSAGES[limit.reason]} ({limit.limit})"
    return f"{decision.proposed_by or 'the recommendation'} gives {desired}"


def _contradicts(decision: Decision, reason: str, *, up: bool) -> bool:
    """Upstream's metric reason, said of a step its proposal did not ask for."""
    proposal, current = decision.proposal, decision.current_replicas
    if decision.proposed_by and reason.startswith(f"{decision.proposed_by} above target"):
        return not (up and proposal is not None and proposal > current)
    if reason.startswith(ALL_BELOW):
        return up or proposal is None or proposal >= current
    return False
