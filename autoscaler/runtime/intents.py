"""Scale writes on record before they are sent, and settled after.

An intent (previous and desired count, the resourceVersion the PUT carries) is made
durable with the history before its PUT, so a process killed at any moment after the write
leaves a record. A write whose outcome was not known (the process died, or the request
failed in a way that does not prove it was not applied) is settled by a fresh read before
the target's next decision: it landed unless the object still has the resourceVersion the
write carried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from autoscaler.algorithm import AlgorithmSettings
from autoscaler.runtime.landed import count_scale
from autoscaler.runtime.ports import Scale
from autoscaler.runtime.reconcile_options import Persist
from autoscaler.runtime.status import TargetState
from autoscaler.snapshot import Intent

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

log = structlog.get_logger("autoscaler.reconcile")


async def put_on_record(writes: Sequence[tuple[TargetState, Scale, int]], persist: Persist, *,
                        now: float) -> None:
    """Each (state, scale read, desired count) gets its intent, then one store write makes
    them all durable. If that fails, no intent stays and the error is raised: none of these
    writes may be sent."""
    for state, scale, desired in writes:
        state.intent = Intent(previous=scale.spec_replicas, desired=desired,
                              resource_version=scale.resource_version, at=now)
    try:
        await persist()
    except Exception:
        for state, _, _ in writes:
            state.intent = None
        raise


def settle_intent(state: TargetState, target: TargetConfig, scale: Scale, *, now: float,
                  settings: AlgorithmSettings) -> None:
    """Settle the target's intent against ``scale``, read fresh from the server. A landed
    write is counted now, the latest it can have happened, so its policy period ends no
    earlier than upstream's would."""
    intent, state.intent = state.intent, None
    assert intent is not None
    if scale.resource_version == intent.resource_version:
        log.info("an earlier scale write did not land", target=target.key,
                 desired=intent.desired)
        return
    count_scale(state, target, previous=intent.previous, new=intent.desired, now=now,
                settings=settings)
    state.expected_replicas = scale.spec_replicas
    log.warning("an earlier scale write whose outcome was unknown is counted as made",
                target=target.key, previous=intent.previous, desired=intent.desired,
                replicas=scale.spec_replicas)
