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
from dataclasses import dataclass
from typing import Any

from autoscaler.config.issues import Loc, format_loc
from autoscaler.config.query import TODO_MARKER
from autoscaler.config.targets import DEFAULT_METRIC_GROUPS
from autoscaler.importers import manifest_fields as read
from autoscaler.importers.adapter_rules import Resolved
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import (
    dns_label_problem,
    dns_subdomain_problem,
    path_segment_problem,
    plain,
    shown,
)
from autoscaler.importers.output import Imported, Todo
from autoscaler.importers.toml_out import string

V2_VERSIONS = frozenset({"autoscaling/v2", "autoscaling/v2beta2"})
LIST_KINDS = frozenset({"List", "HorizontalPodAutoscalerList"})
_SOURCE_KEYS = {
    "Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
    "Object": "object", "External": "external",
}
_SPEC_KEYS = frozenset({"scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior",
                        "targetCPUUtilizationPercentage", "syncPeriodSeconds"})
_BEHAVIOR_KEYS = frozenset({"scaleUp", "scaleDown"})
SYNC_PERIOD_COMMENT = (
    "syncPeriodSeconds (KEP-6003): upstream waits this long after a reconcile ends; the",
    "daemon starts a pass this often (a fixed rate, +-10% jitter, passes never overlap).",
)


