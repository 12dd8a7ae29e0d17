"""What upstream's per-type strategies do to an object on its way into storage.

Defaulting (the fields a real server fills in), validation (422 with field causes, 400 for a
body that would not even decode, such as a MicroTime without six fractional digits), and the
events.k8s.io/v1 view of core/v1 Events (one storage, two shapes, as upstream).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from .errors import bad_request, invalid
from .resources import ResourceType
from .scale import workload_selector
from .selectors import parse_label_selector

Obj = dict[str, Any]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MICRO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
_MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
_MICRO_FIELDS = {
    ("coordination.k8s.io", "Lease"): ("spec.acquireTime", "spec.renewTime"),
    ("", "Event"): ("eventTime", "series.lastObservedTime"),
    ("events.k8s.io", "Event"): ("eventTime", "series.lastObservedTime"),
}
_INT_FIELDS = ("spec.replicas", "spec.minReplicas", "spec.maxReplicas",
               "spec.leaseDurationSeconds", "spec.leaseTransitions")


def _lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def check_decodable(rt: ResourceType, obj: Obj) -> None:
    """400 for values a Go decoder rejects before validation: MicroTime format, int fields."""
    prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
    for path in _MICRO_FIELDS.get((rt.group, rt.kind), ()):
        value = _lookup(obj, path)
        if value is not None and (not isinstance(value, str) or not _MICRO.match(value)):
            raise bad_request(f'{prefix}: parsing time "{value}" as "{_MICRO_LAYOUT}": cannot '
                              f'parse "{value}" as "{_MICRO_LAYOUT}"')
    for path in _INT_FIELDS:
        value = _lookup(obj, path)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad_request(f"{prefix}: json: cannot unmarshal {type(value).__name__} into Go "
                              f"struct field of type int32 ({path})")


def check_name(rt: ResourceType, name: str) -> None:
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise invalid(rt.kind, rt.group, name, [(
            "metadata.name", "FieldValueInvalid",
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character")])


# core/v1 Event fields without omitempty: serialized as null, "" or {} when unset.
_CORE_EVENT_ZEROES: tuple[tuple[str, Any], ...] = (
    ("eventTime", None), ("firstTimestamp", None), ("lastTimestamp", None),
    ("reportingComponent", ""), ("reportingInstance", ""), ("source", {}))


# defaulting --------------------------------------------------------------------------------
def _default_pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for container in spec.get("containers") or []:
        image = str(container.get("image", ""))
        container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest")
                             or ":" not in image.rsplit("/", 1)[-1] else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})


def qos_class(spec: Obj) -> str:
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        (r.get("limits") or {}).get(k) and (r.get("requests") or {}).get(k, r["limits"][k])
        == r["limits"][k] for r in resources for k in ("cpu", "memory"))
    return "Guaranteed" if guaranteed else "Burstable"


def apply_defaults(rt: ResourceType, obj: Obj) -> None:
    """The defaulting a real server applies to a new or updated object of this type."""
    spec = obj.get("spec")
    if rt.kind == "Pod" and isinstance(spec, dict):
        _default_pod_spec(spec)
    elif rt.workload == "replicationcontroller" and isinstance(spec, dict):
        # SetDefaults_ReplicationController: selector and labels from the template's labels.
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        spec.setdefault("replicas", 1)
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        if not obj["metadata"].get("labels") and labels:
            obj["metadata"]["labels"] = dict(labels)
        template_spec = (spec.get("template") or {}).get("spec")
        if isinstance(template_spec, dict):
            _default_pod_spec(template_spec)
    elif rt.workload in ("deployment", "statefulset", "replicaset") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        if rt.workload == "deployment":
            spec.setdefault("progressDeadlineSeconds", 600)
            spec.setdefault("strategy", {"type": "RollingUpdate", "rollingUpdate": {
                "maxUnavailable": "25%", "maxSurge": "25%"}})
        if rt.workload == "statefulset":
            spec.setdefault("podManagementPolicy", "OrderedReady")
            spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                               "rollingUpdate": {"partition": 0}})
        template_spec = (spec.get("template") or {}).get("spec")
        if isinstance(template_spec, dict):
            _default_pod_spec(template_spec)
    elif rt.kind == "Service" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    elif rt.kind == "HorizontalPodAutoscaler" and isinstance(spec, dict):
        _default_hpa(spec)
    elif rt.kind == "Event" and not rt.group:
        for key, value in _CORE_EVENT_ZEROES:
            obj.setdefault(key, value)


def _default_hpa(spec: Obj) -> None:
    """autoscaling/v2 SetDefaults_HorizontalPodAutoscaler(Behavior)."""
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": 80}}}]
    behavior = spec.get("behavior")
    if not isinstance(behavior, dict):
        return
    # A given field wins; policies are taken whole; scaleDown's window stays unset so the
    # controller substitutes its --horizontal-pod-autoscaler-downscale-stabilization.
    defaults: dict[str, Obj] = {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15}]},
    }
    for direction, default in defaults.items():
        rules = behavior.get(direction)
        rules = dict(rules) if isinstance(rules, dict) else {}
        for key, value in default.items():
            if rules.get(key) in (None, []):
                rules[key] = value
        behavior[direction] = rules


# validation --------------------------------------------------------------------------------
def validate(rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    """Type-specific validation upstream does, where a client of this project can trip on it."""
    name = obj["metadata"]["name"]
    causes: list[tuple[str, str, str]] = []
    if rt.workload in ("deployment", "statefulset", "replicaset", "replicationcontroller"):
        causes += _workload_causes(rt, obj, old)
    if rt.scale is not None:
        replicas = _lookup(obj, rt.scale.spec_replicas_path.strip("."))
        if isinstance(replicas, int) and replicas < 0:
            causes.append(("spec.replicas", "FieldValueInvalid",
                           f"Invalid value: {replicas}: must be greater than or equal to 0"))
    if rt.group == "events.k8s.io" and old is None:
        causes += _events_v1_causes(obj)
    if rt.kind == "ConfigMap":
        causes += _configmap_causes(obj)
    if rt.kind == "HorizontalPodAutoscaler":
        causes += _hpa_causes(obj.get("spec") or {})
    if rt.kind == "Event":
        causes += _event_namespace_causes(obj)
    if rt.kind == "Pod" and not (obj.get("spec") or {}).get("containers"):
        causes.append(("spec.containers", "FieldValueRequired", "Required value"))
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)


def _workload_causes(rt: ResourceType, obj: Obj,
                     old: Obj | None) -> list[tuple[str, str, str]]:
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if not selector:
        return [("spec.selector", "FieldValueRequired", "Required value")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    text = workload_selector(rt, obj)
    causes = []
    if not text:
        causes.append(("spec.selector", "FieldValueInvalid",
                       "Invalid value: empty selector is invalid for deployment"))
    elif not parse_label_selector(text)(labels):
        causes.append(("spec.template.metadata.labels", "FieldValueInvalid",
                       f"Invalid value: {labels}: `selector` does not match template `labels`"))
    if old is not None and rt.group == "apps" and (old.get("spec") or {}).get(
            "selector") != selector:
        causes.append(("spec.selector", "FieldValueInvalid",
                       f"Invalid value: {selector}: field is immutable"))
    return causes


def _hpa_causes(spec: Obj) -> list[tuple[str, str, str]]:
    causes = []
    ref = spec.get("scaleTargetRef") or {}
    for field in ("kind", "name"):
        if not ref.get(field):
            causes.append((f"spec.scaleTargetRef.{field}", "FieldValueRequired", "Required value"))
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if isinstance(low, int) and low < 1:
        causes.append(("spec.minReplicas", "FieldValueInvalid",
                       f"Invalid value: {low}: must be greater than or equal to 1"))
    if not isinstance(high, int):
        causes.append(("spec.maxReplicas", "FieldValueRequired", "Required value"))
    elif isinstance(low, int) and high < low:
        causes.append(("spec.maxReplicas", "FieldValueInvalid",
                       f"Invalid value: {high}: must be greater than or equal to `minReplicas`"))
    return causes


def _event_namespace_causes(obj: Obj) -> list[tuple[str, str, str]]:
    """The object an event is about must live in the event's namespace (if namespaced)."""
    field = "involvedObject" if "involvedObject" in obj else "regarding"
    ref_namespace = (obj.get(field) or {}).get("namespace")
    if ref_namespace and ref_namespace != obj["metadata"].get("namespace"):
        return [(f"{field}.namespace", "FieldValueInvalid",
                 f'Invalid value: "{ref_namespace}": does not match event.namespace')]
    return []


