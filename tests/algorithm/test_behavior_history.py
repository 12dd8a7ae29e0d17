"""Stabilization windows and scale events, ported from upstream's horizontal_test.go.

Tables: TestNormalizeDesiredReplicas, TestNormalizeDesiredReplicasWithBehavior,
TestStoreScaleEvents and TestConvertDesiredReplicasWithRules.
"""

from __future__ import annotations

import pytest

from autoscaler.algorithm import (
    Behavior,
    History,
    Reason,
    Recommendation,
    ScaleEvent,
    ScalingRules,
    record_scale_event,
    resolve_behavior,
)
from autoscaler.algorithm.behavior import (
    convert_with_rules,
    default_scale_up_limit,
    replicas_changed_in_period,
    stabilize_downscale,
    stabilize_with_behavior,
)
from tests.algorithm.builders import NOW, TESTING, recommendations, scaling_rules

MIN = 60.0


# upstream: TestNormalizeDesiredReplicas (downscale window 5 min)
@pytest.mark.parametrize(
    ("recs", "proposal", "expected", "log_length"),
    [
        pytest.param((), 5, 5, 1, id="empty-log"),
        pytest.param(recommendations((4, 2 * MIN), (5, MIN)), 3, 5, 3, id="stabilize"),
        pytest.param(recommendations((1, 2 * MIN), (2, MIN)), 3, 3, 3, id="no-stabilize"),
        pytest.param(recommendations((10, 10 * MIN), (9, 9 * MIN)), 3, 3, 2,
                     id="no-stabilize-old-recommendations"),
        pytest.param(recommendations((10, 10 * MIN), (4, MIN), (5, 2 * MIN), (9, 9 * MIN)), 3, 5,
                     4, id="stabilize-old-recommendations"),
    ],
)
def test_stabilize_without_behavior(
    recs: tuple[Recommendation, ...], proposal: int, expected: int, log_length: int
) -> None:
    """The highest recommendation in the window wins; an old slot is reused, not appended."""
    got, history = stabilize_downscale(
        History(recommendations=recs), proposal, now=NOW, window=5 * MIN
    )
    assert (got, len(history.recommendations)) == (expected, log_length)


# upstream: TestNormalizeDesiredReplicasWithBehavior
WITH_BEHAVIOR = [
    pytest.param((), 100, 5, 0, 0, 5, [5], id="empty-recommendations-scale-down"),
    pytest.param(recommendations((4, 2 * MIN), (5, MIN)), 100, 3, 0, 180, 5, [4, 5, 3],
                 id="simple-scale-down-stabilization"),
    pytest.param(recommendations((4, 2 * MIN), (5, MIN)), 1, 7, 300, 0, 4, [4, 5, 7],
                 id="simple-scale-up-stabilization"),
    pytest.param(recommendations((1, 2 * MIN), (2, MIN)), 100, 3, 300, 0, 3, [1, 2, 3],
                 id="no-scale-down-stabilization"),
    pytest.param(recommendations((4, 2 * MIN), (5, MIN)), 1, 3, 0, 300, 3, [4, 5, 3],
                 id="no-scale-up-stabilization"),
    pytest.param(recommendations((10, 10 * MIN), (9, 9 * MIN)), 100, 3, 0, 0, 3, [10, 3],
                 id="no-scale-down-stabilization-reuse-slot"),
    pytest.param(recommendations((10, 10 * MIN), (9, 9 * MIN)), 1, 100, 0, 0, 100, [10, 100],
                 id="no-scale-up-stabilization-reuse-slot"),
    pytest.param(recommendations((10, 10 * MIN), (4, MIN), (5, 2 * MIN), (9, 9 * MIN)), 100, 3,
                 0, 180, 5, [10, 4, 5, 3], id="scale-down-stabilization-reuse-obsolete-slot"),
    pytest.param(recommendations((10, 100 * MIN), (6, MIN), (5, 2 * MIN), (9, 3 * MIN)), 1, 100,
                 300, 0, 5, [100, 6, 5, 9], id="scale-up-stabilization-reuse-obsolete-slot"),
    pytest.param(recommendations((2, 100 * MIN), (3, 3 * MIN)), 2, 1, 300, 300, 2, None,
                 id="no-scale-up-when-proposal-goes-down"),
    pytest.param(recommendations((2, 100 * MIN), (1, 3 * MIN)), 2, 3, 300, 300, 2, None,
                 id="no-scale-down-when-proposal-goes-up"),
]


