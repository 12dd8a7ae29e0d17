"""KEDA triggers as our metrics, schedules and Prometheus servers, read as KEDA reads them.

Metadata is read as KEDA reads it (``keda_metadata``). A value given as ``<key>FromEnv``
comes from the workload's container and cannot be read here: it becomes a TODO.

- ``prometheus``: an External metric named ``s<N>-prometheus`` (KEDA's name for it), its
  ``query`` as written (``$`` doubled for our templates); ``threshold`` is per replica
  (``AverageValue``) unless ``metricType: Value``; ``activationThreshold`` and
  ``ignoreNullValues`` (default true: an empty answer is 0) become ``activationThreshold``
  and ``whenEmpty = "zero"``. The server settings become a Prometheus server table.
- ``cpu``/``memory``: Resource (or, with ``containerName``, ContainerResource) metrics.
- ``cron``: a schedule whose ``minReplicas`` is ``desiredReplicas`` (``keda_cron``).
- any other scaler: an External metric with a TODO query and, for scalers with a well-known
  Prometheus exporter, a starting point.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from autoscaler.config.durations import format_duration
from autoscaler.config.query import TODO_MARKER
from autoscaler.importers.keda_cron import CronWindows
from autoscaler.importers.keda_metadata import JSON_NUMBER, Metadata, Trigger
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import plain, shown
from autoscaler.importers.toml_out import inline, string

_GO_DURATION = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_EXPORTERS = {
    # scaler: (its threshold key, a PromQL starting point with the exporter that serves it)
    "kafka": ("lagThreshold", "sum(kafka_consumergroup_lag{consumergroup=<consumerGroup>,"
              "topic=<topic>}) (kafka_exporter)"),
    "rabbitmq": ("value", "sum(rabbitmq_queue_messages_ready{queue=<queueName>}) (RabbitMQ's "
                 "Prometheus plugin, per-object metrics)"),
    "redis": ("listLength", "sum(redis_key_size{key=<listName>}) (redis_exporter with "
              "--check-keys)"),
}


@dataclass(slots=True, kw_only=True)
class Converted:
    """What a ScaledObject's triggers become, and the words that go with it."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    schedules: list[dict[str, Any]] = field(default_factory=list)
    server: dict[str, Any] | None = None
    server_comments: dict[str, tuple[str, ...]] = field(default_factory=dict)
    comments: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tails: dict[str, tuple[str, ...]] = field(default_factory=dict)
    todo_queries: dict[int, tuple[str, ...]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    queries: dict[str, str] = field(default_factory=dict)
    """Trigger name -> its PromQL, for a scalingModifiers formula."""


def convert_trigger(trigger: Trigger, out: Converted, *, supported: frozenset[str],
                    cron: CronWindows) -> None:
    """Add what ``trigger`` becomes to ``out``; ``supported`` names the activation keys the
    config has (``activationThreshold``, ``whenEmpty``), the others are written as comments."""
    if trigger.type == "prometheus":
        _prometheus(trigger, out, supported)
    elif trigger.type in ("cpu", "memory"):
        _resource(trigger, out)
    elif trigger.type == "cron":
        _cron(trigger, out, cron)
    else:
        _other(trigger, out)


def _label(trigger: Trigger) -> str:
    named = f" {plain(trigger.name)}" if trigger.name else ""
    return f"KEDA trigger {trigger.index}{named} ({plain(trigger.type)})"


def _prometheus(trigger: Trigger, out: Converted, supported: frozenset[str]) -> None:
    meta, index = trigger.metadata, len(out.metrics)
    threshold = meta.number("threshold", positive=True)
    query = meta.text("query")
    if threshold is None:
        raise ManifestError((*meta.loc, "threshold"), "required")
    if query is None and meta.from_env("query") is None:
        raise ManifestError((*meta.loc, "query"), "required")
    if trigger.metric_type == "Utilization":
        raise ManifestError((*trigger.loc, "metricType"), "Utilization is for cpu and memory "
                            "triggers only (a prometheus trigger is AverageValue or Value)")
    value = "value" if trigger.metric_type == "Value" else "averageValue"
    source: dict[str, Any] = {
        "metric": {"name": f"s{trigger.index}-prometheus"},
        "target": {"type": trigger.metric_type or "AverageValue", value: threshold},
        "query": query.replace("$", "$$") if query else
        f"{TODO_MARKER}: the query KEDA reads from env {meta.from_env('query')}"}
    per = "per replica" if value == "averageValue" else "in all"
    out.comments[f"metrics[{index}]"] = (f"{_label(trigger)}: {threshold} {per}.",)
    if query is None:
        out.todo_queries[index] = (f"TODO: KEDA read this query from the container's "
                                   f"environment ({plain(meta.from_env('query') or '')}).",)
    tails = []
    activation = meta.number("activationThreshold")
    if activation is not None:
        tails += setting(source, "activationThreshold", activation, supported,
                          f"KEDA activationThreshold {activation}")
    if meta.boolean("ignoreNullValues", True):
        tails += setting(source, "whenEmpty", "zero", supported, "KEDA ignoreNullValues "
                          "(default true): an empty answer, NaN or Inf counts as 0")
    out.tails[f"metrics[{index}]"] = tuple(tails)
    out.metrics.append({"type": "External", "external": source})
    if query:
        out.queries[trigger.name or f"trigger{trigger.index}"] = query
    _server(trigger, out)


def setting(source: dict[str, Any], key: str, value: Any, supported: frozenset[str],
            why: str) -> list[str]:
    """``key = value`` in the metric's source table, or a commented line if not supported."""
    if key in supported:
        source[key] = value
        return []
    return [f"external.{key} = {inline(value)}  # TODO: {why}; this version cannot set it"]


def _server(trigger: Trigger, out: Converted) -> None:
    """The trigger's Prometheus server; a target has one, so a second one is not carried."""
    meta = trigger.metadata
    server: dict[str, Any] = {}
    comments: dict[str, tuple[str, ...]] = {}
    url = meta.text("serverAddress")
    if url is None and meta.from_env("serverAddress") is None:
        raise ManifestError((*meta.loc, "serverAddress"), "required")
    server["url"] = url or f"{TODO_MARKER}: the URL KEDA reads from env " \
                           f"{plain(meta.from_env('serverAddress') or '')}"
    headers = meta.pairs("customHeaders")
    if (org := meta.text("cortexOrgID")) is not None:
        headers["X-Scope-OrgID"] = org
    if headers:
        server["headers"] = headers
    parameters = meta.pairs("queryParameters")
    if (namespace := meta.text("namespace")) is not None:
        parameters["namespace"] = namespace  # KEDA adds it for Thanos' tenancy
    if parameters:
        server["queryParams"] = parameters
    if meta.boolean("unsafeSsl", False):
        server["insecureSkipVerify"] = True
    if (timeout := _timeout(meta)) is not None:
        server["timeout"] = timeout
    _auth(trigger, server, comments)
    if out.server is None:
        out.server, out.server_comments = server, comments
    elif out.server != server:
        out.notes.append(f"{_label(trigger)} asks another Prometheus server "
                         f"({shown(server['url'])}): a target here has one server, the first "
                         "trigger's; put this query on that server (Thanos, federation)")


def _timeout(meta: Metadata) -> str | None:
    """KEDA's ``timeout``: a Go duration, or a number of milliseconds."""
    text = meta.text("timeout")
    if text is None:
        return None
    if text.isdigit():
        return format_duration(int(text) / 1000)
    if re.fullmatch(f"(?:{_GO_DURATION.pattern})+", text):
        seconds = sum(float(number) * _GO_UNITS[unit] for number, unit in re.findall(
            r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", text))
        return format_duration(round(seconds, 3))
    raise ManifestError((*meta.loc, "timeout"), "must be a duration such as \"30s\" or a number "
                        f"of milliseconds, got {shown(text)}")


def _auth(trigger: Trigger, server: dict[str, Any], comments: dict[str, tuple[str, ...]]) -> None:
    """``authModes`` as our file-based settings, each secret a marked TODO."""
    modes = [m.strip() for m in (trigger.metadata.text("authModes") or "").split(",") if m.strip()]
    source = f"TriggerAuthentication {plain(trigger.auth)}" if trigger.auth else \
        "the trigger's TriggerAuthentication"

    def todo(parameter: str) -> str:
        found = trigger.secrets.get(parameter)
        where = f" ({found})" if found else ""
        return f"{TODO_MARKER}: a file holding {parameter} of {source}{where}"

    for mode in modes:
        if mode == "bearer":
            server["bearerTokenFile"] = todo("bearerToken")
            comments["bearerTokenFile"] = ("TODO: KEDA authModes bearer: write the token to a "
                                           "file only the daemon reads, and name it here.",)
        elif mode == "basic":
            server["basicAuth"] = {"username": f"{TODO_MARKER}: username of {source}",
                                   "passwordFile": todo("password")}
            comments["basicAuth"] = ("TODO: KEDA authModes basic: the username, and a file "
                                     "holding the password.",)
        elif mode == "custom":
            comments.setdefault("url", ())
            comments["url"] += (f"TODO: KEDA authModes custom sends customAuthHeader: "
                                f"customAuthValue from {source}; set it in headers.",)
        elif mode == "tls":
            comments.setdefault("url", ())
            comments["url"] += (f"TODO: KEDA authModes tls presents a client certificate "
                                f"(cert, key of {source}); this daemon does not: put a proxy "
                                "that does in front, or allow it by another means.",)
        else:
            comments.setdefault("url", ())
            comments["url"] += (f"TODO: KEDA authModes {shown(mode)} has no counterpart "
                                "here.",)
    if (provider := trigger.secrets.get("podIdentity")) is not None:
        comments.setdefault("url", ())
        comments["url"] += (f"TODO: KEDA signed in with pod identity {provider}; this daemon "
                            "sends a bearer token or basic auth only.",)
    elif trigger.auth and not modes:
        comments.setdefault("url", ())
        comments["url"] += (f"TODO: the trigger names {source} without authModes (pod "
                            "identity, a ca): set caFile or credentials here if it needs them.",)


def _resource(trigger: Trigger, out: Converted) -> None:
    meta, index = trigger.metadata, len(out.metrics)
    kind = meta.text("type")
    if kind is not None and trigger.metric_type is not None:
        raise ManifestError((*meta.loc, "type"), "only one of metadata.type and metricType "
                            "may be set (KEDA refuses both)")
    kind = kind or trigger.metric_type or "Utilization"
    value = meta.text("value")
    if value is None:
        raise ManifestError((*meta.loc, "value"), "required")
    if kind == "Utilization":
        if not value.isdigit() or not 0 < int(value) < 2**31:
            raise ManifestError((*meta.loc, "value"), f"must be a whole percentage above 0 for "
                                f"Utilization, got {shown(value)}")
        target: dict[str, Any] = {"type": kind, "averageUtilization": int(value)}
    elif kind == "AverageValue":
        target = {"type": kind, "averageValue": value}
    else:
        raise ManifestError((*meta.loc, "type"), f"must be Utilization or AverageValue, got "
                            f"{shown(kind)}")
    source: dict[str, Any] = {"name": trigger.type, "target": target}
    container = meta.text("containerName")
    if container:
        source = {"name": trigger.type, "container": container, "target": target}
        out.metrics.append({"type": "ContainerResource", "containerResource": source})
    else:
        out.metrics.append({"type": "Resource", "resource": source})
    out.comments[f"metrics[{index}]"] = (f"{_label(trigger)}.",)
    if (activation := meta.text("activationValue")) is not None:
        out.tails[f"metrics[{index}]"] = (f"activationValue = {string(activation)}  # KEDA: "
                                          "not carried over: a cpu or memory metric cannot "
                                          "be read at zero pods",)


def _cron(trigger: Trigger, out: Converted, cron: CronWindows) -> None:
    meta = trigger.metadata
    found = {key: meta.text(key) for key in ("timezone", "start", "end", "desiredReplicas")}
    for key, text in found.items():
        if text is None:
            raise ManifestError((*meta.loc, key), "required")
    desired_text = str(found["desiredReplicas"])
    if not re.fullmatch(r"[+-]?\d{1,10}", desired_text) or not 0 <= int(desired_text) < 2**31:
        raise ManifestError((*meta.loc, "desiredReplicas"), f"must be a replica count, got "
                            f"{shown(desired_text)}")
    desired = int(desired_text)
    window = cron.schedule(str(found["start"]), str(found["end"]), str(found["timezone"]))
    if isinstance(window, str):
        out.notes.append(f"{_label(trigger)} is not carried over: {window}")
        return
    if desired == 0:
        out.notes.append(f"{_label(trigger)} asks for 0 replicas: a schedule floor of 0 does "
                         "nothing, so it is not carried over (KEDA's docs call this an error)")
        return
    name = trigger.name or f"cron-{trigger.index}"
    out.schedules.append({"name": name, **window, "minReplicas": desired})


def _other(trigger: Trigger, out: Converted) -> None:
    """A scaler with no counterpart: a TODO External metric saying what to write."""
    index = len(out.metrics)
    threshold_key, example = _EXPORTERS.get(trigger.type, ("", ""))
    threshold = trigger.metadata.text(threshold_key) if threshold_key else None
    kind = "Value" if trigger.metric_type == "Value" else "AverageValue"
    value = "value" if kind == "Value" else "averageValue"
    target = threshold if threshold and JSON_NUMBER.fullmatch(threshold) else "1"
    out.metrics.append({"type": "External", "external": {
        "metric": {"name": f"s{trigger.index}-{re.sub(r'[^a-z0-9-]', '-', trigger.type.lower())}"},
        "target": {"type": kind, value: target},
        "query": f"{TODO_MARKER}: PromQL for what KEDA's {plain(trigger.type)} scaler reads"}})
    lines = [f"TODO: KEDA's {plain(trigger.type)} scaler reads its source itself; write PromQL "
             "for the same number (one series, or several to sum)."]
    if example:
        lines.append(f"  For example: {example}")
        lines.append(f"  KEDA metadata: {json.dumps(trigger.metadata.values, sort_keys=True)}")
    if target != threshold:
        lines.append(f"  TODO: set the target: KEDA's {threshold_key or 'threshold'} default "
                     "applied here.")
    out.todo_queries[index] = tuple(lines)
    out.comments[f"metrics[{index}]"] = (f"{_label(trigger)}: not carried over.",)
    out.notes.append(f"{_label(trigger)} is not carried over: its scaler has no counterpart "
                     "here; a TODO query stands in for it")


def supported_keys(model: type[Any]) -> frozenset[str]:
    """The camelCase keys a pydantic model takes (to write only settings the config has)."""
    return frozenset(f.alias or name for name, f in model.model_fields.items())
