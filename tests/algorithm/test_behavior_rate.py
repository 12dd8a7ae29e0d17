"""Rate limits with behavior, ported from upstream's horizontal_test.go.

Tables: TestScalingWithRules (``convertDesiredReplicasWithBehaviorRate``),
TestCalculateScaleUpLimitWithScalingRules and TestCalculateScaleDownLimitWithBehaviors.
"""

from __future__ import annotations

from typing import Any

import pytest

from autoscaler.algorithm import (
    Behavior,
    History,
    PolicyType,
    Reason,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
    SelectPolicy,
    resolve_behavior,
)
from autoscaler.algorithm.behavior import (
    convert_with_behavior_rate,
    convert_with_rules,
    rate_limited,
    scale_down_limit,
    scale_up_limit,
)
from tests.algorithm.builders import NOW, TESTING, events_uniform, scaling_rules

E159 = events_uniform([1, 5, 9], 120)
E8129 = events_uniform([8, 12, 9, 11], 120)


def row(  # noqa: PLR0917 - one table row, in upstream's field order
    name: str,
    current: int,
    desired: int,
    min_max: tuple[int, int],
    expected: int,
    reason: str,
    *,
    up: ScalingRules | None = None,
    down: ScalingRules | None = None,
    up_events: tuple[ScaleEvent, ...] = (),
    down_events: tuple[ScaleEvent, ...] = (),
) -> Any:
    return pytest.param(
        current, desired, min_max, Behavior(scale_up=up, scale_down=down),
        History(scale_up_events=up_events, scale_down_events=down_events), expected,
        Reason(reason), id=name,
    )


