"""Reading fields of someone else's manifest: each checked for its shape, each name by its rule.

Shared by the importers (``hpa``, ``keda``, ``adapter_rules``). A reader returns the value
or raises ``ManifestError`` with the field's path from the object being imported, which the
caller turns into ``FILE:LINE: document N, PATH: message``. Absent and null mean the same
(unset), as in Kubernetes. Values reach messages only through ``manifests.shown``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from autoscaler.config.issues import Loc, format_loc
from autoscaler.importers.manifests import path_segment_problem, plain, shown

RULE_KEYS = ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance")
"""The keys of HPA's ``HPAScalingRules`` that the config takes."""
INT32 = 2**31 - 1


class ManifestError(ValueError):
    """A field an importer cannot read; ``loc`` is its path from the object (or the list)."""

    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(f"{format_loc(loc)}: {message}" if loc else message)
        self.loc = loc
        self.message = message


def mapping(value: Any, loc: Loc) -> Mapping[str, Any]:
    """A mapping field (absent or null: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(loc, f"must be a mapping, got {shown(value)}")
    return value


def array(value: Any, loc: Loc) -> list[Any]:
    """An array field (absent or null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(loc, f"must be an array, got {shown(value)}")
    return value


def string(value: Any, loc: Loc) -> str | None:
    """A string field (absent or null: None)."""
    if value is not None and not isinstance(value, str):
        raise ManifestError(loc, f"must be a string, got {shown(value)}")
    return value


def name(value: Any, loc: Loc, rule: Callable[[str], str | None]) -> str | None:
    """A name field, checked with the rule the API server applies to it (absent: None)."""
    text = string(value, loc)
    problem = None if text is None else rule(text)
    if problem:
        raise ManifestError(loc, problem)
    return text


def whole(value: Any, loc: Loc) -> int | None:
    """An int32 count or number of seconds the API types as a whole number, not negative
    (absent or null: None); what it must be beyond that is ``check``'s to say."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32:
        raise ManifestError(loc, f"must be a whole number from 0 to {INT32}, got {shown(value)}")
    return value


def quantity(value: Any, loc: Loc) -> str | int | float | None:
    """A Kubernetes quantity: a string ("500m") or a finite number (absent or null: None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ManifestError(loc, f"must be a quantity (such as 500m or 2), got {shown(value)}")
    copied: str | int | float = copy(value, loc)
    return copied


def metric_target(value: Any, loc: Loc) -> dict[str, Any]:
    """A ``MetricTarget``: its type, ``averageUtilization`` (int32) and quantities."""
    return _typed(mapping(value, loc), loc, _TARGET_FIELDS)


def _typed(value: Mapping[str, Any], loc: Loc,
           fields: Mapping[str, Callable[[Any, Loc], Any]]) -> dict[str, Any]:
    """``value``'s keys in their order, each read by its field's reader (else copied)."""
    read = {key: fields.get(key, copy)(item, (*loc, key)) for key, item in value.items()}
    return {key: item for key, item in read.items() if item is not None}


def copy(value: Any, loc: Loc) -> Any:
    """A manifest value as TOML can hold it: null means unset, so its key is left out. No
    Kubernetes field holds an infinity or NaN (JSON has neither)."""
    if isinstance(value, Mapping):
        return {k: copy(v, (*loc, k)) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if None in value:
            raise ManifestError((*loc, value.index(None)), "null is not allowed in an array")
        return [copy(v, (*loc, i)) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):  # YAML's .inf and .nan
        raise ManifestError(loc, f"must be a finite number, got {shown(value)}")
    return value


def reference(value: Any, loc: Loc) -> dict[str, Any]:
    """A CrossVersionObjectReference: ``kind`` and ``name`` are path segments upstream."""
    ref = mapping(value, loc)
    for key in ("kind", "name"):
        name(ref.get(key), (*loc, key), path_segment_problem)
    return {k: copy(ref[k], (*loc, k)) for k in ("apiVersion", "kind", "name")
            if ref.get(k) is not None}


def behavior(value: Any, loc: Loc) -> dict[str, Any]:
    """HPA's ``behavior`` as the config's table: the known rule keys of each direction."""
    given = mapping(value, loc)
    directions: dict[str, Any] = {}
    for direction in ("scaleUp", "scaleDown"):
        if given.get(direction) is not None:
            rules = mapping(given[direction], (*loc, direction))
            directions[direction] = _rules(rules, (*loc, direction))
    return directions


def _rules(rules: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
    """One direction's ``HPAScalingRules``, each field of the type the API gives it."""
    typed: dict[str, Any] = {
        "stabilizationWindowSeconds": whole(rules.get("stabilizationWindowSeconds"),
                                            (*loc, "stabilizationWindowSeconds")),
        "selectPolicy": string(rules.get("selectPolicy"), (*loc, "selectPolicy")),
        "tolerance": quantity(rules.get("tolerance"), (*loc, "tolerance")),
    }
    if rules.get("policies") is not None:
        policies = array(rules["policies"], (*loc, "policies"))
        if None in policies:
            raise ManifestError((*loc, "policies", policies.index(None)),
                                "null is not allowed in an array")
        typed["policies"] = [_policy(policy, (*loc, "policies", index))
                             for index, policy in enumerate(policies)]
    return {k: typed[k] for k in RULE_KEYS if typed.get(k) is not None}


def _policy(value: Any, loc: Loc) -> dict[str, Any]:
    return _typed(mapping(value, loc), loc, _POLICY_FIELDS)


_TARGET_FIELDS: Mapping[str, Callable[[Any, Loc], Any]] = {
    "type": string, "averageUtilization": whole, "value": quantity, "averageValue": quantity}
_POLICY_FIELDS: Mapping[str, Callable[[Any, Loc], Any]] = {
    "type": string, "value": whole, "periodSeconds": whole}


def name_of(document: Mapping[str, Any]) -> str:
    """``metadata.name`` of a document for a note, or ``?``."""
    metadata = document.get("metadata")
    text = metadata.get("name") if isinstance(metadata, Mapping) else None
    return plain(text) if isinstance(text, str) else "?"
