"""Whose zero a target at 0 is: the cluster's record of who last set the count first, the
daemon's memory only where that record cannot tell; a KEDA zero adopted in shadow mode; and
what is said when work waits at a zero the daemon may not wake."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import Decision, Step
from autoscaler.algorithm.model import Milli
from autoscaler.algorithm.zero_values import Activity, ActivityState, ZeroMemory
from autoscaler.config import parse_config
from autoscaler.runtime.zero_owner import (
    Owner,
    ZeroOwnership,
    adopt_keda_zero,
    owned_memory,
    resume_command,
    stranded_message,
    zero_ownership,
)
from tests.runtime.doubles import FixedScale

OURS = ZeroMemory(scaled_to_zero=True)
NONE = ZeroMemory()
ADOPTED = ZeroMemory(scaled_to_zero=True, adopted_from="keda-operator")


@pytest.mark.parametrize(("managers", "memory", "owner", "set_by"), [
    (("autoscaler",), NONE, Owner.OURS, "autoscaler"),
    (("autoscaler",), OURS, Owner.OURS, "autoscaler"),
    (("kubectl",), OURS, Owner.THEIRS, "kubectl"),
    (("kubectl",), NONE, Owner.THEIRS, "kubectl"),
    (("keda-operator",), ADOPTED, Owner.OURS, "keda-operator"),
    (("kubectl",), ADOPTED, Owner.THEIRS, "kubectl"),
    (("OpenAPI-Generator",), OURS, Owner.OURS, "OpenAPI-Generator"),
    (("OpenAPI-Generator",), NONE, Owner.UNKNOWN, "OpenAPI-Generator"),
    (None, OURS, Owner.OURS, None),
    (None, NONE, Owner.UNKNOWN, None),
    ((), NONE, Owner.UNKNOWN, None),
], ids=["ours-memory-lost", "ours", "set-by-hand-since", "set-by-hand", "adopted-keda",
        "adopted-then-set-by-hand", "anonymous-ours-by-memory", "anonymous-no-memory",
        "no-record-ours-by-memory", "no-record-no-memory", "nobody-owns-the-field"])
def test_the_cluster_decides_and_the_memory_only_where_it_cannot(
    managers: tuple[str, ...] | None, memory: ZeroMemory, owner: Owner, set_by: str | None,
) -> None:
    assert zero_ownership(managers, memory) == ZeroOwnership(owner=owner, set_by=set_by)


def test_the_memory_follows_the_ownership() -> None:
    theirs = ZeroOwnership(owner=Owner.THEIRS, set_by="kubectl")
    assert owned_memory(ADOPTED, theirs) == ZeroMemory()
    assert owned_memory(NONE, ZeroOwnership(owner=Owner.OURS)) == OURS
    assert owned_memory(OURS, ZeroOwnership(owner=Owner.OURS)) is OURS


@pytest.mark.parametrize(("replicas", "owners", "memory", "adopted"), [
    (0, ("ScaledObject worker",), NONE, ADOPTED),
    (0, ("ScaledObject worker",), OURS, OURS),
    (0, (), ADOPTED, ADOPTED),
    (0, ("HorizontalPodAutoscaler web",), NONE, NONE),
    (2, ("ScaledObject worker",), NONE, NONE),
], ids=["keda-zero-adopted", "ours-already", "kept-when-the-scaledobject-goes",
        "not-an-hpa-zero", "not-at-zero"])
def test_a_keda_zero_is_adopted_and_never_let_go_of_in_shadow(
    replicas: int, owners: tuple[str, ...], memory: ZeroMemory, adopted: ZeroMemory,
) -> None:
    scale = FixedScale(spec_replicas=replicas, replicas_managers=("keda-operator",))
    assert adopt_keda_zero(memory, scale, owners) == adopted


TARGETS = parse_config("""
[prometheus]
url = "http://127.0.0.1:9090"

[[autoscaler]]
namespace = "jobs"
scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "worker" }
minReplicas = 0
maxReplicas = 10

[[autoscaler.metrics]]
type = "External"
external.metric.name = "queue"
external.target = { type = "AverageValue", averageValue = "10" }
external.query = "sum(queue)"

[[autoscaler]]
namespace = "jobs"
scaleTargetRef = { apiVersion = "argoproj.io/v1alpha1", kind = "Rollout", name = "worker" }
minReplicas = 0
maxReplicas = 10

[[autoscaler.metrics]]
type = "External"
external.metric.name = "queue"
external.target = { type = "AverageValue", averageValue = "10" }
external.query = "sum(queue)"
""").targets


@pytest.mark.parametrize(("index", "command"), [
    (0, "kubectl -n jobs scale deployment/worker --replicas=1"),
    (1, "kubectl -n jobs scale rollout.argoproj.io/worker --replicas=1"),
])
def test_the_command_that_hands_a_target_back(index: int, command: str) -> None:
    assert resume_command(TARGETS[index]) == command


ACTIVE = Activity(state=ActivityState.ACTIVE, metric="queue", value=Milli(25000),
                  threshold=Milli(0))
DISABLED = Decision(current_replicas=0, desired_replicas=0, steps=(Step.SCALING_DISABLED,))


@pytest.mark.parametrize(("ownership", "says"), [
    (ZeroOwnership(owner=Owner.THEIRS, set_by="kubectl"),
     "kubectl set its replicas to 0, not the autoscaler"),
    (ZeroOwnership(owner=Owner.UNKNOWN, set_by="OpenAPI-Generator"),
     "the cluster names OpenAPI-Generator, a client that could be anyone"),
    (ZeroOwnership(owner=Owner.UNKNOWN), "the cluster does not say who did"),
])
def test_work_waiting_at_a_zero_not_ours_names_who_and_the_command(
    ownership: ZeroOwnership, says: str,
) -> None:
    message = stranded_message(TARGETS[0], DISABLED, ACTIVE, ownership)
    assert message is not None
    assert says in message
    assert "queue is 25, above its activation threshold 0" in message
    assert "run `kubectl -n jobs scale deployment/worker --replicas=1`" in message


@pytest.mark.parametrize(("decision", "activity"), [
    (DISABLED, Activity(state=ActivityState.INACTIVE)),
    (DISABLED, Activity(state=ActivityState.UNKNOWN, metric="queue")),
    (DISABLED, None),
    (Decision(current_replicas=0, desired_replicas=3, steps=(Step.ACTIVATED,)), ACTIVE),
], ids=["idle", "unknown", "no-activity", "ours-waking"])
def test_nothing_is_said_when_no_work_waits_or_the_zero_is_woken(
    decision: Decision, activity: Activity | None,
) -> None:
    assert stranded_message(TARGETS[0], decision, activity, None) is None
