"""KEDA ScaledObjects (``keda.sh/v1alpha1``) as our target tables.

A ScaledObject is an HPA that KEDA writes, plus KEDA's own scale to and from zero. What maps:
``minReplicaCount`` (default 0) and ``maxReplicaCount`` (default 100); the triggers
(``keda_triggers``); ``advanced.horizontalPodAutoscalerConfig.behavior`` as ``behavior``;
``cooldownPeriod`` (default 300) and ``initialCooldownPeriod`` where the target can go to
zero; ``fallback``; the pause annotations. ``pollingInterval`` (default 30) is when KEDA
checks activation; here every pass does, so it becomes ``syncPeriod`` only where KEDA's HPA
itself waited for it (every trigger ``useCachedMetrics``). What has no counterpart
(``idleReplicaCount``, ``scalingModifiers`` formulas, the paused-scale-down annotation,
other scalers) is said, in a note and beside the target, with a suggestion where PromQL can
express it. Names are checked by the API server's rules and every string is escaped by the
writer, as for HPAs (``hpa``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from autoscaler.config.issues import Loc, format_loc
from autoscaler.config.query import TODO_MARKER
from autoscaler.config.schema import ExternalSourceModel, TargetModel
from autoscaler.importers import manifest_fields as read
from autoscaler.importers.keda_cron import CronWindows
from autoscaler.importers.keda_metadata import Authentications, read_trigger
from autoscaler.importers.keda_triggers import (
    Converted,
    convert_trigger,
    setting,
    supported_keys,
)
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import (
    dns_label_problem,
    dns_subdomain_problem,
    plain,
    shown,
)
from autoscaler.importers.output import Imported, Todo

API_VERSION = "keda.sh/v1alpha1"
LIST_KINDS = frozenset({"List", "ScaledObjectList"})
PAUSED = "autoscaling.keda.sh/paused"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
PAUSED_SCALE_DOWN = "autoscaling.keda.sh/paused-scale-down"
DEFAULTS = {"minReplicaCount": 0, "maxReplicaCount": 100, "pollingInterval": 30,
            "cooldownPeriod": 300, "initialCooldownPeriod": 0}
"""KEDA's defaults for the counts and periods a ScaledObject may leave out."""
_SPEC_KEYS = frozenset({"scaleTargetRef", "pollingInterval", "initialCooldownPeriod",
                        "cooldownPeriod", "idleReplicaCount", "minReplicaCount",
                        "maxReplicaCount", "advanced", "triggers", "fallback"})
_INT32 = read.INT32


def find_scaled_objects(document: Mapping[str, Any],
                        loc: Loc = ()) -> tuple[list[tuple[Loc, Mapping[str, Any]]], list[str]]:
    """The ScaledObjects of one document (lists flattened), and notes on what was skipped."""
    kind = read.string(document.get("kind"), (*loc, "kind"))
    if kind == "ScaledObject":
        return [(loc, document)], []
    if kind not in LIST_KINDS:
        why = ": it runs Jobs, not a workload's replicas" if kind == "ScaledJob" else ""
        return [], [f"skipped {plain(kind or 'a document without kind')} "
                    f"{read.name_of(document)}{why}"]
    found: list[tuple[Loc, Mapping[str, Any]]] = []
    skipped: list[str] = []
    for index, value in enumerate(read.array(document.get("items"), (*loc, "items"))):
        item = read.mapping(value, (*loc, "items", index))
        if kind == "ScaledObjectList":
            item = {"kind": "ScaledObject", "apiVersion": document.get("apiVersion"), **item}
        more, notes = find_scaled_objects(item, (*loc, "items", index))
        found += more
        skipped += notes
    return found, skipped


