"""Controllers and a kubelet, simulated: workloads make pods, pods start, turn Ready and go away.

For every Deployment, StatefulSet, ReplicaSet and Rollout the controller keeps as many active
pods as ``spec.replicas`` says (pods are owned by the workload directly: Deployments do not
materialize ReplicaSets here). A scale-down picks victims as the ReplicaSet controller ranks
them (unscheduled, pending, not ready, newest first); StatefulSets create and remove ordinals
one at a time under ``OrderedReady`` and all at once under ``Parallel``. The kubelet side takes
each pod through bound -> Pending (ContainerCreating) -> Running (Ready False) -> Ready True
after ``start_delay`` and ``ready_delay``, and removes a deleted pod ``termination_delay``
after its deletionTimestamp was set. Workload status (replicas, readyReplicas, selector, ...)
follows. Time comes from the injected clock, so a ``ManualClock`` test advances it instead of
sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .clock import ManualClock, rfc3339
from .resources import ResourceType
from .rest import random_suffix
from .scale import spec_replicas
from .selectors import format_label_selector, get_path, set_path
from .store import Change

if TYPE_CHECKING:
    from .server import SimApiServer

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


def template_hash(template: Any) -> str:
    digest = hashlib.sha256(repr(template).encode()).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[b % len(alphabet)] for b in digest[:10])


def _condition(type_: str, status: bool, when: str, reason: str | None = None) -> Obj:
    cond: Obj = {"type": type_, "status": "True" if status else "False", "lastProbeTime": None,
                 "lastTransitionTime": when}
    if reason:
        cond["reason"] = reason
    return cond


def is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


class Workloads:
    def __init__(self, server: SimApiServer) -> None:
        self.server = server
        self.defaults = PodTiming()
        self.timings: dict[tuple[str, str, str], PodTiming] = {}
        self.pods: dict[tuple[str, str], PodSim] = {}
        self._wake = asyncio.Event()
        self._ip = 0
        server.store.listeners.append(self._on_change)
        if isinstance(server.clock, ManualClock):
            server.clock.on_advance.append(self._wake.set)

    def _on_change(self, change: Change) -> None:
        self._wake.set()

    def now(self) -> datetime:
        return self.server.clock.now()

    # the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            self._wake.clear()
            self.settle()
            due = self._next_due()
            delay = self.server.clock.seconds_until(due) if due else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    def settle(self, max_passes: int = 50) -> None:
        """Run passes until nothing changes (what is due now has happened)."""
        for _ in range(max_passes):
            if not self.step():
                return

    def step(self) -> bool:
        changed = False
        for rt in self.server.registry:
            if rt.workload:
                for obj in self.server.store.list(rt.storage_key):
                    changed |= self._reconcile(rt, obj)
        changed |= self._collect_orphans()
        for pod in self.server.store.list(PODS):
            changed |= self._kubelet(pod)
        return changed

    def _next_due(self) -> datetime | None:
        times = []
        for sim in self.pods.values():
            t = sim.timing
            if sim.deleting_since is not None:
                times.append(sim.deleting_since + timedelta(seconds=t.termination_delay))
            elif sim.started_at is None:
                times.append(sim.seen_at + timedelta(seconds=t.start_delay))
            elif sim.forced_ready is None and sim.ready_since is None:
                times.append(sim.started_at + timedelta(seconds=t.ready_delay))
        return min(times) if times else None

    # controllers -------------------------------------------------------------------------
    def timing_for(self, rt: ResourceType, namespace: str, name: str) -> PodTiming:
        return self.timings.get((rt.plural, namespace, name), self.defaults)

    def _owned(self, obj: Obj) -> list[Obj]:
        uid = obj["metadata"]["uid"]
        return [p for p in self.server.store.list(PODS, obj["metadata"]["namespace"])
                if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]

    def _reconcile(self, rt: ResourceType, obj: Obj) -> bool:
        if obj["metadata"].get("deletionTimestamp"):
            return False
        pods = self._owned(obj)
        active = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        want = spec_replicas(rt, obj)
        changed = False
        if rt.workload == "statefulset":
            changed = self._reconcile_ordinals(rt, obj, pods, want)
        elif len(active) < want:
            for _ in range(want - len(active)):
                self._create_pod(rt, obj, None)
            changed = True
        elif len(active) > want:
            for pod in sorted(active, key=self._deletion_rank)[: len(active) - want]:
                self._delete_pod(pod)
            changed = True
        return self._update_status(rt, obj, self._owned(obj)) or changed

    def _reconcile_ordinals(self, rt: ResourceType, obj: Obj, pods: list[Obj], want: int) -> bool:
        name = obj["metadata"]["name"]
        by_ordinal = {int(p["metadata"]["name"].rsplit("-", 1)[1]): p for p in pods}
        parallel = (obj.get("spec") or {}).get("podManagementPolicy") == "Parallel"
        changed = False
        for ordinal in range(want):
            if ordinal not in by_ordinal:
                if not parallel and not all(is_ready(by_ordinal[o]) and not by_ordinal[o][
                        "metadata"].get("deletionTimestamp") for o in range(ordinal)
                        if o in by_ordinal):
                    break
                if not parallel and any(o not in by_ordinal for o in range(ordinal)):
                    break
                self._create_pod(rt, obj, f"{name}-{ordinal}")
                changed = True
                if not parallel:
                    break
        extra = sorted((o for o in by_ordinal if o >= want), reverse=True)
        for ordinal in extra:
            pod = by_ordinal[ordinal]
            if not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(pod)
                changed = True
            if not parallel:
                break
        return changed

    def _deletion_rank(self, pod: Obj) -> tuple[Any, ...]:
        """ReplicaSet controller order: unassigned, pending, not ready, recently ready, newest."""
        status, meta = pod.get("status") or {}, pod["metadata"]
        phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(status.get("phase"), 0)
        sim = self.pods.get((meta["namespace"], meta["name"]))
        ready_since = sim.ready_since.timestamp() if sim and sim.ready_since else 0.0
        created = datetime.fromisoformat(meta["creationTimestamp"]).timestamp()
        return (bool((pod.get("spec") or {}).get("nodeName")), phase_rank, is_ready(pod),
                -ready_since, -created)

    def _create_pod(self, rt: ResourceType, obj: Obj, name: str | None) -> None:
        meta, template = obj["metadata"], copy.deepcopy(get_path(obj, "spec.template") or {})
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        pod_meta: Obj = {"labels": labels, "ownerReferences": [{
            "apiVersion": rt.api_version, "kind": rt.kind, "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]}
        if annotations := (template.get("metadata") or {}).get("annotations"):
            pod_meta["annotations"] = dict(annotations)
        if rt.workload == "statefulset":
            pod_meta["name"] = name
            labels.update({"statefulset.kubernetes.io/pod-name": name,
                           "apps.kubernetes.io/pod-index": name.rsplit("-", 1)[1],
                           "controller-revision-hash": f"{meta['name']}-"
                                                       f"{template_hash(template)}"})
        elif rt.workload == "replicaset":
            pod_meta["generateName"] = f"{meta['name']}-"
        else:
            digest = template_hash(template)
            labels["pod-template-hash" if rt.workload == "deployment"
                   else "rollouts-pod-template-hash"] = digest
            pod_meta["generateName"] = f"{meta['name']}-{digest}-"
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
                "spec": template.get("spec") or {"containers": [{"name": "app",
                                                                 "image": "app:1"}]}}
        pods_rt = self.server.registry.lookup("", "v1", "pods")
        assert pods_rt is not None
        pod = self.server.rest.create(pods_rt, meta["namespace"], body)
        self.pods[(meta["namespace"], pod["metadata"]["name"])] = PodSim(
            timing=self.timing_for(rt, meta["namespace"], meta["name"]), seen_at=self.now())

    def _delete_pod(self, pod: Obj) -> None:
        pods_rt = self.server.registry.lookup("", "v1", "pods")
        assert pods_rt is not None
        self.server.rest.delete(pods_rt, pod["metadata"]["namespace"], pod["metadata"]["name"],
                                {}, None)

    def _collect_orphans(self) -> bool:
        """The garbage collector: pods whose controlling workload is gone are deleted."""
        uids = {o["metadata"]["uid"] for rt in self.server.registry if rt.workload
                for o in self.server.store.list(rt.storage_key)}
        changed = False
        for pod in self.server.store.list(PODS):
            refs = [r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")]
            if refs and refs[0].get("uid") not in uids and not pod["metadata"].get(
                    "deletionTimestamp") and self.server.registry.by_kind(
                    refs[0].get("apiVersion", ""), refs[0].get("kind", "")) is not None:
                self._delete_pod(pod)
                changed = True
        return changed

    def _update_status(self, rt: ResourceType, obj: Obj, pods: list[Obj]) -> bool:
        active = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in active if is_ready(p))
        want = spec_replicas(rt, obj)
        status: Obj = copy.deepcopy(obj.get("status") or {})
        status.update(observedGeneration=obj["metadata"].get("generation", 1),
                      replicas=len(active), readyReplicas=ready, availableReplicas=ready)
        if rt.workload == "replicaset":
            status["fullyLabeledReplicas"] = len(active)
        else:
            status["updatedReplicas"] = len(active)
        if rt.workload == "deployment":
            status["unavailableReplicas"] = max(want - ready, 0)
        if rt.workload == "statefulset":
            status["currentReplicas"] = len(active)
        if rt.workload == "rollout":
            status["selector"] = format_label_selector(get_path(obj, "spec.selector"))
        for key in ("readyReplicas", "availableReplicas", "unavailableReplicas", "updatedReplicas"):
            if status.get(key) == 0 and rt.workload != "rollout":
                status.pop(key)  # omitempty int32 fields, as upstream serializes them
        if rt.scale is not None and rt.scale.status_replicas_path != ".status.replicas":
            set_path(status, rt.scale.status_replicas_path.removeprefix(".status."), len(active))
        if status == (obj.get("status") or {}):
            return False
        new = copy.deepcopy(obj)
        new["status"] = status
        self.server.store.replace(rt.storage_key, new)
        return True

    # kubelet -----------------------------------------------------------------------------
    def _kubelet(self, pod: Obj) -> bool:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        sim = self.pods.setdefault(key, PodSim(timing=self.defaults, seen_at=self.now()))
        now = self.now()
        if meta.get("deletionTimestamp"):
            sim.deleting_since = sim.deleting_since or now
            if now >= sim.deleting_since + timedelta(seconds=sim.timing.termination_delay):
                self.server.store.delete(PODS, *key)
                self.pods.pop(key, None)
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
        return self._readiness(pod, sim, now)

    def _readiness(self, pod: Obj, sim: PodSim, now: datetime) -> bool:
        if (pod.get("status") or {}).get("phase") != "Running" or sim.started_at is None:
            return False
        want = sim.forced_ready if sim.forced_ready is not None else \
            now >= sim.started_at + timedelta(seconds=sim.timing.ready_delay)
        if want == is_ready(pod):
            return False
        sim.ready_since = now if want else None
        status = copy.deepcopy(pod["status"])
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
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = "sim-node-1"
        new.setdefault("status", {}).setdefault("conditions", []).append(
            _condition("PodScheduled", True, rfc3339(self.now())))
        self.server.store.replace(PODS, new)
        return True

    def _accept(self, pod: Obj) -> bool:
        when = rfc3339(self.now())
        self._ip += 1
        status = copy.deepcopy(pod.get("status") or {})
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
        status = copy.deepcopy(pod["status"])
        status["phase"] = "Running"
        for cond in status["conditions"]:
            if cond["type"] == "PodReadyToStartContainers":
                cond.update(status="True", lastTransitionTime=when)
        for container in status["containerStatuses"]:
            container.update(started=True, containerID=f"containerd://{random_suffix(12)}",
                             state={"running": {"startedAt": when}})
        return status

    def _write_status(self, pod: Obj, status: Obj) -> bool:
        new = copy.deepcopy(pod)
        new["status"] = status
        self.server.store.replace(PODS, new)
        return True

    # test controls -----------------------------------------------------------------------
    def force_ready(self, namespace: str, name: str, ready: bool | None) -> None:
        sim = self.pods.setdefault((namespace, name), PodSim(timing=self.defaults,
                                                             seen_at=self.now()))
        sim.forced_ready = ready
        self._wake.set()
