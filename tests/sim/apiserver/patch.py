"""The PATCH bodies a real API server accepts: JSON merge patch, strategic merge, JSON Patch.

Strategic merge is approximated: like a merge patch, except that lists of objects keyed by
``name`` (containers, env, volumes) or ``type`` (conditions) merge element by element, and a
``$patch: delete`` element removes its match. That covers what clients of this project send;
the full per-field patch-strategy metadata of upstream is not modelled.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, bad_request

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE, STRATEGIC, APPLY)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_key(items: list[Any]) -> str | None:
    for key in ("name", "type"):
        if items and all(isinstance(i, dict) and key in i for i in items):
            return key
    return None


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        old = result.get(key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(old, list) and (mk := _merge_key(value)):
            result[key] = _merge_list(old, value, mk)
        else:
            result[key] = strategic_merge_patch(old, value)
    return result


def _merge_list(old: list[Any], patch: list[Any], key: str) -> list[Any]:
    merged = [copy.deepcopy(i) for i in old]
    for item in patch:
        index = next((n for n, o in enumerate(merged)
                      if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts[:-1]:
        if isinstance(doc, list):
            doc = doc[int(part)] if part.isdigit() and int(part) < len(doc) else None
        elif isinstance(doc, dict):
            doc = doc.get(part)
        else:
            doc = None
        if doc is None:
            raise ApiError(422, "Invalid", f"doc is missing path: {path!r}")
    return doc


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts, path), parts[-1]
    try:
        return parent[int(last)] if isinstance(parent, list) else parent[last]
    except (KeyError, IndexError, ValueError, TypeError):
        raise ApiError(422, "Invalid", f"doc is missing path: {path!r}") from None


def _remove(doc: Any, path: str) -> Any:
    value = _get(doc, path)
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    if isinstance(parent, list):
        parent.pop(int(parts[-1]))
    else:
        del parent[parts[-1]]
    return value


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if index > len(parent):
            raise ApiError(422, "Invalid", f"index out of bounds: {path!r}")
        parent.insert(index, copy.deepcopy(value))
    elif isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    else:
        raise ApiError(422, "Invalid", f"doc is missing path: {path!r}")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902; a body that is not a list is a 400 as upstream's decoder answers."""
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            if _pointer(path):
                _remove(doc, path)
            doc = _add(doc, path, op.get("value"))
        elif kind in ("move", "copy"):
            value = _remove(doc, op["from"]) if kind == "move" else copy.deepcopy(
                _get(doc, op["from"]))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"testing value {path} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc


def apply_patch(content_type: str, doc: dict[str, Any], body: Any, *, custom: bool) -> Any:
    """The patched document; the caller validates the result."""
    if content_type == JSON_PATCH:
        return json_patch(doc, body)
    if not isinstance(body, dict):
        raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    if content_type == MERGE:
        return merge_patch(doc, body)
    if content_type == STRATEGIC and not custom:
        return strategic_merge_patch(doc, body)
    raise ApiError(415, "UnsupportedMediaType",
                   f"the body of the request was in an unknown format - accepted media types "
                   f"include: {', '.join(t for t in PATCH_TYPES if t not in (APPLY,) and not (custom and t == STRATEGIC))}")