def import_scaled_object(so: Mapping[str, Any], *, default_namespace: str = "default",
                         cron: CronWindows | None = None,
                         authentications: Authentications | None = None,
                         ) -> tuple[Imported, dict[str, Any] | None, dict[str, tuple[str, ...]]]:
    """One ScaledObject as a target, its Prometheus server (and the server's comments).

    ``cron`` converts cron triggers across one import (a budget of distinct windows);
    ``authentications`` are the input's TriggerAuthentications, named in the secrets' TODOs.
    """
    api_version = read.string(so.get("apiVersion"), ("apiVersion",))
    if api_version != API_VERSION:
        raise ManifestError(("apiVersion",), f"{shown(api_version)} is not supported "
                            f"(use {API_VERSION})")
    metadata = read.mapping(so.get("metadata"), ("metadata",))
    name = read.name(metadata.get("name"), ("metadata", "name"), dns_subdomain_problem)
    if name is None:
        raise ManifestError(("metadata", "name"), "required")
    namespace = read.name(metadata.get("namespace"), ("metadata", "namespace"),
                          dns_label_problem)
    notes = [] if namespace else [f"{name}: no metadata.namespace, using {default_namespace!r}"]
    namespace = namespace or default_namespace
    key = f"{namespace}/{name}"
    spec = read.mapping(so.get("spec"), ("spec",))
    notes += [f"{key}: {format_loc(('spec', k))} is not imported"
              for k in sorted(set(spec) - _SPEC_KEYS)]
    counts = {k: read.whole(spec.get(k), ("spec", k)) for k in (*DEFAULTS, "idleReplicaCount")}
    converted, sync_period = _triggers(spec, counts, cron or CronWindows(),
                                       (namespace, authentications or {}))
    table: dict[str, Any] = {"namespace": namespace,
                             "scaleTargetRef": _target(spec.get("scaleTargetRef"))}
    words = _Words(key=key, converted=converted)
    _bounds(table, counts, converted, words)
    if sync_period is not None:
        table["syncPeriod"] = sync_period
    _pause(table, read.mapping(metadata.get("annotations"), ("metadata", "annotations")), words)
    _fallback(table, spec.get("fallback"), counts, words)
    advanced = read.mapping(spec.get("advanced"), ("spec", "advanced"))
    hpa_config = read.mapping(advanced.get("horizontalPodAutoscalerConfig"),
                              ("spec", "advanced", "horizontalPodAutoscalerConfig"))
    behavior_loc = ("spec", "advanced", "horizontalPodAutoscalerConfig", "behavior")
    if behavior := read.behavior(hpa_config.get("behavior"), behavior_loc):
        table["behavior"] = behavior
    _modifiers(advanced.get("scalingModifiers"), converted, words)
    for schedule in converted.schedules:
        if schedule["minReplicas"] > table["maxReplicas"]:
            # KEDA's HPA caps the cron trigger's desiredReplicas at maxReplicaCount.
            words.above("schedules", f"KEDA cron {plain(schedule['name'])}: desiredReplicas "
                        f"{schedule['minReplicas']}, capped at maxReplicaCount as KEDA's HPA "
                        "capped it.")
            schedule["minReplicas"] = table["maxReplicas"]
    if converted.schedules:
        table["schedules"] = converted.schedules
    table["metrics"] = converted.metrics
    notes += [f"{key}: {note}" for note in converted.notes]
    todos = tuple(Todo(metric_index=i, comment=c) for i, c in converted.todo_queries.items())
    imported = Imported(name=key, source=f"ScaledObject {key} ({API_VERSION})", table=table,
                        todos=todos, notes=tuple(notes), comments=words.comments,
                        tails={**converted.tails,
                               "": (*converted.tails.get("", ()), *words.tail)})
    return imported, converted.server, converted.server_comments


class _Words:
    """Comments and notes collected while a ScaledObject is converted."""

    def __init__(self, *, key: str, converted: Converted) -> None:
        self.key = key
        self.comments: dict[str, tuple[str, ...]] = dict(converted.comments)
        self.tail: list[str] = []
        self.converted = converted

    def above(self, key: str, *lines: str) -> None:
        self.comments[key] = (*self.comments.get(key, ()), *lines)

    def not_carried(self, what: str, why: str) -> None:
        self.above("", f"Not carried over: {what}: {why}")
        self.converted.notes.append(f"{what} is not carried over: {why}")


def _target(value: Any) -> dict[str, Any]:
    """``scaleTargetRef``: ``name`` required; KEDA's defaults are apps/v1 Deployment."""
    loc = ("spec", "scaleTargetRef")
    ref = read.reference(value, loc)
    if "name" not in ref:
        raise ManifestError((*loc, "name"), "required")
    return {"apiVersion": ref.get("apiVersion", "apps/v1"), "kind": ref.get("kind", "Deployment"),
            "name": ref["name"]}


