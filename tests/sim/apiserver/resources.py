"""The resource types the simulated API server serves, as discovery describes them.

A ``ResourceType`` is one (group, version, plural) with everything the server needs to route,
discover, validate and print it. ``Registry`` is the mutable set of them: tests may add a custom
resource at run time (a target kind that appears after the daemon started) and discovery follows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SUBRESOURCE_VERBS = ("get", "patch", "update")
WorkloadStyle = str  # "deployment" | "statefulset" | "replicaset" | "replicationcontroller" | "rollout"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleSpec:
    """Where a resource keeps what its /scale subresource shows (the CRD's ``scale`` block).

    ``label_selector_path`` None means a built-in: the selector string is computed from
    ``spec.selector`` as upstream's scale storage does.
    """

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = ".status.selector"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrinterColumn:
    """A column of server-side Table output; ``path`` is a dotted JSON path or a key of tables.py."""

    name: str
    path: str
    type: str = "string"
    priority: int = 0
    description: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool = True
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    scale: ScaleSpec | None = None
    custom: bool = False
    # metadata.generation exists only where upstream's strategy maintains it (workloads, HPAs, CRs).
    generation: bool = False
    # (group, plural) of another type whose storage this type is a view of (events.k8s.io).
    storage: tuple[str, str] | None = None
    workload: WorkloadStyle | None = None
    field_labels: dict[str, str] = field(default_factory=dict)
    printer_columns: tuple[PrinterColumn, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``deployments.apps`` or ``pods``, as upstream names it in Status messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage_key(self) -> tuple[str, str]:
        return self.storage or (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def path_prefix(self, namespace: str | None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else "/api/v1"
        return f"{root}/namespaces/{namespace}/{self.plural}" if namespace else f"{root}/{self.plural}"


_NAME_FIELDS = {"metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace"}
_POD_FIELDS = {
    **_NAME_FIELDS, "spec.nodeName": "spec.nodeName", "spec.restartPolicy": "spec.restartPolicy",
    "spec.schedulerName": "spec.schedulerName",
    "spec.serviceAccountName": "spec.serviceAccountName", "status.phase": "status.phase",
    "status.podIP": "status.podIP", "status.nominatedNodeName": "status.nominatedNodeName",
}
_EVENT_FIELDS = {
    **_NAME_FIELDS, **{f"involvedObject.{k}": f"involvedObject.{k}" for k in (
        "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": "reason", "reportingComponent": "reportingComponent", "source": "source.component",
    "type": "type",
}
_EVENTS_V1_FIELDS = {
    **_NAME_FIELDS, **{f"regarding.{k}": f"regarding.{k}" for k in (
        "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": "reason", "reportingController": "reportingController", "type": "type",
}
_WORKLOAD_SUBS = ("scale", "status")


def _builtin(**kwargs: object) -> ResourceType:
    kwargs.setdefault("field_labels", dict(_NAME_FIELDS))
    return ResourceType(**kwargs)  # type: ignore[arg-type]


def builtin_types() -> list[ResourceType]:
    """The built-in types, core first, in the order discovery lists them."""
    return [
        _builtin(group="", version="v1", kind="Pod", plural="pods", singular="pod",
                 short_names=("po",), categories=("all",), subresources=("resize", "status"),
                 field_labels=dict(_POD_FIELDS)),
        _builtin(group="", version="v1", kind="Event", plural="events", singular="event",
                 short_names=("ev",), field_labels=dict(_EVENT_FIELDS)),
        _builtin(group="", version="v1", kind="ConfigMap", plural="configmaps",
                 singular="configmap", short_names=("cm",)),
        _builtin(group="", version="v1", kind="Namespace", plural="namespaces",
                 singular="namespace", namespaced=False, short_names=("ns",),
                 verbs=tuple(v for v in ALL_VERBS if v != "deletecollection"),
                 subresources=("status",)),
        _builtin(group="", version="v1", kind="ReplicationController",
                 plural="replicationcontrollers", singular="replicationcontroller",
                 short_names=("rc",), categories=("all",), subresources=_WORKLOAD_SUBS,
                 scale=ScaleSpec(label_selector_path=None), generation=True,
                 workload="replicationcontroller"),
        # Stored as sent, with no behaviour (no eviction, no policy enforced): enough for
        # `kubectl apply` of a deploy/ directory, the PodDisruptionBudget and NetworkPolicy too.
        _builtin(group="", version="v1", kind="ServiceAccount", plural="serviceaccounts",
                 singular="serviceaccount", short_names=("sa",)),
        _builtin(group="", version="v1", kind="Service", plural="services", singular="service",
                 short_names=("svc",), categories=("all",), subresources=("status",)),
        *[_builtin(group="rbac.authorization.k8s.io", version="v1", kind=kind, plural=plural,
                   singular=plural[:-1], namespaced=namespaced)
          for kind, plural, namespaced in (
              ("Role", "roles", True), ("RoleBinding", "rolebindings", True),
              ("ClusterRole", "clusterroles", False),
              ("ClusterRoleBinding", "clusterrolebindings", False))],
        _builtin(group="policy", version="v1", kind="PodDisruptionBudget",
                 plural="poddisruptionbudgets", singular="poddisruptionbudget",
                 short_names=("pdb",), subresources=("status",), generation=True),
        _builtin(group="networking.k8s.io", version="v1", kind="NetworkPolicy",
                 plural="networkpolicies", singular="networkpolicy", short_names=("netpol",),
                 generation=True),
        _builtin(group="apps", version="v1", kind="Deployment", plural="deployments",
                 singular="deployment", short_names=("deploy",), categories=("all",),
                 subresources=_WORKLOAD_SUBS, scale=ScaleSpec(label_selector_path=None),
                 generation=True, workload="deployment"),
        _builtin(group="apps", version="v1", kind="StatefulSet", plural="statefulsets",
                 singular="statefulset", short_names=("sts",), categories=("all",),
                 subresources=_WORKLOAD_SUBS, scale=ScaleSpec(label_selector_path=None),
                 generation=True, workload="statefulset"),
        _builtin(group="apps", version="v1", kind="ReplicaSet", plural="replicasets",
                 singular="replicaset", short_names=("rs",), categories=("all",),
                 subresources=_WORKLOAD_SUBS, scale=ScaleSpec(label_selector_path=None),
                 generation=True, workload="replicaset"),
        _builtin(group="autoscaling", version="v2", kind="HorizontalPodAutoscaler",
                 plural="horizontalpodautoscalers", singular="horizontalpodautoscaler",
                 short_names=("hpa",), categories=("all",), subresources=("status",),
                 generation=True),
        _builtin(group="coordination.k8s.io", version="v1", kind="Lease", plural="leases",
                 singular="lease"),
        _builtin(group="authorization.k8s.io", version="v1", kind="SelfSubjectAccessReview",
                 plural="selfsubjectaccessreviews", singular="selfsubjectaccessreview",
                 namespaced=False, verbs=("create",)),
        _builtin(group="events.k8s.io", version="v1", kind="Event", plural="events",
                 singular="event", short_names=("ev",), storage=("", "events"),
                 field_labels=dict(_EVENTS_V1_FIELDS)),
    ]


def rollout_type(group: str = "example.com", version: str = "v1") -> ResourceType:
    """A custom resource shaped like Argo Rollouts: a /scale subresource and printer columns."""
    return ResourceType(
        group=group, version=version, kind="Rollout", plural="rollouts", singular="rollout",
        short_names=("ro",), categories=("all",), subresources=_WORKLOAD_SUBS, scale=ScaleSpec(),
        custom=True, generation=True, workload="rollout", field_labels=dict(_NAME_FIELDS),
        printer_columns=(
            PrinterColumn(name="Desired", path="spec.replicas", type="integer"),
            PrinterColumn(name="Current", path="status.replicas", type="integer"),
            PrinterColumn(name="Available", path="status.availableReplicas", type="integer"),
        ))


def argo_rollout_type() -> ResourceType:
    """Argo Rollouts' own CRD (argoproj.io/v1alpha1): its /scale reads status.HPAReplicas.

    Not served by default; ``server.add_custom_resource(argo_rollout_type())`` adds it, e.g. to
    prove that a client reads the Scale rather than assuming ``.status.replicas``.
    """
    return ResourceType(
        group="argoproj.io", version="v1alpha1", kind="Rollout", plural="rollouts",
        singular="rollout", short_names=("ro",), categories=("all",),
        subresources=_WORKLOAD_SUBS,
        scale=ScaleSpec(status_replicas_path=".status.HPAReplicas"), custom=True,
        generation=True, workload="rollout", field_labels=dict(_NAME_FIELDS),
        printer_columns=(
            PrinterColumn(name="Desired", path="spec.replicas", type="integer"),
            PrinterColumn(name="Current", path="status.replicas", type="integer"),
            PrinterColumn(name="Available", path="status.availableReplicas", type="integer"),
        ))


def scaledobject_type() -> ResourceType:
    """KEDA's ScaledObject (keda.sh/v1alpha1): no /scale of its own, only a status."""
    return ResourceType(
        group="keda.sh", version="v1alpha1", kind="ScaledObject", plural="scaledobjects",
        singular="scaledobject", short_names=("so",), subresources=("status",), custom=True,
        generation=True, field_labels=dict(_NAME_FIELDS),
        printer_columns=(
            PrinterColumn(name="ScaleTargetKind", path="status.scaleTargetKind"),
            PrinterColumn(name="ScaleTargetName", path="spec.scaleTargetRef.name"),
            PrinterColumn(name="Min", path="spec.minReplicaCount", type="integer"),
            PrinterColumn(name="Max", path="spec.maxReplicaCount", type="integer"),
        ))


class Registry:
    """The served types; lookups by group/version/plural, kind, or any name kubectl accepts."""

    def __init__(self, types: list[ResourceType]) -> None:
        self._types = list(types)
        self.version = 0  # bumped on every change, so callers may cache derived tables

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types))

    def add(self, rt: ResourceType) -> None:
        self.remove(rt.group, rt.version, rt.plural)
        self._types.append(rt)
        self.version += 1

    def remove(self, group: str, version: str, plural: str) -> None:
        self._types = [t for t in self._types
                       if (t.group, t.version, t.plural) != (group, version, plural)]
        self.version += 1

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        for t in self._types:
            if (t.group, t.version, t.plural) == (group, version, plural):
                return t
        return None

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for t in self._types:
            if (t.api_version, t.kind) == (api_version, kind):
                return t
        return None

    def by_storage(self, key: tuple[str, str]) -> list[ResourceType]:
        return [t for t in self._types if t.storage_key == key]

    def group_versions(self) -> dict[str, list[str]]:
        """group -> versions, in first-seen order ("" is the core group)."""
        out: dict[str, list[str]] = {}
        for t in self._types:
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self._types if (t.group, t.version) == (group, version)]
