"""Drift: replicas changed between passes without our write."""

from autoscaler.adapters.kube.drift import Drift, DriftTracker


def test_first_observation_is_no_drift() -> None:
    """Nothing to compare with on the first pass."""
    assert DriftTracker().observe("web", 3) is None


def test_change_without_our_write_is_drift_and_becomes_the_baseline() -> None:
    """An outside change is reported once; the next pass continues from it."""
    tracker = DriftTracker()
    tracker.observe("web", 3)
    assert tracker.observe("web", 7) == Drift(expected=3, observed=7)
    assert tracker.observe("web", 7) is None


def test_our_write_is_not_drift() -> None:
    """After our write of 5, reading 5 is expected; reading 4 is drift from 5."""
    tracker = DriftTracker()
    tracker.observe("web", 3)
    tracker.wrote("web", 5)
    assert tracker.observe("web", 5) is None
    tracker.wrote("web", 6)
    assert tracker.observe("web", 4) == Drift(expected=6, observed=4)
