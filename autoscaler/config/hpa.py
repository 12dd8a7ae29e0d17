"""HorizontalPodAutoscaler manifests (autoscaling/v2, v2beta2, v1) as our target tables.

The target table keeps HPA's field names, so the conversion is mostly a copy of ``spec``.
What cannot be copied is where the numbers come from: Pods, Object and External metrics
need PromQL, so each gets a ``query`` that starts with ``TODO`` (which ``check`` rejects)
and a comment saying what shape of answer the query must have, with a starting point.
v1's ``targetCPUUtilizationPercentage`` becomes a Resource cpu Utilization metric.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autoscaler.config.query import TODO_MARKER

V2_VERSIONS = frozenset({"autoscaling/v2", "autoscaling/v2beta2"})
LIST_KINDS = frozenset({"List", "HorizontalPodAutoscalerList"})
_SOURCE_KEYS = {
    "Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
    "Object": "object", "External": "external",
}
_SPEC_KEYS = frozenset({"scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior",
                        "targetCPUUtilizationPercentage"})


class ManifestError(ValueError):
    """The document is an HPA this importer cannot read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Todo:
    """A query to write: the metric's path in the table and the comment to put above it."""

    metric_index: int
    comment: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Imported:
    """One HPA as a target table, plus what the user still has to do."""

    name: str
    api_version: str
    table: dict[str, Any]
    todos: tuple[Todo, ...] = ()
    notes: tuple[str, ...] = field(default=())


def hpa_documents(documents: Iterable[Any]) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The HPA objects among YAML documents (lists flattened), and notes on what was skipped."""
    found: list[Mapping[str, Any]] = []
    skipped: list[str] = []
    for document in documents:
        if not isinstance(document, Mapping):
            continue
        kind = document.get("kind")
        if kind in LIST_KINDS:
            # An API list's items carry no kind or apiVersion: the list's own apply.
            typed = kind == "HorizontalPodAutoscalerList"
            implied = {"kind": "HorizontalPodAutoscaler", "apiVersion": document.get("apiVersion")}
            items, more = hpa_documents(
                {**implied, **item} if typed and isinstance(item, Mapping) else item
                for item in document.get("items") or ()
            )
            found += items
            skipped += more
        elif kind == "HorizontalPodAutoscaler":
            found.append(document)
        else:
            name = (document.get("metadata") or {}).get("name", "?")
            skipped.append(f"skipped {kind or 'a document without kind'} {name}")
    return found, skipped


def import_hpa(hpa: Mapping[str, Any], *, default_namespace: str = "default") -> Imported:
    """One HPA manifest as an ``[[autoscaler]]`` table."""
    api_version = str(hpa.get("apiVersion", ""))
    metadata = hpa.get("metadata") or {}
    spec = hpa.get("spec") or {}
    name = str(metadata.get("name", "?"))
    if api_version not in V2_VERSIONS and api_version != "autoscaling/v1":
        raise ManifestError(f"HorizontalPodAutoscaler {name}: apiVersion {api_version!r} is "
                            "not supported (use autoscaling/v2 or v1)")
    namespace = str(metadata.get("namespace") or default_namespace)
    notes = [f"{name}: no metadata.namespace, using {namespace!r}"] \
        if not metadata.get("namespace") else []
    notes += [f"{name}: spec.{k} is not imported" for k in sorted(set(spec) - _SPEC_KEYS)]
    table: dict[str, Any] = {"namespace": namespace,
                             "scaleTargetRef": _ref(spec.get("scaleTargetRef") or {})}
    for key in ("minReplicas", "maxReplicas"):
        if key in spec:
            table[key] = spec[key]
    if api_version == "autoscaling/v1":
        metrics = [_v1_cpu(spec.get("targetCPUUtilizationPercentage", 80))]
    else:
        metrics = [dict(m) for m in spec.get("metrics") or ()]
    todos = tuple(t for i, m in enumerate(metrics) if (t := _add_query(i, m)) is not None)
    if spec.get("behavior"):
        table["behavior"] = _behavior(spec["behavior"])
    table["metrics"] = metrics
    return Imported(name=f"{namespace}/{name}", api_version=api_version, table=table,
                    todos=todos, notes=tuple(notes))


def _ref(ref: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ref[k] for k in ("apiVersion", "kind", "name") if k in ref}


def _v1_cpu(percent: Any) -> dict[str, Any]:
    return {"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": percent}}}


def _behavior(behavior: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance")
    return {
        direction: {k: rules[k] for k in keys if k in rules}
        for direction in ("scaleUp", "scaleDown")
        if isinstance(rules := behavior.get(direction), Mapping)
    }


def _add_query(index: int, metric: dict[str, Any]) -> Todo | None:
    """Give a Pods, Object or External metric a TODO query; say what to write there."""
    metric_type = str(metric.get("type", ""))
    key = _SOURCE_KEYS.get(metric_type)
    if key is None or metric_type in {"Resource", "ContainerResource"}:
        return None
    source = metric[key] = dict(metric.get(key) or {})
    identifier = source.get("metric") or {}
    name = str(identifier.get("name", "?"))
    source["query"] = f"{TODO_MARKER}: PromQL for {metric_type} metric {name!r}"
    return Todo(metric_index=index, comment=_todo_comment(metric_type, source, name))


def _todo_comment(metric_type: str, source: Mapping[str, Any], name: str) -> tuple[str, ...]:
    series = _prometheus_name(name)
    matchers = _matchers(source.get("metric", {}).get("selector"))
    if metric_type == "Pods":
        shape = "one series per pod, with a `pod` label"
        example = f"sum by (pod) (rate({series}{{${{pod_selector}}{matchers}}}[2m]))"
    elif metric_type == "Object":
        described = source.get("describedObject") or {}
        shape = (f"exactly one series: the value for {described.get('kind', '?')} "
                 f"{described.get('name', '?')}")
        example = f'sum({series}{{namespace="${{namespace}}"{matchers}}})'
    else:
        shape = "one or more series (their values are summed)"
        example = f"sum({series}{{{matchers.lstrip(',')}}})"
    lines = [f"TODO: write the PromQL for {metric_type} metric {name!r}: {shape}.",
             f"  For example: {example}"]
    selector = source.get("metric", {}).get("selector")
    if selector:
        lines.append(f"  The HPA selected it with: {json.dumps(selector, sort_keys=True)}")
    return tuple(lines)


def _prometheus_name(name: str) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9_:]", "_", name)
    return cleaned if re.match(r"[a-zA-Z_:]", cleaned) else f"_{cleaned}"


def _matchers(selector: Any) -> str:
    """``matchLabels`` as PromQL matchers (``,k="v"``); expressions are left to the user."""
    labels = (selector or {}).get("matchLabels") if isinstance(selector, Mapping) else None
    if not isinstance(labels, Mapping):
        return ""
    return "".join(f',{_prometheus_name(str(k))}="{v}"' for k, v in sorted(labels.items()))
