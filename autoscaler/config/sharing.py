"""One copy of each part that many targets of a config have in common.

Targets merged over one ``[defaults]`` table mostly share their spec (bounds, metrics,
behavior), their metric queries and their other settings; converted one by one, each held
its own equal copy of all of it (a ring member loads every target of the fleet: at 50,000
targets those copies were most of what the config cost). Config values are frozen, so
equal parts can be one object: ``SharedParts`` hands out the first instance it saw of each.
Only equality is relied on (nothing compares config values by identity).

The strings a target keeps of its own (its namespace and name, above all) are copies, not the
parsed document's objects. The document is garbage once the config is built, but Python frees
its memory to the system only by whole arenas (1 MiB), and one kept string in each of them
holds them all: at 50,000 targets the names alone kept 78 MB over the imports instead of 37
(`bench/config_load.py`).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TypeVar

from autoscaler.config.validated import TargetConfig

T = TypeVar("T")

SHARED_FIELDS = ("spec", "metric_queries", "fallback", "schedules", "scale_to_zero",
                 "predictions")
"""The parts of a ``TargetConfig`` that targets commonly have in common (everything but its
name, key and generation)."""


class SharedParts:
    """The instances seen so far, by value; one per config load."""

    def __init__(self) -> None:
        self._seen: dict[object, object] = {}

    def __call__(self, value: T) -> T:
        """The first instance equal to ``value`` seen, else ``value`` (now the one seen). A
        value that cannot be hashed is kept as it is."""
        try:
            return self._seen.setdefault(value, value)  # type: ignore[return-value]
        except TypeError:
            return value

    def target(self, target: TargetConfig) -> TargetConfig:
        """``target`` with its common parts shared with the targets seen before it."""
        parts = {name: self(getattr(target, name)) for name in SHARED_FIELDS}
        ref = target.scale_target_ref
        ref = dataclasses.replace(ref, api_version=sys.intern(own(ref.api_version)),
                                  kind=sys.intern(own(ref.kind)), name=own(ref.name))
        return dataclasses.replace(
            target, namespace=sys.intern(own(target.namespace)), scale_target_ref=ref,
            prometheus=sys.intern(own(target.prometheus)), **parts)


def own(text: str) -> str:
    """A string equal to ``text`` that is not the parsed document's object (the module's
    docstring says why)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
