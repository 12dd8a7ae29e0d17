"""Static sharding: which targets this replica runs (``run --shard N --total-shards M``).

A target's shard is crc32 of its key modulo the number of shards: the same on every replica,
restart and Python version, so each target is run by exactly one replica.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig


def shard_of(key: str, total: int) -> int:
    """A stable shard for a target key (crc32: the same on every replica and restart)."""
    return zlib.crc32(key.encode()) % total


def targets_for_shard(
    targets: Sequence[TargetConfig], shard: int | None, total: int | None
) -> list[TargetConfig]:
    if shard is None or not total or total <= 1:
        return list(targets)
    return [t for t in targets if shard_of(t.key, total) == shard]
