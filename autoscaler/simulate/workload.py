"""The simulated workload: pods that start, become ready, take traffic and go away.

A scale write creates pods at once (the ReplicaSet controller is assumed instant). Each pod is
Pending for ``startup`` seconds (scheduling, image pull, container start), then Running but
unready for ``readiness`` seconds (until its readiness probe passes), then Ready. Only Ready
pods get traffic. A scale-down marks pods as deleting in the ReplicaSet's order (pending
before running, unready before ready, the most recently ready first); they take no traffic
and disappear ``termination`` seconds later.

Pods are handed to the core as the daemon's pod cache would build them: ``start_time`` is the
creation time (the kubelet sets it before pulling images), and the Ready condition's
transition time is the creation time until the pod becomes ready, then the moment it did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from autoscaler.algorithm import ConditionStatus, Container, Milli, Pod, PodPhase
from autoscaler.algorithm.pods import PodView
from autoscaler.record import seal_values
from autoscaler.simulate.rows import Counts

CONTAINER = "app"
LONG_AGO = 86_400.0
"""Starting pods were created this long before the simulation: past every readiness rule."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadModel:
    """How the simulated pods behave; durations in seconds."""

    capacity: float | None = None
    """Demand units one Ready pod serves at 100 % of its resource request (Resource metrics)."""
    startup: float = 0.0
    readiness: float = 0.0
    termination: float = 0.0
    requests: Mapping[str, Milli] = field(
        default_factory=lambda: MappingProxyType({"cpu": Milli(1000)})
    )
    """The ``app`` container's requests, milli-units per resource (default: 1 cpu)."""
    metric_window: float | None = None
    """Each per-pod sample averages the pod's load over this window, like ``rate(...[1m])``;
    ``None`` takes each metric's window from the daemon's config (60 s unless set there)."""
    saturation: float | None = None
    """A pod's resource usage is capped at this percent of its request (its limit), if set."""
    container: str = CONTAINER
    """The pods' one container (named after a ContainerResource metric's, if there is one)."""
    replicas: int | None = None
    """Replicas at the start, all Ready; ``None`` starts at ``minReplicas`` (at least 1)."""


class PodState(StrEnum):
    PENDING = "pending"
    STARTING = "starting"
    """Running, not yet Ready."""
    READY = "ready"
    DELETING = "deleting"


@dataclass(slots=True, kw_only=True)
class SimPod:
    name: str
    created: float
    running_at: float
    ready_at: float
    deleted_at: float | None = None
    _core: Pod | None = None
    _core_state: PodState | None = None

    def state(self, now: float) -> PodState:
        if self.deleted_at is not None:
            return PodState.DELETING
        if now < self.running_at:  # ``lifecycle``, inlined: called per pod per step
            return PodState.PENDING
        return PodState.STARTING if now < self.ready_at else PodState.READY

    def lifecycle(self, now: float) -> PodState:
        """Where the pod is in its start-up at ``now``, deletion aside."""
        if now < self.running_at:
            return PodState.PENDING
        return PodState.STARTING if now < self.ready_at else PodState.READY


_NO_PODS = dict.fromkeys(PodState, 0)
_REPORTING = frozenset({PodState.STARTING, PodState.READY})
"""Running and not deleting: Pending and deleting pods report no samples."""