def _triggers(spec: Mapping[str, Any], counts: Mapping[str, int | None], cron: CronWindows,
              auth: tuple[str, Authentications]) -> tuple[Converted, str | None]:
    """The converted triggers, and the sync period KEDA's pollingInterval stands for."""
    listed = read.array(spec.get("triggers"), ("spec", "triggers"))
    if not listed:
        raise ManifestError(("spec", "triggers"), "must list at least one trigger")
    supported = supported_keys(ExternalSourceModel)
    converted = Converted()
    triggers = [read_trigger(i, value, ("spec", "triggers", i), namespace=auth[0],
                             authentications=auth[1]) for i, value in enumerate(listed)]
    for trigger in triggers:
        convert_trigger(trigger, converted, supported=supported, cron=cron)
    polling = counts["pollingInterval"]
    if polling is not None and all(t.cached for t in triggers) and 1 <= polling <= 3600:
        converted.comments["syncPeriod"] = (
            "KEDA pollingInterval: every trigger used cached metrics, refreshed this often.",)
        return converted, f"{polling}s"
    if polling is not None:
        converted.tails[""] = (f"pollingInterval = {polling}  # KEDA: how often it checked "
                               "activation; every pass here does (syncPeriod, default 15s)",)
    return converted, None


def _bounds(table: dict[str, Any], counts: Mapping[str, int | None], converted: Converted,
            words: _Words) -> None:
    """min/max, idle, the sync period and the cooldowns of scale to zero."""
    minimum = counts["minReplicaCount"]
    minimum = DEFAULTS["minReplicaCount"] if minimum is None else minimum
    maximum = counts["maxReplicaCount"]
    table["maxReplicas"] = DEFAULTS["maxReplicaCount"] if maximum is None else maximum
    zero_capable = any(m["type"] in ("External", "Object") for m in converted.metrics)
    if minimum == 0 and not zero_capable:
        minimum = 1
        words.above("minReplicas", "KEDA minReplicaCount 0: scale to zero needs a metric that "
                    "can be read at zero pods (External, Object); cpu, memory and cron are not.")
        converted.notes.append("minReplicaCount 0 becomes minReplicas 1: no trigger that can "
                               "wake it from zero is carried over")
    table["minReplicas"] = minimum
    idle = counts["idleReplicaCount"]
    if idle is not None:
        words.not_carried(f"idleReplicaCount {idle}", f"KEDA drops to {idle} while every "
                          f"trigger is inactive and jumps to minReplicaCount {minimum} on "
                          "activity; here minReplicas stays the floor (set it to 0 to scale "
                          "to zero on the activation thresholds instead)")
    if minimum != 0:
        return
    supported = supported_keys(TargetModel)
    for key in ("cooldownPeriod", "initialCooldownPeriod"):
        value = counts[key]
        value = DEFAULTS[key] if value is None else value
        if key in supported:
            table[key] = value
        else:
            words.tail.append(f"{key} = {value}  # TODO: KEDA {key} {value}; this version "
                              "cannot set it")


def _pause(table: dict[str, Any], annotations: Mapping[str, Any], words: _Words) -> None:
    """KEDA's pause annotations as ``pausedReplicas``/``paused`` (ours, in the file)."""
    loc = ("metadata", "annotations")
    ref = table["scaleTargetRef"]
    workload = f"{ref['kind'].lower()}/{ref['name']}"
    replicas = read.string(annotations.get(PAUSED_REPLICAS), (*loc, PAUSED_REPLICAS))
    paused = read.string(annotations.get(PAUSED), (*loc, PAUSED))
    if replicas is not None:
        if not re.fullmatch(r"\d{1,10}", replicas.strip()) or int(replicas) > _INT32:
            raise ManifestError((*loc, PAUSED_REPLICAS), f"must be a replica count, got "
                                f"{shown(replicas)}")
        table["pausedReplicas"] = int(replicas)
        words.above("pausedReplicas", f"KEDA {PAUSED_REPLICAS}. From the cluster instead: "
                    f"kubectl annotate {plain(workload)} autoscaler.dev/paused-replicas="
                    f"{int(replicas)}")
    elif paused is not None and paused.strip() not in ("0", "f", "F", "FALSE", "false", "False"):
        # KEDA reads it with ParseBool and takes what is not a boolean as true.
        table["paused"] = True
        words.above("paused", f"KEDA {PAUSED}. From the cluster instead: kubectl annotate "
                    f"{plain(workload)} autoscaler.dev/paused=true")
    if read.string(annotations.get(PAUSED_SCALE_DOWN), (*loc, PAUSED_SCALE_DOWN)) is not None:
        words.not_carried(PAUSED_SCALE_DOWN, "there is no scale-down-only pause here")


