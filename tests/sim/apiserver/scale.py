"""The autoscaling/v1 ``Scale`` view of any resource with a scale subresource.

Built-ins compute ``status.selector`` from ``spec.selector`` (upstream's scale storage); custom
resources read the three CRD paths. ``spec.replicas`` is ``omitempty`` in autoscaling/v1, so a
target at zero shows ``"spec": {}``, exactly as a real server sends it.
"""

from __future__ import annotations

from typing import Any

from .errors import bad_request, invalid
from .resources import ResourceType
from .selectors import format_label_selector, get_path, set_path

Obj = dict[str, Any]


def spec_replicas(rt: ResourceType, obj: Obj) -> int:
    assert rt.scale is not None
    value = get_path(obj, rt.scale.spec_replicas_path)
    if value is None:
        return 0 if rt.custom else 1
    return int(value)


def workload_selector(rt: ResourceType, obj: Obj) -> str:
    """A built-in workload's pod selector as a string; a ReplicationController's is a map."""
    selector = get_path(obj, "spec.selector")
    if rt.workload == "replicationcontroller":
        return ",".join(f"{k}={v}" for k, v in sorted((selector or {}).items()))
    return format_label_selector(selector)


def selector_string(rt: ResourceType, obj: Obj) -> str:
    assert rt.scale is not None
    if rt.scale.label_selector_path is None:
        return workload_selector(rt, obj)
    value = get_path(obj, rt.scale.label_selector_path)
    return value if isinstance(value, str) else ""


def scale_of(rt: ResourceType, obj: Obj) -> Obj:
    assert rt.scale is not None
    meta = obj["metadata"]
    replicas = spec_replicas(rt, obj)
    status: Obj = {"replicas": int(get_path(obj, rt.scale.status_replicas_path) or 0)}
    if selector := selector_string(rt, obj):
        status["selector"] = selector
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                          "creationTimestamp") if k in meta},
        "spec": {"replicas": replicas} if replicas else {},
        "status": status,
    }


def with_scale(rt: ResourceType, obj: Obj, scale: Any) -> Obj:
    """The parent object after applying a Scale body; 400/422 on a malformed or invalid one."""
    assert rt.scale is not None
    if not isinstance(scale, dict):
        raise bad_request("Scale body must be an object")
    if scale.get("kind", "Scale") != "Scale":
        raise bad_request(f"expected Scale, got {scale.get('kind')}")
    name = obj["metadata"]["name"]
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise bad_request("Scale in version \"v1\" cannot be handled as a Scale: json: cannot "
                          "unmarshal into Go struct field ScaleSpec.spec.replicas of type int32")
    if replicas < 0:
        raise invalid("Scale", "autoscaling", name, [(
            "spec.replicas", "FieldValueInvalid",
            f"Invalid value: {replicas}: must be greater than or equal to 0")])
    set_path(obj, rt.scale.spec_replicas_path, replicas)
    return obj