# upstream: TestScalingWithRules (convertDesiredReplicasWithBehaviorRate)
SCALING_WITH_RULES = [
    row("within-range", 5, 7, (3, 8), 7, "DesiredWithinRange"),
    row("below-min", 3, 1, (2, 8), 2, "TooFewReplicas"),
    row("within-range-min-zero", 1, 0, (0, 10), 0, "DesiredWithinRange"),
    row("max-is-the-limit", 20, 1000, (1, 10), 10, "TooManyReplicas"),
    row("desired-above-max", 100, 1000, (100, 150), 150, "TooManyReplicas"),
    row("scale-up-limit-user-policy", 3, 1000, (1, 2000), 4, "ScaleUpLimit",
        up=scaling_rules(0, 0, 1, 60, 0)),
    # upstream skips this row (testThis); its expectation holds here
    row("scale-down-limit-user-policy", 1000, 3, (3, 2000), 980, "ScaleDownLimit",
        down=scaling_rules(20, 60, 0, 0, 0)),
    row("up-default-behavior", 10, 50, (1, 1000), 20, "ScaleUpLimit"),
    row("up-pods-policy-larger", 10, 500, (1, 1000), 110, "ScaleUpLimit",
        up=scaling_rules(100, 60, 100, 60, 0)),
    row("up-percent-policy-larger", 10, 500, (1, 1000), 20, "ScaleUpLimit",
        up=scaling_rules(2, 60, 100, 60, 0)),
    row("up-large-pod-policy", 10, 50, (1, 1000), 50, "DesiredWithinRange",
        up=scaling_rules(100, 60, 0, 0, 0)),
    row("up-large-percent-policy", 10, 50, (1, 1000), 50, "DesiredWithinRange",
        up=scaling_rules(10000, 60, 0, 0, 0)),
    row("up-pod-policy-limit", 10, 50, (1, 1000), 40, "ScaleUpLimit",
        up=scaling_rules(30, 60, 0, 0, 0)),
    row("up-percent-policy-limit", 10, 50, (1, 1000), 30, "ScaleUpLimit",
        up=scaling_rules(0, 0, 200, 60, 0)),
    row("down-percent-policy-larger", 100, 2, (1, 1000), 80, "ScaleDownLimit",
        down=scaling_rules(20, 60, 1, 60, 300)),
    row("down-pod-policy-larger", 100, 2, (1, 1000), 98, "ScaleDownLimit",
        down=scaling_rules(2, 60, 1, 60, 300)),
    row("down-min-nil-large-pod-policy", 10, 0, (1, 1000), 1, "TooFewReplicas",
        down=scaling_rules(100, 60, 0, 0, 300)),
    row("down-min-large-pod-policy", 10, 0, (1, 1000), 1, "TooFewReplicas",
        down=scaling_rules(100, 60, 0, 0, 300)),
    row("down-min-large-percent-policy", 10, 2, (5, 1000), 5, "TooFewReplicas",
        down=scaling_rules(0, 0, 100, 60, 300)),
    row("down-pod-policy-limit", 10, 2, (1, 1000), 5, "ScaleDownLimit",
        down=scaling_rules(5, 60, 0, 0, 300)),
    row("down-percent-policy-limit", 10, 5, (1, 1000), 5, "DesiredWithinRange",
        down=scaling_rules(0, 0, 50, 60, 300)),
    row("up-max-large-pod-policy-events", 100, 500, (1, 200), 200, "TooManyReplicas",
        up=scaling_rules(300, 60, 0, 0, 0), up_events=E159),
    row("up-max-large-percent-policy-events", 100, 500, (1, 200), 200, "TooManyReplicas",
        up=scaling_rules(0, 0, 10000, 60, 0), up_events=E159),
    row("up-current-is-limit-after-many-events", 100, 500, (1, 1000), 100, "ScaleUpLimit",
        up=scaling_rules(5, 120, 0, 0, 0), up_events=E159),
    row("up-pod-policy-previous-events", 100, 500, (1, 1000), 235, "ScaleUpLimit",
        up=scaling_rules(150, 120, 0, 0, 0), up_events=E159),
    row("up-percent-policy-previous-events", 100, 500, (1, 1000), 255, "ScaleUpLimit",
        up=scaling_rules(0, 0, 200, 120, 0), up_events=E159),
    row("up-percent-policy-up-and-down-events", 6, 24, (1, 1000), 16, "ScaleUpLimit",
        up=scaling_rules(0, 0, 300, 300, 0), up_events=events_uniform([4], 120),
        down_events=events_uniform([2], 120)),
    row("down-default-policy-previous-events", 10, 5, (1, 1000), 5, "DesiredWithinRange",
        down_events=E159),
    row("down-min-nil-large-pod-policy-events", 100, 0, (1, 1000), 1, "TooFewReplicas",
        down=scaling_rules(115, 120, 0, 0, 300), down_events=E159),
    row("down-min-large-pod-policy-events", 100, 0, (5, 1000), 5, "TooFewReplicas",
        down=scaling_rules(130, 120, 0, 0, 300), down_events=E159),
    row("down-min-large-percent-policy-events", 100, 2, (5, 1000), 5, "TooFewReplicas",
        down=scaling_rules(0, 0, 100, 120, 300), down_events=E159),
    row("down-pod-policy-limit-events", 100, 2, (1, 1000), 100, "ScaleDownLimit",
        down=scaling_rules(5, 120, 0, 0, 300), down_events=E159),
    row("down-percent-policy-limit-events", 100, 0, (1, 1000), 56, "ScaleDownLimit",
        down=scaling_rules(0, 0, 50, 120, 300), down_events=events_uniform([2, 4, 6], 120)),
    row("down-percent-policy-up-and-down-events", 10, 1, (1, 1000), 6, "ScaleDownLimit",
        down=scaling_rules(0, 0, 50, 180, 0), up_events=events_uniform([2], 120),
        down_events=events_uniform([4], 120)),
    row("down-previous-events-prevent-scale-down", 100, 0, (1, 1000), 100, "ScaleDownLimit",
        down=scaling_rules(0, 0, 10, 120, 300), down_events=events_uniform([10, 10, 10], 120)),
    row("down-previous-events-still-allow", 10, 5, (1, 1000), 5, "DesiredWithinRange",
        down=scaling_rules(0, 0, 1000, 120, 300), down_events=events_uniform([10, 10, 10], 120)),
    row("up-outdated-one-policy", 100, 200, (1, 1000), 200, "DesiredWithinRange",
        up=scaling_rules(1000, 60, 0, 0, 0), up_events=E8129),
    row("up-not-outdated-two-policies", 100, 200, (1, 1000), 200, "DesiredWithinRange",
        up=scaling_rules(1000, 120, 100, 60, 0), up_events=E8129),
    row("up-outdated-two-policies", 100, 200, (1, 1000), 200, "DesiredWithinRange",
        up=scaling_rules(1000, 30, 100, 60, 0), up_events=E8129),
    row("down-outdated-one-policy", 100, 5, (1, 1000), 5, "DesiredWithinRange",
        down=scaling_rules(1000, 60, 0, 0, 300), down_events=E8129),
    row("down-not-outdated-two-policies", 100, 5, (1, 1000), 5, "DesiredWithinRange",
        down=scaling_rules(1000, 120, 100, 60, 300), down_events=E8129),
    row("down-outdated-two-policies", 100, 5, (1, 1000), 5, "DesiredWithinRange",
        down=scaling_rules(1000, 30, 100, 60, 300), down_events=E8129),
]


