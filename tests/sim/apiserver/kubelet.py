"""A simulated kubelet (and scheduler): each pod's way from created to Ready, and its end.

A new pod is bound to ``sim-node-1``, accepted (startTime, IP, Ready False with
ContainersNotReady, containers ContainerCreating), Running ``start_delay`` seconds after it
was first seen, and Ready ``ready_delay`` seconds after it started, each step one status
write with its lastTransitionTime, as a real node reports them. A pod with a
deletionTimestamp is removed ``termination_delay`` seconds after the kubelet first saw it.
Tests may pin a pod's readiness (``force_ready``). Time comes from the injected clock.

Resources are reported as a 1.35 kubelet does (InPlacePodVerticalScaling, GA): a started
container's ``resources`` and ``allocatedResources`` are its spec's. A resize (the pod's
``/resize`` subresource) is applied at the next pass, unless a test holds it
(``hold_resize``): ``InProgress`` allocates the new requests but keeps the old ones
applied (condition ``PodResizeInProgress``), ``Deferred`` and ``Infeasible`` keep both
(condition ``PodResizePending`` with that reason). ``release_resize`` lets it finish.

A pass syncs only the pods that changed since the last one (``mark``, fed by the store's
change listener) and those whose next step is due (a heap of due times), never all pods.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .clock import Clock, rfc3339
from .rest import random_suffix
from .store import Store, json_copy

Obj = dict[str, Any]
PODS = ("", "pods")


@dataclass(frozen=True, slots=True, kw_only=True)
class PodTiming:
    start_delay: float = 0.0
    ready_delay: float = 0.0
    termination_delay: float = 0.0


@dataclass(slots=True, kw_only=True)
class PodSim:
    """What the kubelet remembers about a pod between passes."""

    timing: PodTiming
    seen_at: datetime
    started_at: datetime | None = None
    deleting_since: datetime | None = None
    forced_ready: bool | None = None
    ready_since: datetime | None = field(default=None)



def _condition(type_: str, status: bool, when: str, reason: str | None = None) -> Obj:
    cond: Obj = {"type": type_, "status": "True" if status else "False", "lastProbeTime": None,
                 "lastTransitionTime": when}
    if reason:
        cond["reason"] = reason
    return cond


def is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])



def _next_step(sim: PodSim) -> datetime | None:
    """When this pod's next transition is due, if one is pending."""
    t = sim.timing
    if sim.deleting_since is not None:
        return sim.deleting_since + timedelta(seconds=t.termination_delay)
    if sim.started_at is None:
        return sim.seen_at + timedelta(seconds=t.start_delay)
    if sim.forced_ready is None and sim.ready_since is None:
        return sim.started_at + timedelta(seconds=t.ready_delay)
    return None


RESIZE_HOLDS = ("InProgress", "Deferred", "Infeasible")
_RESIZE_CONDITIONS = ("PodResizeInProgress", "PodResizePending")


def _applied(container: Obj) -> Obj:
    """What a container's status reports once its spec's resources are applied."""
    resources = container.get("resources") or {}
    return {key: json_copy(resources[key]) for key in ("requests", "limits") if resources.get(key)}