Resolver = Callable[[str, Mapping[str, Any]], Resolved | str]
"""Writes the PromQL of a metric source (its type, its table), or says why it cannot."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """An HPA in a document: where it sits (``items[3]`` in a list) and its manifest."""

    loc: Loc
    manifest: Mapping[str, Any]


def find_hpas(document: Mapping[str, Any], loc: Loc = ()) -> tuple[list[Found], list[str]]:
    """The HPA objects of one document (lists flattened), and notes on what was skipped."""
    kind = read.string(document.get("kind"), (*loc, "kind"))
    if kind == "HorizontalPodAutoscaler":
        return [Found(loc=loc, manifest=document)], []
    if kind not in LIST_KINDS:
        return [], [f"skipped {plain(kind or 'a document without kind')} {read.name_of(document)}"]
    found: list[Found] = []
    skipped: list[str] = []
    items = read.array(document.get("items"), (*loc, "items"))
    for index, value in enumerate(items):
        item_loc = (*loc, "items", index)
        item = read.mapping(value, item_loc)
        if kind == "HorizontalPodAutoscalerList":
            # An API list's items carry no kind or apiVersion: the list's own apply.
            item = {"kind": "HorizontalPodAutoscaler", "apiVersion": document.get("apiVersion"),
                    **item}
        more, notes = find_hpas(item, item_loc)
        found += more
        skipped += notes
    return found, skipped


def import_hpa(hpa: Mapping[str, Any], *, default_namespace: str = "default",
               resolve: Resolver | None = None) -> Imported:
    """One HPA manifest as an ``[[autoscaler]]`` table; ``ManifestError`` if unreadable.

    ``resolve`` (prometheus-adapter's rules) writes the PromQL of Pods, Object and External
    metrics where it can; the others get a TODO query.
    """
    api_version = read.string(hpa.get("apiVersion"), ("apiVersion",)) or ""
    if api_version not in V2_VERSIONS and api_version != "autoscaling/v1":
        raise ManifestError(("apiVersion",), f"{shown(api_version)} is not supported "
                            "(use autoscaling/v2 or v1)")
    metadata = read.mapping(hpa.get("metadata"), ("metadata",))
    name = read.name(metadata.get("name"), ("metadata", "name"), dns_subdomain_problem)
    if name is None:
        raise ManifestError(("metadata", "name"), "required")
    namespace = read.name(metadata.get("namespace"), ("metadata", "namespace"), dns_label_problem)
    notes = [] if namespace else [f"{name}: no metadata.namespace, using {default_namespace!r}"]
    namespace = namespace or default_namespace
    spec = read.mapping(hpa.get("spec"), ("spec",))
    notes += [f"{name}: {format_loc(('spec', k))} is not imported"
              for k in sorted(set(spec) - _SPEC_KEYS)]
    table: dict[str, Any] = {"namespace": namespace, "scaleTargetRef": read.reference(
        spec.get("scaleTargetRef"), ("spec", "scaleTargetRef"))}
    for key in ("minReplicas", "maxReplicas", "syncPeriodSeconds"):  # int32 in the API, as
        if (count := read.whole(spec.get(key), ("spec", key))) is not None:  # each below
            table[key] = count
    comments: dict[str, tuple[str, ...]] = {}
    if "syncPeriodSeconds" in table:
        comments["syncPeriodSeconds"] = SYNC_PERIOD_COMMENT
    metrics = _metrics(api_version, spec)
    todos: list[Todo] = []
    for index, metric in enumerate(metrics):
        group, note = _routed_group(metric, ("spec", "metrics", index))
        if note:
            notes.append(f"{namespace}/{name}: metrics[{index}]: {note}")
        found = _resolve(metric, resolve) if group is None else _routed(group, resolve)
        if isinstance(found, Resolved):
            comments[f"metrics[{index}].query"] = found.comment
            continue
        if found is not None:
            notes.append(f"{namespace}/{name}: metrics[{index}]: {found}; left a TODO")
        if (todo := _add_todo(index, metric, group)) is not None:
            todos.append(todo)
    if behavior := read.behavior(spec.get("behavior"), ("spec", "behavior")):
        table["behavior"] = behavior
    notes += [f"{namespace}/{name}: {format_loc(loc)} is not imported" + _hint(loc)
              for loc in _unread_behavior(spec.get("behavior"))]
    table["metrics"] = metrics
    return Imported(name=f"{namespace}/{name}", source=f"HorizontalPodAutoscaler "
                    f"{namespace}/{name} ({api_version})", table=table, todos=tuple(todos),
                    notes=tuple(notes), comments=comments)


def _metrics(api_version: str, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``spec.metrics`` (v2), or v1's cpu target as a Resource metric; names checked."""
    if api_version == "autoscaling/v1":
        percent = read.whole(spec.get("targetCPUUtilizationPercentage"),
                             ("spec", "targetCPUUtilizationPercentage"))
        metrics = [_v1_cpu(80 if percent is None else percent)]
    else:
        loc = ("spec", "metrics")
        listed = read.copy(read.array(spec.get("metrics"), loc), loc)
        metrics = [dict(read.mapping(m, ("spec", "metrics", i))) for i, m in enumerate(listed)]
    for index, metric in enumerate(metrics):
        _check_metric_names(metric, ("spec", "metrics", index))
    return metrics


def _unread_behavior(value: Any) -> list[Loc]:
    """The keys of ``spec.behavior`` the config has no place for (``read.behavior`` keeps
    the others), so none is dropped without a word."""
    behavior = read.mapping(value, ("spec", "behavior"))
    unread: list[Loc] = [("spec", "behavior", key) for key in behavior
                         if key not in _BEHAVIOR_KEYS]
    for direction in _BEHAVIOR_KEYS & behavior.keys():
        rules = read.mapping(behavior[direction], ("spec", "behavior", direction))
        unread += [("spec", "behavior", direction, key) for key in rules
                   if key not in read.RULE_KEYS]
    return sorted(unread, key=format_loc)


def _hint(loc: Loc) -> str:
    if loc == ("spec", "behavior", "syncPeriodSeconds"):
        return " (KEP-6003's first draft put it there; the field is spec.syncPeriodSeconds)"
    return ""


def _v1_cpu(percent: Any) -> dict[str, Any]:
    return {"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": percent}}}