@pytest.mark.parametrize(
    ("current", "desired", "min_max", "behavior", "history", "expected", "reason"),
    SCALING_WITH_RULES,
)
def test_scaling_with_rules(  # noqa: PLR0917 - one table row
    current: int, desired: int, min_max: tuple[int, int], behavior: Behavior, history: History,
    expected: int, reason: Reason,
) -> None:
    """Policies, their periods' past events and min/max limit a change as upstream's do."""
    got = convert_with_behavior_rate(
        history, current, desired, min_max[0], min_max[1], resolve_behavior(behavior, TESTING), NOW
    )
    assert got == (expected, reason)


@pytest.mark.parametrize(
    ("current", "desired", "min_max", "behavior", "history", "expected", "reason"),
    SCALING_WITH_RULES)
def test_rate_limited_is_the_normalizations_limit(  # noqa: PLR0917 - one table row
    current: int, desired: int, min_max: tuple[int, int], behavior: Behavior, history: History,
    expected: int, reason: Reason,
) -> None:
    """``rate_limited`` (whether a step decided earlier is allowed now) applies the same
    limits as a decision: upstream's table with a behavior, its default rules without."""
    resolved = resolve_behavior(behavior, TESTING)
    assert rate_limited(history, current, desired, *min_max, resolved, NOW) == expected
    without = convert_with_rules(current, desired, *min_max)[0]
    assert rate_limited(history, current, desired, *min_max, None, NOW) == without


def test_rate_limited_without_behavior_is_upstreams_default_rule() -> None:
    assert rate_limited(History(), 2, 10, 1, 20, None, NOW) == 4  # max(2 x current, 4)
    assert rate_limited(History(), 5, 2, 3, 20, None, NOW) == 3  # minReplicas


TWO_MIN_POLICIES = ScalingRules(
    stabilization_window_seconds=300, select_policy=SelectPolicy.MIN,
    policies=(
        ScalingPolicy(type=PolicyType.PODS, value=2, period_seconds=60),
        ScalingPolicy(type=PolicyType.PERCENT, value=50, period_seconds=60),
    ),
)


def test_scale_up_limit_min_select_policy() -> None:
    """TestCalculateScaleUpLimitWithScalingRules: Min picks the smaller increase (1 -> 2)."""
    rules = resolve_behavior(Behavior(scale_up=TWO_MIN_POLICIES), TESTING).scale_up
    assert scale_up_limit(1, History(), rules, NOW) == 2


def test_scale_down_limit_min_select_policy() -> None:
    """TestCalculateScaleDownLimitWithBehaviors: Min picks the smaller decrease (5 -> 3)."""
    rules = resolve_behavior(Behavior(scale_down=TWO_MIN_POLICIES), TESTING).scale_down
    assert scale_down_limit(5, History(), rules, NOW) == 3


@pytest.mark.parametrize(
    ("current", "desired", "expected"),
    [pytest.param(5, 9, 5, id="up"), pytest.param(5, 1, 5, id="down")],
)
def test_disabled_select_policy_holds(current: int, desired: int, expected: int) -> None:
    """selectPolicy Disabled forbids any change in its direction (ours, upstream's rule)."""
    disabled = ScalingRules(select_policy=SelectPolicy.DISABLED)
    behavior = resolve_behavior(Behavior(scale_up=disabled, scale_down=disabled), TESTING)
    got, _ = convert_with_behavior_rate(History(), current, desired, 1, 10, behavior, NOW)
    assert got == expected


@pytest.mark.parametrize(
    ("select", "desired", "expected"),
    [
        pytest.param(SelectPolicy.MAX, 9, 5, id="up-max-folds-to-min-int32-holds"),
        pytest.param(SelectPolicy.MIN, 9, 9, id="up-min-folds-to-max-int32-unlimited"),
        pytest.param(SelectPolicy.MAX, 1, 5, id="down-max-folds-to-max-int32-holds"),
        pytest.param(SelectPolicy.MIN, 1, 1, id="down-min-folds-to-min-int32-unlimited"),
    ],
)
def test_empty_policies_keep_upstreams_fold_seeds(
    select: SelectPolicy, desired: int, expected: int
) -> None:
    """With no policies the fold keeps its seed: Max forbids the change, Min leaves it
    unlimited (upstream's calculate*Limit; API validation requires at least one policy)."""
    empty = ScalingRules(select_policy=select, policies=())
    behavior = resolve_behavior(Behavior(scale_up=empty, scale_down=empty), TESTING)
    got, _ = convert_with_behavior_rate(History(), 5, desired, 1, 10, behavior, NOW)
    assert got == expected
