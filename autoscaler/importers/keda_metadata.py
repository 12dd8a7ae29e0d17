"""A KEDA trigger entry read as KEDA reads it, and the TriggerAuthentications it may name.

Trigger ``metadata`` is a map of strings; KEDA trims each value and treats an empty one as
absent, reads booleans with Go's ``strconv.ParseBool``, numbers as JSON numbers (its
``float64`` fields), and maps (``customHeaders``, ``queryParameters``) as ``k=v,k=v``.
Errors name the field (``spec.triggers[0].metadata.threshold``); values reach messages and
comments only through ``manifests.shown``/``plain``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autoscaler.config.fields import quantity_problem
from autoscaler.config.issues import Loc
from autoscaler.importers import manifest_fields as read
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import plain, shown

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
"""A JSON number: what KEDA's ``float64`` metadata fields accept."""


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
        """A JSON number as KEDA parses it (``float64``), kept as written; one the config
        cannot take (negative, or past upstream's int64 milli-units) is refused here, by
        the config's own rule, rather than written into a file ``check`` refuses."""
        text = self.values.get(key)
        if text is None:
            return None
        if not JSON_NUMBER.fullmatch(text) or (positive and float(text) <= 0):
            wanted = "a number greater than 0" if positive else "a number"
            raise ManifestError((*self.loc, key), f"must be {wanted}, got {shown(text)}")
        if problem := quantity_problem(text, positive=positive):
            raise ManifestError((*self.loc, key), problem)
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
    metadata, spec = _as_mapping(document.get("metadata")), _as_mapping(document.get("spec"))
    name, namespace = metadata.get("name"), metadata.get("namespace", "default")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    sources: dict[str, str] = {}
    for secret in map(_as_mapping, _listed(spec.get("secretTargetRef"))):
        if all(isinstance(secret.get(k), str) for k in ("parameter", "name", "key")):
            sources[secret["parameter"]] = (f"key {plain(secret['key'])} of Secret "
                                            f"{plain(secret['name'])}")
    for env in map(_as_mapping, _listed(spec.get("env"))):
        if isinstance(env.get("parameter"), str) and isinstance(env.get("name"), str):
            sources[env["parameter"]] = f"env {plain(env['name'])} of the workload"
    provider = _as_mapping(spec.get("podIdentity")).get("provider")
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


def _as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