def _check_metric_names(metric: dict[str, Any], loc: Loc) -> None:
    """The names in a metric source, by upstream's rules (validateMetricSpec and below),
    and its target's fields by their API types."""
    metric_type = metric.get("type")
    if not isinstance(metric_type, str) or metric_type not in _SOURCE_KEYS:
        return  # `check` reports the type
    key = _SOURCE_KEYS[metric_type]
    source = read.mapping(metric.get(key), (*loc, key))
    if source.get("target") is not None:
        metric[key] = {**source, "target": read.metric_target(source["target"],
                                                              (*loc, key, "target"))}
    if metric_type == "ContainerResource":
        read.name(source.get("container"), (*loc, key, "container"), dns_label_problem)
    elif metric_type != "Resource":
        identifier = read.mapping(source.get("metric"), (*loc, key, "metric"))
        read.name(identifier.get("name"), (*loc, key, "metric", "name"), path_segment_problem)
    if metric_type == "Object":
        read.reference(source.get("describedObject"), (*loc, key, "describedObject"))


def _routed_group(metric: dict[str, Any], loc: Loc) -> tuple[str | None, str | None]:
    """KEP-6382's ``metric.source.apiGroup`` of a Pods, Object or External metric: the
    provider's group when it names one other than the type's default, and a note when the
    default was named (then ``source`` is left out, as ``check`` wants)."""
    metric_type = metric.get("type")
    if not isinstance(metric_type, str) or metric_type not in DEFAULT_METRIC_GROUPS:
        return None, None  # `check` reports the type
    key = _SOURCE_KEYS[metric_type]
    source = dict(read.mapping(metric.get(key), (*loc, key)))
    identifier = dict(read.mapping(source.get("metric"), (*loc, key, "metric")))
    if identifier.get("source") is None:
        return None, None
    where = (*loc, key, "metric", "source")
    group = read.name(read.mapping(identifier["source"], where).get("apiGroup"),
                      (*where, "apiGroup"), dns_subdomain_problem)
    if group is None:
        raise ManifestError((*where, "apiGroup"), "required")
    if group != DEFAULT_METRIC_GROUPS[metric_type]:
        return group, None
    del identifier["source"]
    metric[key] = {**source, "metric": identifier}
    return None, (f"metric.source.apiGroup {shown(group)} is the default for "
                  f"{metric_type} metrics; left out")


def _routed(group: str, resolve: Resolver | None) -> str | None:
    """Why the adapter's rules do not write a query for a metric another provider serves."""
    if resolve is None:
        return None
    return (f"served by API group {shown(group)} (KEP-6382), whose queries "
            "prometheus-adapter's rules cannot know")


def _resolve(metric: dict[str, Any], resolve: Resolver | None) -> Resolved | str | None:
    """Give a Pods, Object or External metric the query ``resolve`` writes, or say why not."""
    metric_type = metric.get("type")
    if resolve is None or metric_type not in ("Pods", "Object", "External"):
        return None
    key = _SOURCE_KEYS[metric_type]
    source = metric[key] = dict(read.mapping(metric.get(key), ()))
    found = resolve(metric_type, source)
    if isinstance(found, Resolved):
        source["query"] = found.query
    return found


def _add_todo(index: int, metric: dict[str, Any], group: str | None) -> Todo | None:
    """Give a Pods, Object or External metric a TODO query; say what to write there."""
    metric_type = metric.get("type")
    if metric_type not in ("Pods", "Object", "External"):
        return None
    key = _SOURCE_KEYS[metric_type]
    source = metric[key] = dict(read.mapping(metric.get(key), ()))
    name = read.mapping(source.get("metric"), ()).get("name") or "?"
    source["query"] = f"{TODO_MARKER}: PromQL for {metric_type} metric {plain(name)}"
    comment = _todo_comment(metric_type, source, name)
    if group is not None:
        comment += (f"  The HPA asks API group {shown(group)} for it (KEP-6382): write what "
                    "that provider computes.",)
    return Todo(metric_index=index, comment=comment)


def _todo_comment(metric_type: str, source: Mapping[str, Any], name: str) -> tuple[str, ...]:
    series = _prometheus_name(name)
    selector = read.mapping(source.get("metric"), ()).get("selector")
    matchers = _matchers(selector)
    if metric_type == "Pods":
        shape = "one series per pod, with a `pod` label"
        example = f"sum by (pod) (rate({series}{{${{pod_selector}}{matchers}}}[2m]))"
    elif metric_type == "Object":
        described = read.mapping(source.get("describedObject"), ())
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
