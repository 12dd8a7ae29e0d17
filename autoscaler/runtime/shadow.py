"""Shadow mode: decide as usual, write nothing, and compare with the autoscaler that scales
the target (an HPA, or the HPA KEDA runs for a ScaledObject).

The comparison is on ``/status`` and ``/metrics`` every pass; a disagreement is an Event with
both numbers and our reason, once per change of the pair.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import Decision, EventReason
from autoscaler.algorithm.fallback import fallback_reason
from autoscaler.algorithm.rescale import step_reason
from autoscaler.runtime.ports import OwnersPort
from autoscaler.runtime.reporting import Reporter
from autoscaler.runtime.status import ShadowReport, TargetState

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.reconcile")

NO_OWNER = "shadow mode: no HPA reports a desired count for this target"


def compare_in_shadow(state: TargetState, target: TargetConfig, decision: Decision,
                      desired: int, *, owners: OwnersPort, report: Reporter) -> None:
    """Compare our ``desired`` with the count the owning HPA reports, and finish the pass."""
    reported = owners.reported_desired(target.namespace, target.scale_target_ref)
    owner, theirs = (reported[0] if reported else (None, None))
    previous = state.shadow
    state.shadow = ShadowReport(ours=desired, theirs=theirs, owner=owner)
    if theirs is not None and theirs != desired and previous != state.shadow:
        why = ("no change" if desired == decision.current_replicas
               else fallback_reason(state.consecutive_invalid) if state.fallback_active
               else step_reason(decision, desired))
        message = (f"shadow: the autoscaler would scale to {desired}, {owner} wants {theirs} "
                   f"(current {decision.current_replicas}; ours: {why})")
        log.info("shadow disagreement", target=target.key, ours=desired, theirs=theirs,
                 owner=owner)
        report.spawn(target, warning=False, reason=EventReason.SHADOW_DISAGREEMENT,
                     message=message)
    report.finish(state, target, "shadow", error=None if theirs is not None else NO_OWNER)
