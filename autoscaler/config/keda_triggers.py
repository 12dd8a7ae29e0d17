"""KEDA triggers as our metrics, schedules and Prometheus servers, read as KEDA reads them.

Trigger ``metadata`` is a map of strings; KEDA trims each value, treats an empty one as
absent, reads booleans with Go's ``strconv.ParseBool``, numbers as JSON numbers, and maps
(``customHeaders``, ``queryParameters``) as ``k=v,k=v``. A value given as ``<key>FromEnv``
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autoscaler.config import manifest_fields as read
from autoscaler.config.durations import format_duration
from autoscaler.config.errors import Loc
from autoscaler.config.keda_cron import CronWindows
from autoscaler.config.manifest_fields import ManifestError
from autoscaler.config.manifests import plain, shown
from autoscaler.config.query import TODO_MARKER
from autoscaler.config.toml_out import inline, string

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
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


class Metadata:
    """A trigger's ``metadata`` read as KEDA reads it; errors name ``metadata.<key>``."""

    def __init__(self, value: Any, loc: Loc) -> None:
        self.loc = (*loc, "metadata")
        self.values: dict[str, str] = {}
        for key, item in read.mapping(value, self.loc).items():
            text = read.string(_scalar_text(item), (*self.loc, key))
            if text is not None and text.strip():
                self.values[key] = text.strip()

    def text(self, key: str) -> str | None:
        return self.values.get(key)

    def from_env(self, key: str) -> str | None:
        """The environment variable a ``<key>FromEnv`` names, if the value comes from one."""
        return self.values.get(f"{key}FromEnv") if key not in self.values else None

    def boolean(self, key: str, default: bool) -> bool:
        text = self.values.get(key)
        if text is None:
            return default
        if text not in _TRUE | _FALSE:
            raise ManifestError((*self.loc, key), f"must be true or false, got {shown(text)}")
        return text in _TRUE

    def number(self, key: str, *, positive: bool = False) -> str | None:
        """A JSON number as KEDA parses it (``float64``), kept as written."""
        text = self.values.get(key)
        if text is None:
            return None
        if not _JSON_NUMBER.fullmatch(text) or (positive and float(text) <= 0):
            wanted = "a number greater than 0" if positive else "a number"
            raise ManifestError((*self.loc, key), f"must be {wanted}, got {shown(text)}")
        return text

    def pairs(self, key: str) -> dict[str, str]:
        """``k=v,k=v`` (each part trimmed; a value holding ``=`` is refused, as KEDA does)."""
        text = self.values.get(key)
        found: dict[str, str] = {}
        for part in (text.split(",") if text else []):
            pieces = part.strip().split("=")
            if len(pieces) != 2:
                raise ManifestError((*self.loc, key), f"expected key=value pairs separated by "
                                    f"commas, got {shown(part.strip())}")
            found[pieces[0].strip()] = pieces[1].strip()
        return found


def _scalar_text(value: Any) -> Any:
    """An unquoted YAML ``true`` or ``100.5`` as the text it stands for (the API server wants
    strings, but KEDA's own examples leave ``ignoreNullValues: false`` unquoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


@dataclass(frozen=True, slots=True, kw_only=True)
class Trigger:
    """One entry of ``spec.triggers``: its position, kind and what it says."""

    index: int
    loc: Loc
    type: str
    name: str | None
    metric_type: str | None
    metadata: Metadata
    auth: str | None
    """The TriggerAuthentication (or ``ClusterTriggerAuthentication/x``) it names."""
    cached: bool
    secrets: Mapping[str, str] = field(default_factory=dict)
    """Where that TriggerAuthentication takes each parameter from, when it was in the input
    (``bearerToken`` -> ``key token of Secret prom``)."""


Authentications = Mapping[str, Mapping[str, str]]
"""TriggerAuthentications of the input by ``namespace/name`` (``ClusterTriggerAuthentication/
name`` for cluster ones): parameter -> where its value comes from."""


def read_authentication(document: Mapping[str, Any]) -> tuple[str, dict[str, str]] | None:
    """A (Cluster)TriggerAuthentication's key and its parameters' sources, if readable.

    Only for comments: one that cannot be read is left out, never an error.
    """
    metadata, spec = as_mapping(document.get("metadata")), as_mapping(document.get("spec"))
    name, namespace = metadata.get("name"), metadata.get("namespace", "default")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    sources: dict[str, str] = {}
    for secret in map(as_mapping, _listed(spec.get("secretTargetRef"))):
        if all(isinstance(secret.get(k), str) for k in ("parameter", "name", "key")):
            sources[secret["parameter"]] = (f"key {plain(secret['key'])} of Secret "
                                            f"{plain(secret['name'])}")
    for env in map(as_mapping, _listed(spec.get("env"))):
        if isinstance(env.get("parameter"), str) and isinstance(env.get("name"), str):
            sources[env["parameter"]] = f"env {plain(env['name'])} of the workload"
    provider = as_mapping(spec.get("podIdentity")).get("provider")
    if isinstance(provider, str):
        sources["podIdentity"] = plain(provider)
    kind = document.get("kind")
    key = f"ClusterTriggerAuthentication/{name}" if kind == "ClusterTriggerAuthentication" \
        else f"{namespace}/{name}"
    return key, sources


def read_trigger(index: int, value: Any, loc: Loc, *, namespace: str = "default",
                 authentications: Authentications | None = None) -> Trigger:
    entry = read.mapping(value, loc)
    kind = read.string(entry.get("type"), (*loc, "type"))
    if not kind:
        raise ManifestError((*loc, "type"), "required")
    metric_type = read.string(entry.get("metricType"), (*loc, "metricType"))
    if metric_type not in (None, "AverageValue", "Value", "Utilization"):
        raise ManifestError((*loc, "metricType"), "must be AverageValue, Value or Utilization, "
                            f"got {shown(metric_type)}")
    reference = read.mapping(entry.get("authenticationRef"), (*loc, "authenticationRef"))
    auth = read.string(reference.get("name"), (*loc, "authenticationRef", "name"))
    auth_kind = read.string(reference.get("kind"), (*loc, "authenticationRef", "kind"))
    cached = entry.get("useCachedMetrics", False)
    if not isinstance(cached, bool):
        raise ManifestError((*loc, "useCachedMetrics"), f"must be true or false, got "
                            f"{shown(cached)}")
    cluster = auth_kind not in (None, "TriggerAuthentication")
    key = f"{auth_kind}/{auth}" if cluster else f"{namespace}/{auth}"
    return Trigger(index=index, loc=loc, type=kind, cached=cached,
                   name=read.string(entry.get("name"), (*loc, "name")), metric_type=metric_type,
                   metadata=Metadata(entry.get("metadata"), loc),
                   auth=f"{auth_kind}/{auth}" if auth and cluster else auth,
                   secrets=(authentications or {}).get(key, {}) if auth else {})


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
    target = threshold if threshold and _JSON_NUMBER.fullmatch(threshold) else "1"
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


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