class Kubelet:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store, self.clock = store, clock
        self.defaults = PodTiming()
        self.pods: dict[tuple[str, str], PodSim] = {}
        self.resize_holds: dict[tuple[str, str], str] = {}
        self._ip = 0
        self._dirty: dict[tuple[str, str], None] = {}  # an ordered set: changed pods
        self._due: list[tuple[datetime, tuple[str, str]]] = []  # heap, entries may be stale
        self._due_at: dict[tuple[str, str], datetime] = {}  # the valid entry per pod

    def now(self) -> datetime:
        return self.clock.now()

    def track(self, namespace: str, name: str, timing: PodTiming) -> None:
        """Remember the timing of a pod a controller just created."""
        self.pods[(namespace, name)] = PodSim(timing=timing, seen_at=self.now())
        self._schedule((namespace, name))

    def mark(self, namespace: str, name: str) -> None:
        """The pod changed (or vanished): sync it in the next pass."""
        self._dirty[(namespace, name)] = None

    def forget(self, namespace: str, name: str) -> None:
        """The pod is gone (an API delete with grace 0): nothing is due for it."""
        self.pods.pop((namespace, name), None)
        self._due_at.pop((namespace, name), None)

    def step(self) -> bool:
        changed = False
        for key in self._take_work():
            pod = self.store.peek(PODS, *key)
            if pod is None:
                self.forget(*key)
                continue
            changed |= self._sync(pod)
            self._schedule(key)
        return changed

    def _take_work(self) -> list[tuple[str, str]]:
        work, self._dirty = self._dirty, {}
        now = self.now()
        while self._due and self._due[0][0] <= now:
            due, key = heapq.heappop(self._due)
            if self._due_at.get(key) == due:
                del self._due_at[key]
                work[key] = None
        return list(work)

    def has_work(self) -> bool:
        """Changed pods wait, or a pod's step is due now."""
        due = self.next_due()
        return bool(self._dirty) or (due is not None and due <= self.now())

    def _schedule(self, key: tuple[str, str]) -> None:
        sim = self.pods.get(key)
        due = _next_step(sim) if sim is not None else None
        if due is None:
            self._due_at.pop(key, None)
        elif self._due_at.get(key) != due:
            self._due_at[key] = due
            heapq.heappush(self._due, (due, key))

    def next_due(self) -> datetime | None:
        while self._due and self._due_at.get(self._due[0][1]) != self._due[0][0]:
            heapq.heappop(self._due)  # superseded or forgotten
        return self._due[0][0] if self._due else None

    def _sync(self, pod: Obj) -> bool:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        sim = self.pods.setdefault(key, PodSim(timing=self.defaults, seen_at=self.now()))
        now = self.now()
        if meta.get("deletionTimestamp"):
            sim.deleting_since = sim.deleting_since or now
            if now >= sim.deleting_since + timedelta(seconds=sim.timing.termination_delay):
                self.store.delete(PODS, *key, echo=False)
                self.forget(*key)
                return True
            return False
        status = pod.get("status") or {}
        if not (pod.get("spec") or {}).get("nodeName"):
            return self._bind(pod)
        if status.get("phase") == "Pending" and not status.get("startTime"):
            return self._accept(pod)
        if status.get("phase") == "Pending" and now >= sim.seen_at + timedelta(
                seconds=sim.timing.start_delay):
            sim.started_at = now
            return self._write_status(pod, self._running(pod, now), )
        if sim.started_at is None and status.get("phase") == "Running":
            sim.started_at = now
        # A resize's write marks the pod again: readiness is looked at in the next pass.
        return self._resize(pod, now) or self._readiness(pod, sim, now)

    def _resize(self, pod: Obj, now: datetime) -> bool:
        """Apply the spec's resources to a running pod's status, or report the held resize."""
        status = pod.get("status") or {}
        if status.get("phase") != "Running":
            return False
        hold = self.resize_holds.get((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        spec = {c["name"]: c for c in (pod.get("spec") or {}).get("containers") or []}
        new = json_copy(status)
        outstanding = False
        for entry in new.get("containerStatuses") or []:
            if entry["name"] not in spec:
                continue
            wanted = _applied(spec[entry["name"]])
            if hold is None or "allocatedResources" not in entry:
                entry["resources"] = wanted
                entry["allocatedResources"] = json_copy(wanted.get("requests") or {})
            elif entry.get("resources") != wanted:
                outstanding = True
                if hold == "InProgress":  # allocated at once, applied later
                    entry["allocatedResources"] = json_copy(wanted.get("requests") or {})
        kept = {c.get("type"): c for c in new.get("conditions") or []}
        conditions = [c for c in new.get("conditions") or []
                      if c.get("type") not in _RESIZE_CONDITIONS]
        if outstanding:
            kind = "PodResizeInProgress" if hold == "InProgress" else "PodResizePending"
            reason = None if hold == "InProgress" else hold
            condition = kept.get(kind)
            if condition is None or condition.get("reason") != reason:
                condition = _condition(kind, True, rfc3339(now), reason)
                if hold == "Infeasible":
                    condition["message"] = "Node didn't have enough capacity"
            conditions.append(condition)
        new["conditions"] = conditions
        if new == status:
            return False
        return self._write_status(pod, new)

    def hold_resize(self, namespace: str, name: str, state: str) -> None:
        """Hold this pod's resizes in ``state`` (one of ``RESIZE_HOLDS``) until released."""
        if state not in RESIZE_HOLDS:
            raise ValueError(f"a resize is held as one of {RESIZE_HOLDS}, not {state!r}")
        self.resize_holds[(namespace, name)] = state
        self.mark(namespace, name)

    def release_resize(self, namespace: str, name: str) -> None:
        """Let this pod's resize finish: the spec's resources become the applied ones."""
        self.resize_holds.pop((namespace, name), None)
        self.mark(namespace, name)

    def _readiness(self, pod: Obj, sim: PodSim, now: datetime) -> bool:
        if (pod.get("status") or {}).get("phase") != "Running" or sim.started_at is None:
            return False
        want = sim.forced_ready if sim.forced_ready is not None else \
            now >= sim.started_at + timedelta(seconds=sim.timing.ready_delay)
        if want == is_ready(pod):
            return False
        sim.ready_since = now if want else None
        status = json_copy(pod["status"])
        when = rfc3339(now)
        for cond in status["conditions"]:
            if cond["type"] in ("Ready", "ContainersReady"):
                cond.update(status="True" if want else "False", lastTransitionTime=when)
                if want:
                    cond.pop("reason", None)
                else:
                    cond["reason"] = "ContainersNotReady"
        for container in status.get("containerStatuses") or []:
            container["ready"] = want
        return self._write_status(pod, status)

    def _bind(self, pod: Obj) -> bool:
        new = json_copy(pod)
        new["spec"]["nodeName"] = "sim-node-1"
        new.setdefault("status", {}).setdefault("conditions", []).append(
            _condition("PodScheduled", True, rfc3339(self.now())))
        self.store.replace(PODS, new, echo=False, adopt=True)
        return True

    def _accept(self, pod: Obj) -> bool:
        when = rfc3339(self.now())
        self._ip += 1
        status = json_copy(pod.get("status") or {})
        status.update(hostIP="10.0.0.1", hostIPs=[{"ip": "10.0.0.1"}], startTime=when,
                      podIP=f"10.244.{self._ip // 250}.{self._ip % 250 + 2}")
        status["podIPs"] = [{"ip": status["podIP"]}]
        status["conditions"] = [
            _condition("PodReadyToStartContainers", False, when),
            _condition("Initialized", True, when),
            _condition("Ready", False, when, "ContainersNotReady"),
            _condition("ContainersReady", False, when, "ContainersNotReady"),
            *[c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"]]
        status["containerStatuses"] = [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False,
             "restartCount": 0, "started": False,
             "state": {"waiting": {"reason": "ContainerCreating"}}}
            for c in pod["spec"].get("containers") or []]
        return self._write_status(pod, status)

    def _running(self, pod: Obj, now: datetime) -> Obj:
        when = rfc3339(now)
        status: Obj = json_copy(pod["status"])
        status["phase"] = "Running"
        for cond in status["conditions"]:
            if cond["type"] == "PodReadyToStartContainers":
                cond.update(status="True", lastTransitionTime=when)
        spec = {c["name"]: c for c in pod["spec"].get("containers") or []}
        for container in status["containerStatuses"]:
            container.update(started=True, containerID=f"containerd://{random_suffix(12)}",
                             state={"running": {"startedAt": when}})
            applied = _applied(spec.get(container["name"]) or {})
            container.update(resources=applied,
                             allocatedResources=json_copy(applied.get("requests") or {}))
        return status

    def _write_status(self, pod: Obj, status: Obj) -> bool:
        new = {**pod, "status": status}  # the store copies what it keeps
        self.store.replace(PODS, new, echo=False, adopt=True)
        return True


    def set_phase(self, namespace: str, name: str, phase: str) -> None:
        """A container exited (Failed/Succeeded) or the node stopped reporting (Unknown)."""
        pod = self.store.peek(PODS, namespace, name)
        if pod is None:
            raise KeyError(f"no pod {namespace}/{name}")
        status = json_copy(pod.get("status") or {})
        status["phase"] = phase
        when = rfc3339(self.now())
        for cond in status.get("conditions") or []:
            if cond["type"] in ("Ready", "ContainersReady") and cond["status"] == "True":
                cond.update(status="False", lastTransitionTime=when, reason="PodFailed"
                            if phase == "Failed" else "PodCompleted")
        for container in status.get("containerStatuses") or []:
            container["ready"] = False
        sim = self.pods.setdefault((namespace, name), PodSim(timing=self.defaults,
                                                             seen_at=self.now()))
        sim.forced_ready = False
        self._schedule((namespace, name))
        self._write_status(pod, status)

    def force_ready(self, namespace: str, name: str, ready: bool | None) -> None:
        sim = self.pods.setdefault((namespace, name), PodSim(timing=self.defaults,
                                                             seen_at=self.now()))
        sim.forced_ready = ready
        self._schedule((namespace, name))
        self.mark(namespace, name)
