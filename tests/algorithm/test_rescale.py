"""Why a step is taken: the rule that moved the count, never one that did not."""

from __future__ import annotations

import pytest

from autoscaler.algorithm.decision_values import Decision, StepLimit, WindowHold
from autoscaler.algorithm.reasons import Reason
from autoscaler.algorithm.rescale import step_reason

RPS = "pods metric rps"
DOWN_HELD = WindowHold(reason=Reason.SCALE_DOWN_STABILIZED, window_seconds=300, held_at=8,
                       releases_at=None)
WINDOW = ("recent recommendations were higher than current one, applying the highest recent "
          "recommendation (8, scaleDown stabilization window 300s)")


def decision(*, current: int, proposal: int | None, reason: str = "",
             stabilized: int | None = None, hold: WindowHold | None = None,
             limit: StepLimit | None = None) -> Decision:
    return Decision(current_replicas=current, desired_replicas=current, proposal=proposal,
                    stabilized=stabilized, rescale_reason=reason, proposed_by=RPS,
                    hold=hold, limit=limit)


@pytest.mark.parametrize(("made", "desired", "said"), [
    (decision(current=2, proposal=6, reason=f"{RPS} above target"), 6, f"{RPS} above target"),
    (decision(current=6, proposal=3, reason="All metrics below target"), 3,
     "All metrics below target"),
    (decision(current=4, proposal=4, stabilized=8, hold=DOWN_HELD), 8, WINDOW),
    (decision(current=4, proposal=3, reason="All metrics below target", stabilized=8,
              hold=DOWN_HELD), 8, WINDOW),
    (decision(current=3, proposal=3, reason="queue is 0 for 10s (cooldownPeriod): scaling to "
              "zero"), 0, "queue is 0 for 10s (cooldownPeriod): scaling to zero"),
    (decision(current=12, proposal=None, reason="Current number of replicas above "
              "Spec.MaxReplicas"), 10, "Current number of replicas above Spec.MaxReplicas"),
    (decision(current=1, proposal=1, limit=StepLimit(reason=Reason.TOO_FEW_REPLICAS, limit=2)),
     2, "the desired replica count is less than the minimum replica count (2)"),
    (decision(current=4, proposal=4), 5, f"{RPS} gives 5"),
], ids=["above-target", "below-target", "window-held", "window-against-the-proposal",
        "to-zero", "above-max", "below-min", "anything-else"])
def test_the_reason_names_the_rule_that_moved_the_count(made: Decision, desired: int,
                                                        said: str) -> None:
    """Upstream's reason when its proposal asked for the step; else the window, the bound,
    or the recommendation that did."""
    assert step_reason(made, desired) == said