_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
MAX_CONFIGMAP_BYTES = 1024 * 1024


def _configmap_causes(obj: Obj) -> list[tuple[str, str, str]]:
    """Keys must be valid config keys; data plus binaryData at most 1 MiB, as upstream."""
    causes, size = [], 0
    for field in ("data", "binaryData"):
        for key, value in (obj.get(field) or {}).items():
            if not _CONFIG_KEY.match(key) or len(key) > 253:
                causes.append((f"{field}[{key}]", "FieldValueInvalid",
                               f'Invalid value: "{key}": a valid config key must consist of '
                               "alphanumeric characters, '-', '_' or '.'"))
            try:
                size += len(base64.b64decode(str(value), validate=True)) \
                    if field == "binaryData" else len(str(value).encode())
            except binascii.Error:
                raise bad_request(f"ConfigMap in version \"v1\" cannot be handled as a "
                                  f"ConfigMap: illegal base64 data in binaryData[{key}]") from None
    if size > MAX_CONFIGMAP_BYTES:
        causes.append(("", "FieldValueTooLong",
                       f"Too long: must have at most {MAX_CONFIGMAP_BYTES} bytes"))
    return causes


def _events_v1_causes(obj: Obj) -> list[tuple[str, str, str]]:
    causes = []
    for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not obj.get(field):
            causes.append((field, "FieldValueRequired", "Required value"))
    if obj.get("type") not in ("Normal", "Warning"):
        causes.append(("type", "FieldValueNotSupported",
                       f'Unsupported value: "{obj.get("type", "")}": supported values: '
                       '"Normal", "Warning"'))
    if len(str(obj.get("note", ""))) > 1024:
        causes.append(("note", "FieldValueTooLong", "Too long: may not be more than 1024 bytes"))
    return causes


