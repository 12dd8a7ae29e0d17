"""A target's conditions between passes: since when it has been unable to scale, and back."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import Condition, ConditionType, Reason
from autoscaler.runtime.conditions import (
    StatusCondition,
    merge_conditions,
    rescaled,
    stamp_generation,
    unable_to_scale,
)

ABLE, LIMITED = ConditionType.ABLE_TO_SCALE, ConditionType.SCALING_LIMITED


def condition(type_: ConditionType, status: bool, at: float) -> StatusCondition:
    return StatusCondition(type=type_, status=status, reason="R", message="m",
                           last_transition_time=at)


@pytest.mark.parametrize(
    ("existing", "since"),
    [([], 50.0), ([condition(ABLE, True, 10.0)], 50.0), ([condition(ABLE, False, 10.0)], 10.0)],
    ids=["first", "was-able", "still-failing"],
)
def test_unable_to_scale_counts_from_the_first_failure(existing: list[StatusCondition],
                                                       since: float) -> None:
    """AbleToScale False goes first, other conditions stay; its time is the first failure's
    while it keeps failing."""
    merged = unable_to_scale([*existing, condition(LIMITED, True, 5.0)], "FailedGetScale",
                             "no scale", 50.0)
    assert [(c.type, c.status, c.last_transition_time) for c in merged] == [
        (ABLE, False, since), (LIMITED, True, 5.0)]


@pytest.mark.parametrize(("status", "since"), [(True, 10.0), (False, 50.0)],
                         ids=["was-able", "was-failing"])
def test_rescaled_is_able_to_scale_again(status: bool, since: float) -> None:
    """A landed write: AbleToScale True with SucceededRescale in its place, a transition
    only if it was False."""
    [able, limited] = rescaled([condition(ABLE, status, 10.0), condition(LIMITED, True, 5.0)],
                               4, 50.0)
    assert (able.status, able.reason, able.last_transition_time) == (
        True, Reason.SUCCEEDED_RESCALE, since)
    assert able.message == "the autoscaler was able to update the target scale to 4"
    assert limited.last_transition_time == 5.0


def test_conditions_carry_the_generation_of_the_pass_that_set_them() -> None:
    """Upstream stamps each condition it sets with observedGeneration (kubernetes#138653).
    A pass on generation B sets AbleToScale (unchanged) and ScalingLimited (changed): both
    say B, AbleToScale keeps its transition time; ScaledToZero, set on A by a rescale and
    not set since, still says A."""
    zero = ConditionType.SCALED_TO_ZERO
    first = merge_conditions([], (
        Condition(type=ABLE, status=True, reason="ReadyForNewScale", message="m"),
        Condition(type=zero, status=True, reason="ScaledToZero", message="m")), 10.0)
    stamp_generation(first, "aaaaaaaaaaaa")
    second = merge_conditions(first, (
        Condition(type=ABLE, status=True, reason="ReadyForNewScale", message="m"),
        Condition(type=LIMITED, status=False, reason="DesiredWithinRange", message="m")), 50.0)
    assert [c.observed_generation for c in second] == [None, "aaaaaaaaaaaa", None]
    stamp_generation(second, "bbbbbbbbbbbb")
    assert [(c.type, c.observed_generation, c.last_transition_time) for c in second] == [
        (ABLE, "bbbbbbbbbbbb", 10.0), (zero, "aaaaaaaaaaaa", 10.0),
        (LIMITED, "bbbbbbbbbbbb", 50.0)]


def test_targets_with_the_same_message_keep_one_copy_of_it() -> None:
    """A message many targets carry (each decision formats its own) is kept once."""
    kept = [merge_conditions([], (Condition(
        type=ConditionType.SCALING_ACTIVE, status=True, reason=Reason.VALID_METRIC_FOUND,
        message="".join(["from cpu resource utilization ", "(percentage of request)"])),),
        now=1.0)[0].message for _ in range(2)]
    assert kept[0] == kept[1]
    assert kept[0] is kept[1]
