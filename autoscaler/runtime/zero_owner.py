"""Whose zero a target at 0 replicas is, and what is said when work waits at one that is not.

Upstream (HPAScaleToZero) evaluates a target at 0 only if the HPA controller took it there,
which it records in the ``ScaledToZero`` condition of the HPA: an object of its own, in the
cluster. A zero anyone else set disables scaling (``ScalingDisabled``) until someone raises
the count. KEDA keeps nothing: while a ScaledObject exists, every zero is KEDA's.

This daemon has no object of its own per target, and its memory of the zeros it made
(``ZeroMemory``, saved with the history) can be lost: a deleted or unreadable state, another
machine. So the cluster is asked first. The API server records, for every write, which
field manager last set ``spec.replicas`` (``metadata.managedFields``: an update of ``/scale``
takes the field over for its writer since Kubernetes 1.21, kubernetes#98377). Every scale
write of this daemon names the field manager ``autoscaler`` (``ports.FIELD_MANAGER``):

- a target at 0 whose count ``autoscaler`` set last is this daemon's zero, whatever its
  memory says (lost state, failover, a wake-up whose PUT failed);
- one that someone else set since (``kubectl scale``, a GitOps apply, another autoscaler) is
  theirs, however sure the memory is: any later writer of the count takes the field over,
  so the record cannot go stale. It needs no permission beyond reading the object (which
  the daemon does anyway) and no write besides the scale write itself;
- a zero KEDA made, taken over in shadow mode (``ZeroMemory.adopted_from``), stays ours while
  KEDA's manager still owns the count, whether the ScaledObject or shadow mode goes first.

The memory decides only where the cluster cannot tell: no managed fields at all (a proxy
that strips them), or a count last set by a manager that names no one (``OpenAPI-Generator``:
every Python client without a field manager, this daemon before it named itself).

Whatever cannot be decided is said, never left silent: at a zero that is not ours (or whose
owner cannot be told) while an activation metric is above its threshold, the
``ScalingActive`` condition names who set the zero and the one command that hands the target
back, a ``StrandedAtZero`` Warning Event says it once, and ``autoscaler_activation_active``
at 1 with ``autoscaler_current_replicas`` at 0 fires the ``AutoscalerStrandedAtZero`` alert.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from autoscaler.algorithm import Condition, ConditionType, Decision, Reason, Step
from autoscaler.algorithm.zero_values import Activity, ActivityState, ZeroMemory
from autoscaler.runtime.ports import FIELD_MANAGER, Scale

if TYPE_CHECKING:
    from autoscaler.config import TargetConfig

ANONYMOUS_MANAGERS = frozenset({"OpenAPI-Generator"})
"""Field managers that name no one: the User-Agent product of every OpenAPI-generated
client that sets no field manager (this daemon's own writes, before it named itself)."""


class Owner(StrEnum):
    OURS = "ours"
    THEIRS = "theirs"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroOwnership:
    owner: Owner
    set_by: str | None = None
    """The field manager that last set the count, when the cluster says."""


def zero_ownership(managers: tuple[str, ...] | None, memory: ZeroMemory) -> ZeroOwnership:
    """Whose zero a target at 0 is, from who last set its count (``managers``, newest
    first; ``None``: not known) and, where that cannot tell, from ``memory``."""
    named = [m for m in managers or () if m not in ANONYMOUS_MANAGERS]
    if named:
        ours = FIELD_MANAGER in named or memory.adopted_from in named
        return ZeroOwnership(owner=Owner.OURS if ours else Owner.THEIRS, set_by=named[0])
    set_by = managers[0] if managers else None
    return ZeroOwnership(owner=Owner.OURS if memory.scaled_to_zero else Owner.UNKNOWN,
                         set_by=set_by)


def adopt_keda_zero(memory: ZeroMemory, scale: Scale, owners: tuple[str, ...]) -> ZeroMemory:
    """In shadow mode beside a ScaledObject, a zero KEDA made is an autoscaler's zero, not
    one set by hand: held as ours (while the manager that set it still owns the count).
    Never let go of because the ScaledObject went first: after the cutover, in either
    order, an idle queue worker is woken by its first message."""
    if scale.spec_replicas != 0 or memory.scaled_to_zero or \
            not any(owner.startswith("ScaledObject ") for owner in owners):
        return memory
    named = [m for m in scale.replicas_managers or () if m not in ANONYMOUS_MANAGERS]
    return dataclasses.replace(memory, scaled_to_zero=True,
                               adopted_from=named[0] if named else None)


def owned_memory(memory: ZeroMemory, ownership: ZeroOwnership) -> ZeroMemory:
    """``memory`` as the ownership of the target's zero says it is."""
    ours = ownership.owner is Owner.OURS
    if memory.scaled_to_zero == ours:
        return memory
    return dataclasses.replace(memory, scaled_to_zero=ours,
                               adopted_from=memory.adopted_from if ours else None)


def ownership_condition(ownership: ZeroOwnership) -> Condition:
    """The ScaledToZero condition for a zero whose owner the cluster changed our mind on."""
    if ownership.owner is Owner.OURS:
        return Condition(type=ConditionType.SCALED_TO_ZERO, status=True,
                         reason=Reason.SCALED_TO_ZERO,
                         message="the autoscaler scaled the workload to zero")
    return Condition(type=ConditionType.SCALED_TO_ZERO, status=False,
                     reason=Reason.NOT_SCALED_TO_ZERO,
                     message="the autoscaler did not scale the workload to zero"
                             + (f" ({ownership.set_by} set its replicas)"
                                if ownership.set_by else ""))


def resume_command(target: TargetConfig) -> str:
    """The one command that hands a target at a zero not ours back to the autoscaler."""
    ref = target.scale_target_ref
    group = ref.api_version.rpartition("/")[0]
    resource = ref.kind.lower() if group in ("", "apps") else f"{ref.kind.lower()}.{group}"
    return f"kubectl -n {target.namespace} scale {resource}/{ref.name} --replicas=1"


def stranded_message(target: TargetConfig, decision: Decision, activity: Activity | None,
                     ownership: ZeroOwnership | None) -> str | None:
    """What is said when work waits at a zero this daemon may not wake; ``None`` if none
    does."""
    if Step.SCALING_DISABLED not in decision.steps or decision.current_replicas != 0 \
            or activity is None or activity.state is not ActivityState.ACTIVE:
        return None
    set_by = ownership.set_by if ownership is not None else None
    if ownership is not None and ownership.owner is Owner.THEIRS:
        who = f"{set_by} set its replicas to 0, not the autoscaler"
    else:
        who = ("the autoscaler has no record of setting its replicas to 0 (the cluster "
               + (f"names {set_by}, a client that could be anyone)" if set_by
                  else "does not say who did)"))
    return (f"scaling is disabled: {who}, and {activity.describe()}: work is waiting and "
            f"nothing serves it; run `{resume_command(target)}` to hand the target back to "
            "the autoscaler (or pause it with the autoscaler.dev/paused annotation if the "
            "zero is meant)")


def stranded_condition(message: str) -> Condition:
    return Condition(type=ConditionType.SCALING_ACTIVE, status=False,
                     reason=Reason.SCALING_DISABLED, message=message)
