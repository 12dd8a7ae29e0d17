"""Simulated controllers: workloads make and remove pods, their status follows the pods.

For every StatefulSet, ReplicaSet and Rollout the controller keeps as many active pods as
``spec.replicas`` says; Deployments go through ReplicaSets (deployments.py), as upstream. A scale-down picks victims as the ReplicaSet controller ranks
them (unscheduled, pending, not ready, newest first); StatefulSets create and remove ordinals
one at a time under ``OrderedReady`` and all at once under ``Parallel``. Workload status (replicas, readyReplicas, selector, ...)
follows. Time comes from the injected clock, so a ``ManualClock`` test advances it instead of
sleeping. The controllers and the kubelet (kubelet.py) run as one background task that
wakes on every store change and when the next pod transition is due.

As real controllers, they work from queues keyed by object: a store change enqueues the
changed workload, the workloads owning the changed object (found through the store's uid
index) and, for pods and ReplicaSets, an orphan check; a pass reconciles only what is queued
(plus workloads whose last reconcile failed, retried every pass as before). A pass costs
what changed, not the size of the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .clock import ManualClock, rfc3339
from .deployments import Deployments, controller_uid
from .errors import ApiError
from .kubelet import Kubelet, PodTiming, is_ready
from .resources import ResourceType
from .scale import spec_replicas
from .selectors import format_label_selector, get_path, set_path
from .store import Change, Key, Slot, json_copy

if TYPE_CHECKING:
    from .server import SimApiServer

Obj = dict[str, Any]
PODS = ("", "pods")


def template_hash(template: Any) -> str:
    digest = hashlib.sha256(repr(template).encode()).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[b % len(alphabet)] for b in digest[:10])


# Status fields with `json:",omitempty"` in upstream's Go types, per workload kind.
_OMITEMPTY = {
    "statefulset": ("observedGeneration", "readyReplicas", "currentReplicas",
                    "updatedReplicas"),
    "replicaset": ("observedGeneration", "fullyLabeledReplicas", "readyReplicas",
                   "availableReplicas"),
    "replicationcontroller": ("observedGeneration", "fullyLabeledReplicas", "readyReplicas",
                              "availableReplicas"),
}


def is_active(pod: Obj) -> bool:
    """controller.FilterActivePods: not terminating, not Succeeded or Failed."""
    return not pod["metadata"].get("deletionTimestamp") and (
        pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class Workloads:
    def __init__(self, server: SimApiServer) -> None:
        self.server = server
        self.kubelet = Kubelet(server.store, server.clock)
        self.deployments = Deployments(server, template_hash)
        self.timings: dict[tuple[str, str, str], PodTiming] = {}
        self.failures: set[tuple[str, str]] = set()
        self._wake = asyncio.Event()
        self._queue: dict[Slot, None] = {}  # ordered sets of storage slots
        self._failing: dict[Slot, None] = {}
        self._orphan_checks: dict[Slot, None] = {}
        self._types_version = -1
        self._types: dict[Key, ResourceType] = {}
        self._collectable: set[Key] = set()
        server.store.listeners.append(self._on_change)
        if isinstance(server.clock, ManualClock):
            server.clock.on_advance.append(self._wake.set)

    def _workload_types(self) -> dict[Key, ResourceType]:
        """Workload types by storage key (cached until the registry changes)."""
        registry = self.server.registry
        if self._types_version != registry.version:
            self._types = {}
            for rt in registry:
                if rt.workload:
                    self._types.setdefault(rt.storage_key, rt)
            self._collectable = {rt.storage_key for rt in registry
                                 if rt.kind in ("Pod", "ReplicaSet")}
            self._types_version = registry.version
        return self._types

    def _on_change(self, change: Change) -> None:
        """Enqueue what this change can affect (the work queues of the controllers)."""
        self._wake.set()
        types, store = self._workload_types(), self.server.store
        meta = change.new["metadata"]
        slot: Slot = (change.key, meta.get("namespace", ""), meta["name"])
        deleted = change.type == "DELETED"
        if change.key in types and not deleted:
            self._queue[slot] = None
        for obj in (change.old, change.new):
            for ref in (obj or {}).get("metadata", {}).get("ownerReferences") or []:
                uid = ref.get("uid") if isinstance(ref, dict) else None
                owner = store.locate(uid) if isinstance(uid, str) else None
                if owner is not None and owner[0] in types:
                    self._queue[owner] = None
        if change.key in self._collectable and not deleted:
            self._orphan_checks[slot] = None
        if deleted and isinstance(gone := meta.get("uid"), str):
            for key in self._collectable:
                for child in store.children(gone, key):
                    cmeta = child["metadata"]
                    self._orphan_checks[(key, cmeta.get("namespace", ""), cmeta["name"])] = None
        if change.key == PODS:
            if deleted:
                self.kubelet.forget(slot[1], slot[2])
            else:
                self.kubelet.mark(slot[1], slot[2])

    def now(self) -> datetime:
        return self.server.clock.now()

    # the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            self._wake.clear()
            self.settle()
            due = self.kubelet.next_due()
            delay = self.server.clock.seconds_until(due) if due else None
            if delay is not None:
                delay = max(delay, 0.005)  # never spin, even if a due step changes nothing
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    def settle(self, max_passes: int = 1000) -> None:
        """Run passes until nothing changes (what is due now has happened). Each pass
        costs what changed, so the bound only stops a simulator bug from looping forever."""
        for _ in range(max_passes):
            if not self.step():
                return

    def step(self) -> bool:
        """One pass: reconcile the queued workloads, collect orphans, run the kubelet.
        True if it wrote something or left work queued."""
        store = self.server.store
        before = store.resource_version
        types = self._workload_types()
        work, self._queue = self._queue, {}
        work.update(self._failing)
        for slot in work:
            rt, obj = types.get(slot[0]), store.peek(*slot)
            if rt is None or obj is None:
                self._failing.pop(slot, None)
                continue
            try:
                self._reconcile(rt, obj)
                self._failing.pop(slot, None)
            except ApiError as error:  # e.g. a template the pod validation refuses
                self._failing[slot] = None
                self._report(rt, obj, error)
        self._collect_orphans()
        self.kubelet.step()
        return store.resource_version != before or bool(self._queue or self._orphan_checks)

    def _report(self, rt: ResourceType, obj: Obj, error: ApiError) -> bool:
        """A Warning event on the workload, once per distinct failure, as controllers record."""
        meta = obj["metadata"]
        key = (meta["uid"], f"{error.code} {error.reason}")
        if key in self.failures:
            return False
        self.failures.add(key)
        self.server.rest.create(self.server.resource("v1", "Event"), meta["namespace"], {
            "metadata": {"generateName": f"{meta['name']}."},
            "involvedObject": {"apiVersion": rt.api_version, "kind": rt.kind,
                               "name": meta["name"], "namespace": meta["namespace"],
                               "uid": meta["uid"]},
            "reason": "FailedCreate", "type": "Warning", "count": 1,
            "message": f"Error creating: {error.message}",
            "source": {"component": f"{rt.singular}-controller"},
            "firstTimestamp": rfc3339(self.server.clock.now()),
            "lastTimestamp": rfc3339(self.server.clock.now())})
        return True

    # controllers -------------------------------------------------------------------------
    def timing_for(self, rt: ResourceType, namespace: str, name: str) -> PodTiming:
        return self.timings.get((rt.plural, namespace, name), self.kubelet.defaults)

    def _owned(self, obj: Obj) -> list[Obj]:
        """Pods with an ownerReference to ``obj`` (read-only stored objects)."""
        namespace = obj["metadata"]["namespace"]
        return [p for p in self.server.store.children(obj["metadata"]["uid"], PODS)
                if p["metadata"].get("namespace") == namespace]

    def _reconcile(self, rt: ResourceType, obj: Obj) -> bool:
        if obj["metadata"].get("deletionTimestamp"):
            return False
        if rt.workload == "deployment":
            return self.deployments.reconcile(rt, obj)
        pods = self._owned(obj)
        active = [p for p in pods if is_active(p)]
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
        phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(status.get("phase")), 0)
        sim = self.kubelet.pods.get((meta["namespace"], meta["name"]))
        ready_since = sim.ready_since.timestamp() if sim and sim.ready_since else 0.0
        created = datetime.fromisoformat(meta["creationTimestamp"]).timestamp()
        return (bool((pod.get("spec") or {}).get("nodeName")), phase_rank, is_ready(pod),
                -ready_since, -created)

    def _create_pod(self, rt: ResourceType, obj: Obj, name: str | None) -> None:
        meta, template = obj["metadata"], json_copy(get_path(obj, "spec.template") or {})
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        pod_meta: Obj = {"labels": labels, "ownerReferences": [{
            "apiVersion": rt.api_version, "kind": rt.kind, "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]}
        if annotations := (template.get("metadata") or {}).get("annotations"):
            pod_meta["annotations"] = dict(annotations)
        if rt.workload == "statefulset" and name is not None:
            pod_meta["name"] = name
            labels.update({"statefulset.kubernetes.io/pod-name": name,
                           "apps.kubernetes.io/pod-index": name.rsplit("-", 1)[1],
                           "controller-revision-hash": f"{meta['name']}-"
                                                       f"{template_hash(template)}"})
        elif rt.workload in ("replicaset", "replicationcontroller"):
            pod_meta["generateName"] = f"{meta['name']}-"
        else:  # a Rollout: its own pods, labelled as Argo labels them
            digest = template_hash(template)
            labels["rollouts-pod-template-hash"] = digest
            pod_meta["generateName"] = f"{meta['name']}-{digest}-"
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
                "spec": template.get("spec") or {"containers": [{"name": "app",
                                                                 "image": "app:1"}]}}
        pods_rt = self.server.registry.lookup("", "v1", "pods")
        assert pods_rt is not None
        pod = self.server.rest.create(pods_rt, meta["namespace"], body)
        self.kubelet.track(meta["namespace"], pod["metadata"]["name"],
                           self.timing_for(rt, meta["namespace"], meta["name"]))

    def _delete_pod(self, pod: Obj) -> None:
        pods_rt = self.server.registry.lookup("", "v1", "pods")
        assert pods_rt is not None
        self.server.rest.delete(pods_rt, pod["metadata"]["namespace"], pod["metadata"]["name"],
                                {}, None)

    def _collect_orphans(self) -> None:
        """The garbage collector: pods and ReplicaSets whose controller is gone are deleted."""
        types, store = self._workload_types(), self.server.store
        checks, self._orphan_checks = self._orphan_checks, {}
        for slot in checks:
            obj = store.peek(*slot)
            uid = controller_uid(obj) if obj is not None else None
            if obj is None or uid is None or obj["metadata"].get("deletionTimestamp"):
                continue
            owner = store.locate(uid)
            if owner is None or owner[0] not in types:
                rt = next(t for t in self.server.registry.by_storage(slot[0])
                          if t.kind in ("Pod", "ReplicaSet"))
                self.server.rest.delete(rt, obj["metadata"]["namespace"],
                                        obj["metadata"]["name"], {}, None)

    def _update_status(self, rt: ResourceType, obj: Obj, pods: list[Obj]) -> bool:
        active = [p for p in pods if is_active(p)]
        ready = sum(1 for p in active if is_ready(p))
        status: Obj = json_copy(obj.get("status") or {})
        status.update(observedGeneration=obj["metadata"].get("generation", 1),
                      replicas=len(active), readyReplicas=ready, availableReplicas=ready)
        if rt.workload in ("replicaset", "replicationcontroller"):
            status["fullyLabeledReplicas"] = len(active)
        else:
            status["updatedReplicas"] = len(active)
        if rt.workload == "statefulset":
            status["currentReplicas"] = len(active)
        if rt.workload == "rollout":
            status["selector"] = format_label_selector(get_path(obj, "spec.selector"))
        for key in _OMITEMPTY.get(rt.workload or "", ()):
            if status.get(key) == 0:
                status.pop(key)  # int32 fields tagged omitempty vanish at zero, as upstream
        if rt.scale is not None and rt.scale.status_replicas_path != ".status.replicas":
            set_path(status, rt.scale.status_replicas_path.removeprefix(".status."), len(active))
        if status == (obj.get("status") or {}):
            return False
        self.server.store.replace(rt.storage_key, {**obj, "status": status}, echo=False,
                                  adopt=True)
        return True


    # test controls -----------------------------------------------------------------------
    @property
    def defaults(self) -> PodTiming:
        return self.kubelet.defaults

    @defaults.setter
    def defaults(self, timing: PodTiming) -> None:
        self.kubelet.defaults = timing

    def force_ready(self, namespace: str, name: str, ready: bool | None) -> None:
        self.kubelet.force_ready(namespace, name, ready)
        self._wake.set()
