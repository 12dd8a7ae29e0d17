"""HorizontalPodAutoscaler manifests (autoscaling/v2, v2beta2, v1) as our target tables.

The target table keeps HPA's field names, so the conversion is mostly a copy of ``spec``.
What cannot be copied is where the numbers come from: Pods, Object and External metrics
need PromQL, so each gets a ``query`` that starts with ``TODO`` (which ``check`` rejects)
and a comment saying what shape of answer the query must have, with a starting point.
v1's ``targetCPUUtilizationPercentage`` becomes a Resource cpu Utilization metric.

The manifest comes from someone else. Every field read here is checked for its shape (a
mapping where a mapping belongs...), and every name for the rule the API server applies to
it, so a manifest Kubernetes would refuse is refused here with the field's path
(``ManifestError``). Strings reach comments only through ``manifests.shown``/``plain`` and
PromQL examples only as escaped string literals. Values are copied as they are (``null``
meaning unset, as in Kubernetes); the writer escapes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autoscaler.config.errors import Loc, format_loc
from autoscaler.config.manifests import (
    dns_label_problem,
    dns_subdomain_problem,
    path_segment_problem,
    plain,
    shown,
)
from autoscaler.config.query import TODO_MARKER
from autoscaler.config.toml_out import string

V2_VERSIONS = frozenset({"autoscaling/v2", "autoscaling/v2beta2"})
LIST_KINDS = frozenset({"List", "HorizontalPodAutoscalerList"})
_SOURCE_KEYS = {
    "Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
    "Object": "object", "External": "external",
}
_SPEC_KEYS = frozenset({"scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior",
                        "targetCPUUtilizationPercentage"})
_RULE_KEYS = ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance")


class ManifestError(ValueError):
    """A field this importer cannot read; ``loc`` is its path from the HPA (or the list)."""

    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(f"{format_loc(loc)}: {message}" if loc else message)
        self.loc = loc
        self.message = message


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """An HPA in a document: where it sits (``items[3]`` in a list) and its manifest."""

    loc: Loc
    manifest: Mapping[str, Any]


def find_hpas(document: Mapping[str, Any], loc: Loc = ()) -> tuple[list[Found], list[str]]:
    """The HPA objects of one document (lists flattened), and notes on what was skipped."""
    kind = _string(document.get("kind"), (*loc, "kind"))
    if kind == "HorizontalPodAutoscaler":
        return [Found(loc=loc, manifest=document)], []
    if kind not in LIST_KINDS:
        return [], [f"skipped {plain(kind or 'a document without kind')} {_name_of(document)}"]
    found: list[Found] = []
    skipped: list[str] = []
    items = _array(document.get("items"), (*loc, "items"))
    for index, value in enumerate(items):
        item_loc = (*loc, "items", index)
        item = _mapping(value, item_loc)
        if kind == "HorizontalPodAutoscalerList":
            # An API list's items carry no kind or apiVersion: the list's own apply.
            item = {"kind": "HorizontalPodAutoscaler", "apiVersion": document.get("apiVersion"),
                    **item}
        more, notes = find_hpas(item, item_loc)
        found += more
        skipped += notes
    return found, skipped


def _name_of(document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return plain(name) if isinstance(name, str) else "?"


def import_hpa(hpa: Mapping[str, Any], *, default_namespace: str = "default") -> Imported:
    """One HPA manifest as an ``[[autoscaler]]`` table; ``ManifestError`` if unreadable."""
    api_version = _string(hpa.get("apiVersion"), ("apiVersion",)) or ""
    if api_version not in V2_VERSIONS and api_version != "autoscaling/v1":
        raise ManifestError(("apiVersion",), f"{shown(api_version)} is not supported "
                            "(use autoscaling/v2 or v1)")
    metadata = _mapping(hpa.get("metadata"), ("metadata",))
    name = _name(metadata.get("name"), ("metadata", "name"), dns_subdomain_problem)
    if name is None:
        raise ManifestError(("metadata", "name"), "required")
    namespace = _name(metadata.get("namespace"), ("metadata", "namespace"), dns_label_problem)
    notes = [] if namespace else [f"{name}: no metadata.namespace, using {default_namespace!r}"]
    namespace = namespace or default_namespace
    spec = _mapping(hpa.get("spec"), ("spec",))
    notes += [f"{name}: {format_loc(('spec', k))} is not imported"
              for k in sorted(set(spec) - _SPEC_KEYS)]
    table: dict[str, Any] = {"namespace": namespace, "scaleTargetRef": _reference(
        spec.get("scaleTargetRef"), ("spec", "scaleTargetRef"))}
    for key in ("minReplicas", "maxReplicas"):
        if spec.get(key) is not None:
            table[key] = _copy(spec[key], ("spec", key))
    if api_version == "autoscaling/v1":
        percent = spec.get("targetCPUUtilizationPercentage")
        metrics = [_v1_cpu(80 if percent is None else _copy(
            percent, ("spec", "targetCPUUtilizationPercentage")))]
    else:
        listed = _copy(_array(spec.get("metrics"), ("spec", "metrics")), ("spec", "metrics"))
        metrics = [dict(_mapping(m, ("spec", "metrics", i))) for i, m in enumerate(listed)]
    for index, metric in enumerate(metrics):
        _check_metric_names(metric, ("spec", "metrics", index))
    todos = tuple(t for i, m in enumerate(metrics) if (t := _add_query(i, m)) is not None)
    if behavior := _behavior(spec.get("behavior"), ("spec", "behavior")):
        table["behavior"] = behavior
    table["metrics"] = metrics
    return Imported(name=f"{namespace}/{name}", api_version=api_version, table=table,
                    todos=todos, notes=tuple(notes))


def _reference(value: Any, loc: Loc) -> dict[str, Any]:
    """A CrossVersionObjectReference: ``kind`` and ``name`` are path segments upstream."""
    ref = _mapping(value, loc)
    for key in ("kind", "name"):
        _name(ref.get(key), (*loc, key), path_segment_problem)
    return {k: _copy(ref[k], (*loc, k)) for k in ("apiVersion", "kind", "name")
            if ref.get(k) is not None}


def _v1_cpu(percent: Any) -> dict[str, Any]:
    return {"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": percent}}}


def _behavior(value: Any, loc: Loc) -> dict[str, Any]:
    behavior = _mapping(value, loc)
    directions: dict[str, Any] = {}
    for direction in ("scaleUp", "scaleDown"):
        if behavior.get(direction) is not None:
            rules = _mapping(behavior[direction], (*loc, direction))
            directions[direction] = {k: _copy(rules[k], (*loc, direction, k))
                                     for k in _RULE_KEYS if rules.get(k) is not None}
    return directions


def _check_metric_names(metric: Mapping[str, Any], loc: Loc) -> None:
    """The names in a metric source, by upstream's rules (validateMetricSpec and below)."""
    metric_type = metric.get("type")
    if not isinstance(metric_type, str) or metric_type not in _SOURCE_KEYS:
        return  # `check` reports the type
    key = _SOURCE_KEYS[metric_type]
    source = _mapping(metric.get(key), (*loc, key))
    if metric_type == "ContainerResource":
        _name(source.get("container"), (*loc, key, "container"), dns_label_problem)
    elif metric_type != "Resource":
        identifier = _mapping(source.get("metric"), (*loc, key, "metric"))
        _name(identifier.get("name"), (*loc, key, "metric", "name"), path_segment_problem)
    if metric_type == "Object":
        _reference(source.get("describedObject"), (*loc, key, "describedObject"))


