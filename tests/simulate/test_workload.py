"""The pod model: lifecycle by the clock, the ReplicaSet's deletion order, the pods' shape."""

from __future__ import annotations

import pytest

from autoscaler.algorithm import ConditionStatus, PodPhase
from autoscaler.simulate.workload import Workload, WorkloadModel

MODEL = WorkloadModel(startup=30, readiness=10, termination=20)


def fresh(replicas: int = 2) -> Workload:
    return Workload(MODEL, prefix="web", replicas=replicas, now=0.0)


@pytest.mark.parametrize(
    ("now", "pending", "starting", "ready"),
    [(100, 2, 0, 2), (129, 2, 0, 2), (130, 0, 2, 2), (139, 0, 2, 2), (140, 0, 0, 4)],
    ids=["created", "still-pending", "running", "still-unready", "ready"],
)
def test_new_pods_go_pending_running_ready(
    now: float, pending: int, starting: int, ready: int
) -> None:
    """Pods made at t=100 are Pending for 30 s, unready for 10 s more, then Ready."""
    workload = fresh()
    workload.scale_to(4, 100)
    counts = workload.counts(now)
    assert (counts.pending, counts.starting, counts.ready) == (pending, starting, ready)


def test_scale_down_deletes_the_cheapest_pods_first() -> None:
    """Pending before unready before Ready; among Ready, the most recently Ready first."""
    workload = fresh(2)
    workload.scale_to(4, 100)  # web-3, web-4: Ready at 140
    workload.scale_to(5, 135)  # web-5: Pending until 165
    workload.scale_to(2, 150)
    deleting = sorted(p.name for p in workload.pods if p.deleted_at is not None)
    assert deleting == ["web-00003", "web-00004", "web-00005"]


def test_deleting_pods_linger_for_the_termination_period() -> None:
    """Deleted pods stay (ignored by the core) for ``termination`` seconds, then vanish."""
    workload = fresh(3)
    workload.scale_to(1, 50)
    workload.advance(69)
    assert workload.counts(69).deleting == 2
    assert sum(p.deleting for p in workload.core_pods(69)) == 2
    workload.advance(70)
    assert len(workload.pods) == 1


def test_core_pods_carry_phase_readiness_and_times() -> None:
    """Pods look to the core as the daemon's pod cache would present them."""
    workload = fresh(0)
    workload.scale_to(1, 100)
    pending, = workload.core_pods(110)
    assert (pending.phase, pending.ready, pending.start_time) == (
        PodPhase.PENDING, ConditionStatus.FALSE, 100,
    )
    starting, = workload.core_pods(135)
    assert (starting.phase, starting.ready, starting.ready_transition_time) == (
        PodPhase.RUNNING, ConditionStatus.FALSE, 100,
    )
    ready, = workload.core_pods(140)
    assert (ready.ready, ready.ready_transition_time) == (ConditionStatus.TRUE, 140)
    assert ready.containers[0].requests == {"cpu": 1000}


def test_starting_pods_were_ready_long_ago() -> None:
    """The initial pods are past every readiness rule at time 0."""
    pod, = Workload(MODEL, prefix="w", replicas=1, now=0.0).core_pods(0)
    assert pod.ready is ConditionStatus.TRUE
    assert pod.start_time is not None
    assert pod.start_time + 300 < 0


def test_observe_sees_every_change_between_two_looks() -> None:
    """A pod becoming Running or Ready, a scale-up and a scale-down each show at the next
    observation, even one at the same instant as the last."""
    workload = Workload(WorkloadModel(startup=10, readiness=10, termination=5), prefix="p",
                        replicas=1, now=0)
    seen = [workload.observe(0)[0]]
    workload.scale_to(2, 0)
    seen += [workload.observe(t)[0] for t in (0, 9, 10, 19, 20)]
    workload.scale_to(1, 20)
    seen.append(workload.observe(20)[0])
    assert [(c.pending, c.starting, c.ready, c.deleting) for c in seen] == [
        (0, 0, 1, 0), (1, 0, 1, 0), (1, 0, 1, 0), (0, 1, 1, 0), (0, 1, 1, 0), (0, 0, 2, 0),
        (0, 0, 1, 1)]