@pytest.mark.parametrize(
    ("recs", "current", "proposal", "up_window", "down_window", "expected", "stored"),
    WITH_BEHAVIOR,
)
def test_stabilize_with_behavior(  # noqa: PLR0917 - one table row
    recs: tuple[Recommendation, ...], current: int, proposal: int, up_window: int,
    down_window: int, expected: int, stored: list[int] | None,
) -> None:
    """Current is clamped into [min recent, max recent]; the proposal is recorded."""
    behavior = resolve_behavior(
        Behavior(
            scale_up=ScalingRules(stabilization_window_seconds=up_window),
            scale_down=ScalingRules(stabilization_window_seconds=down_window),
        ),
        TESTING,
    )
    got, history = stabilize_with_behavior(
        History(recommendations=recs), proposal, current=current, now=NOW, behavior=behavior
    )
    assert got == expected
    if stored is not None:
        assert [r.replicas for r in history.recommendations] == stored


def ev(change: int, ago: float, *, outdated: bool = False) -> ScaleEvent:
    return ScaleEvent(change=change, timestamp=NOW - ago, outdated=outdated)


# upstream: TestStoreScaleEvents; each row runs for scale-ups and for scale-downs
STORE_SCALE_EVENTS = [
    pytest.param(None, (), [], 0, id="empty-no-behavior"),
    pytest.param(scaling_rules(10, 60, 100, 60, 0), (), [(5, False)], 0,
                 id="empty-two-policy-behavior"),
    pytest.param(None, (ev(7, 61),), [(7, False)], 0, id="outdated-kept-without-behavior"),
    pytest.param(scaling_rules(10, 60, 100, 60, 0), (ev(7, 61),), [(5, False)], 0,
                 id="outdated-replaced-with-behavior"),
    pytest.param(scaling_rules(10, 60, 100, 60, 0), (ev(7, 58),), [(7, False), (5, False)], 7,
                 id="actual-entry-not-touched"),
    pytest.param(scaling_rules(10, 60, 0, 0, 0), (ev(7, 61), ev(6, 59)),
                 [(5, False), (6, False)], 6, id="two-entries-one-replaced"),
    pytest.param(scaling_rules(10, 60, 100, 30, 0), (ev(8, 29), ev(6, 59), ev(7, 61), ev(9, 61)),
                 [(8, False), (6, False), (7, True), (5, False)], 14,
                 id="replace-one-policies-with-different-periods"),
    pytest.param(scaling_rules(10, 120, 100, 30, 0), (ev(7, 58), ev(6, 59)),
                 [(7, False), (6, False), (5, False)], 13, id="two-entries-both-actual"),
]


@pytest.mark.parametrize("direction", [1, -1], ids=["up", "down"])
@pytest.mark.parametrize(("rules", "previous", "stored", "change_in_60s"), STORE_SCALE_EVENTS)
def test_store_scale_events(
    direction: int, rules: ScalingRules | None, previous: tuple[ScaleEvent, ...],
    stored: list[tuple[int, bool]], change_in_60s: int,
) -> None:
    """Old events are marked outdated and the last one's slot takes the new event."""
    up = direction > 0
    behavior = None
    if rules is not None:
        behavior = Behavior(scale_up=rules) if up else Behavior(scale_down=rules)
    before = History(scale_up_events=previous) if up else History(scale_down_events=previous)
    events = previous
    assert replicas_changed_in_period(events, 60, NOW) == change_in_60s
    after = record_scale_event(
        before, behavior=behavior, previous=10, new=10 + 5 * direction, now=NOW, settings=TESTING
    )
    got = after.scale_up_events if up else after.scale_down_events
    assert [(e.change, e.outdated) for e in got] == stored