def _fallback(table: dict[str, Any], value: Any, counts: Mapping[str, int | None],
              words: _Words) -> None:
    """KEDA's fallback: after more than failureThreshold failures, go to replicas."""
    if value is None:
        return
    loc = ("spec", "fallback")
    fallback = read.mapping(value, loc)
    threshold = read.whole(fallback.get("failureThreshold"), (*loc, "failureThreshold"))
    replicas = read.whole(fallback.get("replicas"), (*loc, "replicas"))
    if threshold is None or replicas is None:
        missing = "failureThreshold" if threshold is None else "replicas"
        raise ManifestError((*loc, missing), "required")
    behavior = read.string(fallback.get("behavior"), (*loc, "behavior")) or "static"
    if behavior in ("currentReplicas", "currentReplicasIfLower"):
        words.not_carried(f"fallback behavior {behavior}", "without a fallback the target "
                          "holds its replicas while its metrics are invalid, which is "
                          "currentReplicas; there is no fallback that only scales down")
        return
    if behavior not in ("static", "currentReplicasIfHigher"):
        raise ManifestError((*loc, "behavior"), f"must be static, currentReplicas, "
                            f"currentReplicasIfHigher or currentReplicasIfLower, got "
                            f"{shown(behavior)}")
    low, high = table["minReplicas"], table["maxReplicas"]
    clamped = min(max(replicas, low), high)
    # KEDA falls back once a trigger has failed more than failureThreshold times in a row;
    # here after failureThreshold passes with every metric invalid: one more.
    table["fallback"] = {"failureThreshold": min(threshold + 1, _INT32), "replicas": clamped,
                         **({"allowScaleDown": True} if behavior == "static" else {})}
    words.above("fallback", f"KEDA fallback {behavior}: failureThreshold {threshold} "
                f"(more than {threshold} failures), replicas {replicas}"
                f"{f', kept within {low}..{high}' if clamped != replicas else ''}.")


def _modifiers(value: Any, converted: Converted, words: _Words) -> None:
    """scalingModifiers: one composite metric stands in for the External ones, as in KEDA."""
    loc = ("spec", "advanced", "scalingModifiers")
    modifiers = read.mapping(value, loc)
    formula = read.string(modifiers.get("formula"), (*loc, "formula"))
    if not formula:
        return
    target = read.string(modifiers.get("target"), (*loc, "target"))
    if not target:
        raise ManifestError((*loc, "target"), "required with a formula")
    kind = read.string(modifiers.get("metricType"), (*loc, "metricType")) or "AverageValue"
    field = "value" if kind == "Value" else "averageValue"
    kept = [i for i, m in enumerate(converted.metrics) if m["type"] != "External"]
    composite: dict[str, Any] = {
        "metric": {"name": "composite-metric"}, "target": {"type": kind, field: target},
        "query": f"{TODO_MARKER}: PromQL for the scalingModifiers formula"}
    converted.metrics[:] = [converted.metrics[i] for i in kept] + [
        {"type": "External", "external": composite}]
    renumber = {f"metrics[{old}]": f"metrics[{new}]" for new, old in enumerate(kept)}
    converted.comments = {renumber.get(k, k): v for k, v in converted.comments.items()
                          if not k.startswith("metrics[") or k in renumber}
    converted.tails = {renumber.get(k, k): v for k, v in converted.tails.items()
                       if not k.startswith("metrics[") or k in renumber}
    words.comments = {k: v for k, v in words.comments.items()
                      if not k.startswith("metrics[") or k in renumber}
    words.comments = {renumber.get(k, k): v for k, v in words.comments.items()}
    converted.todo_queries = {len(kept): _formula_todo(formula, converted.queries)}
    activation = read.string(modifiers.get("activationTarget"), (*loc, "activationTarget"))
    if activation:
        converted.tails[f"metrics[{len(kept)}]"] = tuple(setting(
            composite, "activationThreshold", activation, supported_keys(ExternalSourceModel),
            f"KEDA scalingModifiers.activationTarget {activation}"))
    words.not_carried("scalingModifiers", "a formula over triggers has no counterpart; one "
                      "External metric with a TODO query stands in for it")


def _formula_todo(formula: str, queries: Mapping[str, str]) -> tuple[str, ...]:
    lines = [f"TODO: KEDA combined its triggers with the formula {json.dumps(formula)}."]
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_-]*|\d+(?:\.\d+)?|[-+*/()]|\s+|.", formula)
    if all(t.strip() == "" or t in queries or re.fullmatch(r"\d+(?:\.\d+)?|[-+*/()]", t)
           for t in tokens) and any(t in queries for t in tokens):
        suggestion = "".join(f"({queries[t]})" if t in queries else t for t in tokens)
        shown_ = suggestion if suggestion.isprintable() else json.dumps(suggestion)
        lines.append(f"  In PromQL (each query one series without labels): {shown_}")
    else:
        lines.append("  It uses more than + - * / over prometheus triggers: write it by hand.")
    return tuple(lines)
