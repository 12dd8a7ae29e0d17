"""Static sharding: every target in exactly one shard, the same one on every replica."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from autoscaler.runtime.shards import shard_of, targets_for_shard


@dataclass(frozen=True)
class Target:
    key: str


TARGETS = [Target(f"ns-{i % 7}/Deployment/app-{i}") for i in range(1000)]


def test_shards_partition_the_targets() -> None:
    """Three shards cover every target once, in roughly equal parts."""
    shards = [targets_for_shard(TARGETS, i, 3) for i in range(3)]  # type: ignore[arg-type]
    keys = [t.key for shard in shards for t in shard]
    assert sorted(keys) == sorted(t.key for t in TARGETS)
    assert all(250 < len(shard) < 420 for shard in shards)


@pytest.mark.parametrize(
    ("key", "total", "shard"),
    [
        ("shop/Deployment/web", 2, 0),
        ("shop/Deployment/web", 5, 4),
        ("payments/Deployment/worker", 2, 1),
        ("payments/Deployment/worker", 3, 2),
        ("shop/Rollout/checkout", 5, 1),
        ("ns-3/Deployment/app-10", 5, 2),
    ],
    ids=["web-of-2", "web-of-5", "worker-of-2", "worker-of-3", "checkout-of-5", "app-of-5"],
)
def test_shard_is_stable(key: str, total: int, shard: int) -> None:
    """The shard of a key is crc32(key) mod total: fixed values, the same on every replica,
    restart and Python version (never ``hash()``, which is salted per process)."""
    assert shard_of(key, total) == shard


def test_no_sharding_keeps_everything() -> None:
    """Without --shard every target is this replica's."""
    assert targets_for_shard(TARGETS, None, None) == TARGETS  # type: ignore[arg-type]
