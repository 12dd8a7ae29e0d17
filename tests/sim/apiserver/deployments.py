"""The Deployment controller, simulated: a Deployment runs its pods through a ReplicaSet.

As upstream, the ReplicaSet is named ``<deployment>-<pod-template-hash>``, carries the hash in
its labels, selector and pod template, is controlled by the Deployment, and gets the
Deployment's replicas; the ReplicaSet controller (workloads.py) makes the pods. A template
change creates a new ReplicaSet and scales the old ones to zero at once (a rollout without
surge steps). The Deployment's status sums its ReplicaSets' and carries the Available and
Progressing conditions that ``kubectl rollout status`` and ``describe`` read.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .clock import rfc3339
from .resources import ResourceType
from .scale import spec_replicas

if TYPE_CHECKING:
    from .server import SimApiServer

Obj = dict[str, Any]
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"


def controller_uid(obj: Obj) -> str | None:
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
    return refs[0].get("uid") if refs else None


def _owner_ref(rt: ResourceType, obj: Obj) -> Obj:
    return {"apiVersion": rt.api_version, "kind": rt.kind, "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _max_unavailable(deploy: Obj, want: int) -> int:
    value = ((deploy["spec"].get("strategy") or {}).get("rollingUpdate") or {}).get(
        "maxUnavailable", "25%")
    return want * int(value[:-1]) // 100 if isinstance(value, str) else int(value)


class Deployments:
    def __init__(self, server: SimApiServer, template_hash: Any) -> None:
        self.server, self._hash = server, template_hash

    @property
    def rs_type(self) -> ResourceType:
        rt = self.server.registry.lookup("apps", "v1", "replicasets")
        assert rt is not None
        return rt

    def owned(self, deploy: Obj) -> list[Obj]:
        """ReplicaSets the Deployment controls (read-only stored objects, by name)."""
        uid, namespace = deploy["metadata"]["uid"], deploy["metadata"]["namespace"]
        return [rs for rs in self.server.store.children(uid, self.rs_type.storage_key)
                if controller_uid(rs) == uid and rs["metadata"].get("namespace") == namespace]

    def reconcile(self, rt: ResourceType, deploy: Obj) -> bool:
        want, owned = spec_replicas(rt, deploy), self.owned(deploy)
        name = f"{deploy['metadata']['name']}-{self._hash(deploy['spec'].get('template'))}"
        changed = False
        current = next((rs for rs in owned if rs["metadata"]["name"] == name), None)
        if current is None:
            self._create(rt, deploy, name, want, owned)
            changed = True
        for rs in owned:
            target = want if rs["metadata"]["name"] == name else 0
            if rs["spec"].get("replicas") != target:
                scaled = {**rs, "spec": {**rs["spec"], "replicas": target}}  # rs is stored
                self.server.rest.update(self.rs_type, rs["metadata"]["namespace"],
                                        rs["metadata"]["name"], scaled)
                changed = True
        return self._annotate(deploy, name) or self._status(deploy, want, name) or changed

    def _annotate(self, deploy: Obj, new_name: str) -> bool:
        """The Deployment carries its new ReplicaSet's revision, as upstream writes it."""
        new = next((rs for rs in self.owned(deploy) if rs["metadata"]["name"] == new_name), None)
        revision = ((new or {}).get("metadata", {}).get("annotations") or {}).get(REVISION)
        annotations = deploy["metadata"].get("annotations") or {}
        if revision is None or annotations.get(REVISION) == revision:
            return False
        updated = {**deploy, "metadata": {**deploy["metadata"],
                                          "annotations": {**annotations, REVISION: revision}}}
        self.server.store.replace(("apps", "deployments"), updated, echo=False,
                                  adopt=True)
        return True

    def _create(self, rt: ResourceType, deploy: Obj, name: str, want: int,
                owned: list[Obj]) -> None:
        digest = name.rsplit("-", 1)[1]
        template = copy.deepcopy(deploy["spec"].get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
        selector = copy.deepcopy(deploy["spec"].get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        revision = 1 + max((int(rs["metadata"].get("annotations", {}).get(REVISION, 0))
                            for rs in owned), default=0)
        namespace = deploy["metadata"]["namespace"]
        timing = self.server.workloads.timings.get(("deployments", namespace,
                                                    deploy["metadata"]["name"]))
        if timing is not None:
            self.server.workloads.timings[("replicasets", namespace, name)] = timing
        self.server.rest.create(self.rs_type, namespace, {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "labels": dict(template["metadata"]["labels"]),
                         "annotations": {"deployment.kubernetes.io/desired-replicas": str(want),
                                         REVISION: str(revision)},
                         "ownerReferences": [_owner_ref(rt, deploy)]},
            "spec": {"replicas": want, "selector": selector, "template": template}})

    def _status(self, deploy: Obj, want: int, new_name: str) -> bool:
        owned = self.owned(deploy)
        total = {k: sum((rs.get("status") or {}).get(k, 0) for rs in owned)
                 for k in ("replicas", "readyReplicas", "availableReplicas")}
        new = next((rs for rs in owned if rs["metadata"]["name"] == new_name), {})
        status: Obj = {"observedGeneration": deploy["metadata"].get("generation", 1), **total,
                       "updatedReplicas": (new.get("status") or {}).get("replicas", 0),
                       "unavailableReplicas": max(want - total["availableReplicas"], 0)}
        status = {k: v for k, v in status.items() if v}  # all omitempty in DeploymentStatus
        old = deploy.get("status") or {}
        status["conditions"] = self._conditions(deploy, status, want, new_name,
                                                old.get("conditions") or [])
        if status == old:
            return False
        self.server.store.replace(("apps", "deployments"), {**deploy, "status": status},
                                  echo=False, adopt=True)
        return True

    def _conditions(self, deploy: Obj, status: Obj, want: int, new_name: str,
                    previous: list[Obj]) -> list[Obj]:
        available = status.get("availableReplicas", 0)
        done = status.get("updatedReplicas", 0) == want and available >= want
        wanted = [
            ("Available", available >= want - _max_unavailable(deploy, want),
             ("MinimumReplicasAvailable", "Deployment has minimum availability.")
             if available >= want - _max_unavailable(deploy, want) else
             ("MinimumReplicasUnavailable", "Deployment does not have minimum availability.")),
            ("Progressing", True,
             ("NewReplicaSetAvailable", f'ReplicaSet "{new_name}" has successfully progressed.')
             if done else ("ReplicaSetUpdated", f'ReplicaSet "{new_name}" is progressing.')),
        ]
        now = rfc3339(self.server.clock.now())
        out = []
        for kind, ok, (reason, message) in wanted:
            before = next((c for c in previous if c["type"] == kind), None)
            state = "True" if ok else "False"
            cond = {"type": kind, "status": state, "lastUpdateTime": now,
                    "lastTransitionTime": now, "reason": reason, "message": message}
            if before is not None and before["status"] == state:
                cond["lastTransitionTime"] = before["lastTransitionTime"]
                if (before["reason"], before["message"]) == (reason, message):
                    cond["lastUpdateTime"] = before["lastUpdateTime"]
            out.append(cond)
        return out