# the events.k8s.io/v1 view of core/v1 Events ----------------------------------------------
_EVENT_RENAMES = (("regarding", "involvedObject"), ("note", "message"),
                  ("deprecatedSource", "source"), ("deprecatedFirstTimestamp", "firstTimestamp"),
                  ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count"),
                  ("reportingController", "reportingComponent"))


def to_storage(rt: ResourceType, obj: Obj) -> Obj:
    """Convert a body of a view type (events.k8s.io/v1 Event) to its storage shape."""
    if rt.storage is None:
        return obj
    out = {k: v for k, v in obj.items() if k not in dict(_EVENT_RENAMES)}
    for view, core in _EVENT_RENAMES:
        if view in obj:
            out[core] = obj[view]
    out["apiVersion"], out["kind"] = "v1", "Event"
    for key, value in _CORE_EVENT_ZEROES:  # what the conversion leaves as Go zero values
        out.setdefault(key, value)
    return out


def to_view(rt: ResourceType, obj: Obj) -> Obj:
    """The object as ``rt`` shows it (identity unless ``rt`` is a view over another storage)."""
    if rt.storage is None:
        return obj
    cores = {core: view for view, core in _EVENT_RENAMES}
    out: Obj = {}
    for key, value in obj.items():
        if key == "source" and not value:
            continue
        if key in ("reportingComponent", "reportingInstance") and value == "":
            continue
        out[cores.get(key, key)] = value
    out.setdefault("eventTime", None)
    out["apiVersion"], out["kind"] = rt.api_version, rt.kind
    return out