class Workload:
    """The pods of one simulated target; mutated by ``advance`` and ``scale_to`` only."""

    def __init__(self, model: WorkloadModel, *, prefix: str, replicas: int, now: float) -> None:
        self.model = model
        self._prefix = prefix
        self._serial = 0
        self._containers = (Container(name=model.container, requests=model.requests),)
        self.pods: list[SimPod] = []
        self._view: PodView | None = None
        """The core's pods as last observed; handed over again while no pod changed, so
        the core's groupings and requests of them are computed once."""
        self._counts: Counts | None = None
        self.reporting: tuple[SimPod, ...] = ()
        """The pods that report samples (Running, not deleting) as last observed; the same
        tuple until a pod changes."""
        self._unchanged = (math.inf, -math.inf)
        """From when to when the last observation holds: no pod starts running or becomes
        Ready in between, and nothing was created, deleted or removed since."""
        self._terminating = 0
        """Pods marked deleting and not gone yet (``advance`` has nothing to do without)."""
        self._create(replicas, created=now - LONG_AGO)

    def _create(self, count: int, *, created: float) -> None:
        self._unchanged = (math.inf, -math.inf)
        for _ in range(count):
            self._serial += 1
            running_at = created + self.model.startup
            self.pods.append(SimPod(
                name=f"{self._prefix}-{self._serial:05d}", created=created,
                running_at=running_at, ready_at=running_at + self.model.readiness,
            ))

    def advance(self, now: float) -> None:
        """Pods whose termination ended are gone."""
        if not self._terminating:  # most steps: nothing to look for
            return
        grace = self.model.termination
        self._unchanged = (math.inf, -math.inf)
        self.pods = [
            p for p in self.pods if p.deleted_at is None or p.deleted_at + grace > now
        ]
        self._terminating = sum(p.deleted_at is not None for p in self.pods)

    def counts(self, now: float) -> Counts:
        return self.observe(now)[0]

    def observe(self, now: float) -> tuple[Counts, PodView]:
        """The pods by state, and as the core sees them (``core_pods``), in one look at
        each pod: the simulator's step asks for both."""
        since, until = self._unchanged
        if since <= now < until and self._view is not None and self._counts is not None:
            return self._counts, self._view  # no pod changed state (most steps)
        tally = dict(_NO_PODS)  # (iterating the enum itself is slow: this runs every step)
        out = []
        # A pod added, removed or changed shows as a rebuilt core pod or another count.
        changed = self._view is None or len(self._view) != len(self.pods)
        for pod in self.pods:
            state = pod.state(now)
            tally[state] += 1
            if pod._core is None or pod._core_state is not state:
                pod._core, pod._core_state = self._core_pod(pod, state), state
                changed = True
            out.append(pod._core)
        if changed or self._view is None or self._counts is None:
            self._view, self._counts = PodView(out), Counts(
                pending=tally[PodState.PENDING], starting=tally[PodState.STARTING],
                ready=tally[PodState.READY], deleting=tally[PodState.DELETING],
            )
            self.reporting = tuple(p for p in self.pods if p._core_state in _REPORTING)
        self._unchanged = (now, min(
            (t for p in self.pods if p.deleted_at is None
             for t in (p.running_at, p.ready_at) if t > now), default=math.inf))
        return self._counts, self._view

    def scale_to(self, replicas: int, now: float) -> None:
        """Create pods, or mark the ReplicaSet's choice of pods as deleting."""
        active = [p for p in self.pods if p.deleted_at is None]
        if replicas > len(active):
            self._create(replicas - len(active), created=now)
            return
        # ReplicaSet order (controller.ActivePods): pending < unready < ready, then the most
        # recently ready, then the newest: the cheapest pods to lose go first. Ties: the
        # later name (serials grow), so the original pods are the last to go.
        self._unchanged = (math.inf, -math.inf)
        rank = {PodState.PENDING: 0, PodState.STARTING: 1, PodState.READY: 2}
        active.sort(key=lambda p: p.name, reverse=True)
        active.sort(key=lambda p: (rank[p.state(now)], -p.ready_at, -p.created))
        for pod in active[: len(active) - replicas]:
            pod.deleted_at = now
            if self.model.termination <= 0:
                self.pods.remove(pod)
            else:
                self._terminating += 1

    def core_pods(self, now: float) -> PodView:
        """The pods as the core sees them; rebuilt only when a pod changes state."""
        return self.observe(now)[1]

    def _core_pod(self, pod: SimPod, state: PodState) -> Pod:
        if state is PodState.DELETING and pod.deleted_at is not None:
            # A deleting pod keeps the phase and readiness it had when it was deleted.
            state = pod.lifecycle(pod.deleted_at)
        ready = state is PodState.READY
        return Pod(
            name=pod.name,
            phase=PodPhase.PENDING if state is PodState.PENDING else PodPhase.RUNNING,
            ready=ConditionStatus.TRUE if ready else ConditionStatus.FALSE,
            ready_transition_time=pod.ready_at if ready else pod.created,
            start_time=pod.created,
            deleting=pod.deleted_at is not None,
            containers=self._containers,
        )


seal_values(globals())