# upstream: TestConvertDesiredReplicasWithRules, run with upstream's test-package
# scaleUpLimitFactor of 8 (its init() sets it); the last row also runs with our factor 2.
@pytest.mark.parametrize(
    ("current", "desired", "min_max", "expected", "reason"),
    [
        pytest.param(5, 7, (3, 8), 7, Reason.DESIRED_WITHIN_RANGE, id="within-range"),
        pytest.param(3, 1, (2, 8), 2, Reason.TOO_FEW_REPLICAS, id="below-min"),
        pytest.param(1, 0, (0, 10), 0, Reason.DESIRED_WITHIN_RANGE, id="zero-within-range"),
        pytest.param(20, 1000, (1, 10), 10, Reason.TOO_MANY_REPLICAS, id="max-below-up-limit"),
        pytest.param(3, 1000, (1, 2000), 24, Reason.SCALE_UP_LIMIT, id="up-limit-below-max"),
    ],
)
def test_convert_with_rules_upstream_factor(
    current: int, desired: int, min_max: tuple[int, int], expected: int, reason: Reason
) -> None:
    """Without behavior: min first, then the scale-up limit or max, as upstream."""
    got = convert_with_rules(current, desired, *min_max, scale_up_limit_factor=8)
    assert got == (expected, reason)


@pytest.mark.parametrize(
    ("current", "expected"),
    [pytest.param(0, 4, id="zero"), pytest.param(1, 4, id="one"), pytest.param(3, 6, id="three"),
     pytest.param(10, 20, id="ten")],
)
def test_default_scale_up_limit_production_factor(current: int, expected: int) -> None:
    """The production limit is max(2 x current, 4) (scaleUpLimitFactor 2, minimum 4)."""
    assert default_scale_up_limit(current) == expected
    assert convert_with_rules(current, 1000, 1, 2000)[0] == expected


# ours: the comparisons at the exact cut-off, as upstream's time.Before/After make them
def test_downscale_window_includes_its_start() -> None:
    """Without behavior an entry exactly at now - window is not old (Before is strict)."""
    got, history = stabilize_downscale(
        History(recommendations=recommendations((9, 300.0))), 3, now=NOW, window=300.0
    )
    assert (got, len(history.recommendations)) == (9, 2)


def test_behavior_windows_exclude_their_start() -> None:
    """With behavior an entry exactly at a cut-off neither counts (After is strict) nor is
    old (Before is strict), so it is kept and the proposal is appended."""
    behavior = resolve_behavior(
        Behavior(scale_down=ScalingRules(stabilization_window_seconds=300)), TESTING
    )
    got, history = stabilize_with_behavior(
        History(recommendations=recommendations((9, 300.0))), 3, current=5, now=NOW,
        behavior=behavior,
    )
    assert (got, [r.replicas for r in history.recommendations]) == (3, [9, 3])


def test_event_at_period_start_is_not_counted_nor_outdated() -> None:
    """An event exactly one period old is outside the period (After) yet not outdated
    (Before), so its slot is kept."""
    rules = scaling_rules(10, 60, 0, 0, 0)
    at_cutoff = (ev(7, 60.0),)
    assert replicas_changed_in_period(at_cutoff, 60, NOW) == 0
    after = record_scale_event(History(scale_up_events=at_cutoff), behavior=Behavior(scale_up=rules),
                               previous=1, new=2, now=NOW, settings=TESTING)
    assert [(e.change, e.outdated) for e in after.scale_up_events] == [(7, False), (1, False)]
