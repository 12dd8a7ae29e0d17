"""A target's generation: which version of its table the daemon acts on.

Upstream's HPA has ``metadata.generation``, which the API server moves on every change to
the spec, and ``status.observedGeneration``, the generation the controller last acted on
(kubernetes#138228). Our spec is the target's ``[[autoscaler]]`` table merged over
``[defaults]``; its generation is a digest of that table rather than a counter, so it is the
same in every replica and shard of the daemon, across restarts, and in ``check`` and
``plan`` run on the same file. It moves when a value of the table does, not when comments,
spacing or the order of keys do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

GENERATION_LENGTH = 12
"""Hex digits kept of the SHA-256 digest: short enough to read, long enough never to repeat
across the versions of one target."""


def table_generation(table: Mapping[str, Any]) -> str:
    """The generation of a target's merged table (TOML values: dates are hashed as text)."""
    canonical = json.dumps(table, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:GENERATION_LENGTH]
