"""The opt-in fallback: a count after N passes in a row with every metric invalid."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from autoscaler.algorithm import Decision, MetricCurrent, MetricOutcome, MetricProposal
from autoscaler.algorithm.fallback import fallback_replicas
from tests.algorithm.builders import external_spec

INVALID = MetricOutcome(spec=external_spec(average=10_000), description="external metric x",
                        error="no series")
VALID = MetricOutcome(spec=external_spec(average=10_000), description="external metric x",
                      proposal=MetricProposal(replicas=3, current=MetricCurrent(value=1),
                                              ratio=1.0))


@dataclass(frozen=True)
class Rule:
    failure_threshold: int = 3
    replicas: int = 5
    allow_scale_down: bool = False


@pytest.mark.parametrize(
    ("metrics", "rule", "passes", "current", "expected"),
    [
        ((INVALID,), Rule(), 3, 2, 5),
        ((INVALID,), Rule(), 2, 2, None),
        ((INVALID, VALID), Rule(), 3, 2, None),
        ((), Rule(), 3, 2, None),
        ((INVALID,), None, 3, 2, None),
        ((INVALID,), Rule(), 3, 8, 8),
        ((INVALID,), Rule(allow_scale_down=True), 3, 8, 5),
    ],
    ids=["due", "not-yet", "one-valid", "no-metric-evaluated", "no-rule", "never-down",
         "down-allowed"],
)
def test_fallback_replicas(metrics: tuple[MetricOutcome, ...], rule: Rule | None, passes: int,
                           current: int, expected: int | None) -> None:
    """Due only with every evaluated metric invalid for failureThreshold passes; down only
    when allowed."""
    decision = Decision(current_replicas=current, desired_replicas=current, metrics=metrics)
    assert fallback_replicas(decision, rule, consecutive_invalid=passes) == expected