def _add_query(index: int, metric: dict[str, Any]) -> Todo | None:
    """Give a Pods, Object or External metric a TODO query; say what to write there."""
    metric_type = metric.get("type")
    if metric_type not in ("Pods", "Object", "External"):
        return None
    key = _SOURCE_KEYS[metric_type]
    source = metric[key] = dict(_mapping(metric.get(key), ()))
    name = _mapping(source.get("metric"), ()).get("name") or "?"
    source["query"] = f"{TODO_MARKER}: PromQL for {metric_type} metric {plain(name)}"
    return Todo(metric_index=index, comment=_todo_comment(metric_type, source, name))


def _todo_comment(metric_type: str, source: Mapping[str, Any], name: str) -> tuple[str, ...]:
    series = _prometheus_name(name)
    selector = _mapping(source.get("metric"), ()).get("selector")
    matchers = _matchers(selector)
    if metric_type == "Pods":
        shape = "one series per pod, with a `pod` label"
        example = f"sum by (pod) (rate({series}{{${{pod_selector}}{matchers}}}[2m]))"
    elif metric_type == "Object":
        described = _mapping(source.get("describedObject"), ())
        shape = (f"exactly one series: the value for {_plain_name(described.get('kind'))} "
                 f"{_plain_name(described.get('name'))}")
        example = f'sum({series}{{namespace="${{namespace}}"{matchers}}})'
    else:
        shape = "one or more series (their values are summed)"
        example = f"sum({series}{{{matchers.lstrip(',')}}})"
    lines = [f"TODO: write the PromQL for {metric_type} metric {shown(name)}: {shape}.",
             f"  For example: {example}"]
    if selector:
        # json.dumps escapes everything outside printable ASCII: one line, as it was.
        lines.append(f"  The HPA selected it with: {json.dumps(selector, sort_keys=True)}")
    return tuple(lines)


def _plain_name(value: Any) -> str:
    return plain(value) if isinstance(value, str) else "?"


def _prometheus_name(name: str, *, colons: bool = True) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9_:]" if colons else r"[^a-zA-Z0-9_]", "_", name)
    return cleaned if re.match(r"[a-zA-Z_:]", cleaned) else f"_{cleaned}"


def _matchers(selector: Any) -> str:
    """``matchLabels`` as PromQL matchers (``,k="v"``); expressions are left to the user.

    Values are PromQL string literals with ``$`` doubled, so that a query template written
    from the example matches the label's value and never names a placeholder.
    """
    labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
    if not isinstance(labels, Mapping):
        return ""
    return "".join(f",{_prometheus_name(k, colons=False)}={string(v).replace('$', '$$')}"
                   for k, v in sorted(labels.items()) if isinstance(v, str))


def _mapping(value: Any, loc: Loc) -> Mapping[str, Any]:
    """A mapping field (absent or null: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(loc, f"must be a mapping, got {shown(value)}")
    return value


def _array(value: Any, loc: Loc) -> list[Any]:
    """An array field (absent or null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(loc, f"must be an array, got {shown(value)}")
    return value


def _string(value: Any, loc: Loc) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ManifestError(loc, f"must be a string, got {shown(value)}")
    return value


def _name(value: Any, loc: Loc, rule: Callable[[str], str | None]) -> str | None:
    """A name field, checked with the rule the API server applies to it (absent: None)."""
    name = _string(value, loc)
    problem = None if name is None else rule(name)
    if problem:
        raise ManifestError(loc, problem)
    return name


def _copy(value: Any, loc: Loc) -> Any:
    """A manifest value as TOML can hold it: null means unset, so its key is left out."""
    if isinstance(value, Mapping):
        return {k: _copy(v, (*loc, k)) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if None in value:
            raise ManifestError((*loc, value.index(None)), "null is not allowed in an array")
        return [_copy(v, (*loc, i)) for i, v in enumerate(value)]
    return value
