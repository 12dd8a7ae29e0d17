"""Static sharding: every target in exactly one shard, the same one on every replica."""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.wiring import shard_of, targets_for_shard


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


def test_shard_is_stable() -> None:
    """The shard of a key depends on the key alone (crc32), not on the process or order."""
    assert shard_of("shop/Deployment/web", 4) == shard_of("shop/Deployment/web", 4)
    assert [shard_of(t.key, 5) for t in TARGETS[:5]] == [
        shard_of(t.key, 5) for t in reversed(TARGETS[:5])][::-1]


def test_no_sharding_keeps_everything() -> None:
    """Without --shard every target is this replica's."""
    assert targets_for_shard(TARGETS, None, None) == TARGETS  # type: ignore[arg-type]
