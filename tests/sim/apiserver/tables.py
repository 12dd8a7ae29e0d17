"""Server-side ``Table`` output (meta.k8s.io/v1), which ``kubectl get`` asks for.

Upstream answers a Table with a plain ``application/json`` Content-Type (only aggregated
discovery names its kind in the media type); clients recognise the Table by its ``kind``.

Columns and cells follow upstream's printers for the built-ins this project touches; custom
resources get Name, their printer columns and Age, as the CRD table convertor gives them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from .resources import ResourceType
from .scale import workload_selector
from .selectors import get_path

Obj = dict[str, Any]


def wants_table(accept: str) -> bool:
    compact = accept.replace(" ", "")
    return "as=Table" in compact and "g=meta.k8s.io" in compact


def human_duration(seconds: float) -> str:  # noqa: PLR0911 (one return per upstream branch)
    """apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    return f"{hours // (24 * 365)}y"


def _age(obj: Obj, now: datetime) -> str:
    created = obj["metadata"].get("creationTimestamp")
    if not created:
        return "<unknown>"
    return human_duration((now - datetime.fromisoformat(created)).total_seconds())


def _containers(spec: Obj | None) -> tuple[str, str]:
    containers = (spec or {}).get("containers") or []
    return (",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers))


def _pod_cells(pod: Obj) -> tuple[list[Any], list[Any]]:
    status, spec = pod.get("status") or {}, pod.get("spec") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in statuses:
        waiting = (c.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    return [f"{ready}/{len(spec.get('containers') or [])}", reason, str(restarts)], [
        status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>", "<none>"]


def _hpa_targets(hpa: Obj) -> str:
    parts = []
    for metric in (hpa.get("spec") or {}).get("metrics") or []:
        if metric.get("type") == "Resource":
            target = metric["resource"].get("target") or {}
            want = f"{target['averageUtilization']}%" if "averageUtilization" in target else \
                str(target.get("averageValue", target.get("value", "<unknown>")))
            parts.append(f"{metric['resource']['name']}: <unknown>/{want}")
        else:
            parts.append("<unknown>/<unknown>")
    return ", ".join(parts) or "<none>"


Column = tuple[str, str, int]  # name, type, priority
_NAME: Column = ("Name", "string", 0)
_AGE: Column = ("Age", "string", 0)


def _builtin(rt: ResourceType, obj: Obj, now: datetime) -> tuple[list[Column], list[Any]] | None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    age, name = _age(obj, now), obj["metadata"]["name"]
    template = (spec.get("template") or {}).get("spec")
    if rt.kind == "Pod":
        main, wide = _pod_cells(obj)
        return ([_NAME, ("Ready", "string", 0), ("Status", "string", 0),
                 ("Restarts", "string", 0), _AGE, ("IP", "string", 1), ("Node", "string", 1),
                 ("Nominated Node", "string", 1), ("Readiness Gates", "string", 1)],
                [name, *main, age, *wide])
    if rt.workload in ("deployment", "statefulset", "replicaset", "replicationcontroller"):
        containers, images = _containers(template)
        replicas, ready = spec.get("replicas", 1), status.get("readyReplicas", 0)
        selector = workload_selector(rt, obj)
        if rt.workload == "deployment":
            return ([_NAME, ("Ready", "string", 0), ("Up-to-date", "integer", 0),
                     ("Available", "integer", 0), _AGE, ("Containers", "string", 1),
                     ("Images", "string", 1), ("Selector", "string", 1)],
                    [name, f"{ready}/{replicas}", status.get("updatedReplicas", 0),
                     status.get("availableReplicas", 0), age, containers, images, selector])
        if rt.workload == "statefulset":
            return ([_NAME, ("Ready", "string", 0), _AGE, ("Containers", "string", 1),
                     ("Images", "string", 1)],
                    [name, f"{ready}/{replicas}", age, containers, images])
        return ([_NAME, ("Desired", "integer", 0), ("Current", "integer", 0),
                 ("Ready", "integer", 0), _AGE, ("Containers", "string", 1),
                 ("Images", "string", 1), ("Selector", "string", 1)],
                [name, replicas, status.get("replicas", 0), ready, age, containers, images,
                 selector])
    if rt.kind == "HorizontalPodAutoscaler":
        ref = spec.get("scaleTargetRef") or {}
        return ([_NAME, ("Reference", "string", 0), ("Targets", "string", 0),
                 ("MinPods", "string", 0), ("MaxPods", "integer", 0),
                 ("Replicas", "integer", 0), _AGE],
                [name, f"{ref.get('kind')}/{ref.get('name')}", _hpa_targets(obj),
                 str(spec.get("minReplicas", 1)), spec.get("maxReplicas", 0),
                 status.get("currentReplicas", 0), age])
    simple: dict[str, Callable[[], tuple[list[Column], list[Any]]]] = {
        "Lease": lambda: ([_NAME, ("Holder", "string", 0), _AGE],
                          [name, spec.get("holderIdentity", ""), age]),
        "ConfigMap": lambda: ([_NAME, ("Data", "integer", 0), _AGE],
                              [name, len(obj.get("data") or {}) +
                               len(obj.get("binaryData") or {}), age]),
        "Namespace": lambda: ([_NAME, ("Status", "string", 0), _AGE],
                              [name, status.get("phase", ""), age]),
    }
    return simple[rt.kind]() if rt.kind in simple else None


def _event_row(obj: Obj, now: datetime) -> tuple[list[Column], list[Any]]:
    ref = obj.get("involvedObject") or obj.get("regarding") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or obj["metadata"].get(
        "creationTimestamp")
    seen = human_duration((now - datetime.fromisoformat(last)).total_seconds()) if last else ""
    return ([("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
             ("Object", "string", 0), ("Message", "string", 0)],
            [seen, obj.get("type", ""), obj.get("reason", ""),
             f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}",
             obj.get("message", obj.get("note", ""))])


def row(rt: ResourceType, obj: Obj, now: datetime) -> tuple[list[Column], list[Any]]:
    if rt.kind == "Event":
        return _event_row(obj, now)
    if (found := _builtin(rt, obj, now)) is not None:
        return found
    columns = [_NAME] + [(c.name, c.type, c.priority) for c in rt.printer_columns] + [_AGE]
    cells = [obj["metadata"]["name"]] + [get_path(obj, c.path) for c in rt.printer_columns]
    return columns, [*cells, _age(obj, now)]


def table(rt: ResourceType, items: list[Obj], *, now: datetime, list_meta: Obj,
          include_object: str) -> Obj:
    """A meta.k8s.io/v1 Table; ``include_object`` is None, Metadata (default) or Object."""
    rows, columns = [], row(rt, {"metadata": {"name": ""}}, now)[0]
    for obj in items:
        columns, cells = row(rt, obj, now)
        entry: Obj = {"cells": cells}
        if include_object == "Object":
            entry["object"] = obj
        elif include_object != "None":
            entry["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": obj["metadata"]}
        rows.append(entry)
    definitions = [{"name": n, "type": t, "format": "name" if n == "Name" else "",
                    "description": "", "priority": p} for n, t, p in columns]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": definitions, "rows": rows}
