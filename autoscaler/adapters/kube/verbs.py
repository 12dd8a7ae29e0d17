"""The Kubernetes verb of an API request, as the API server's audit log and its
``apiserver_request_total`` name it: get, list, watch, create, update, patch, delete.

An HTTP GET is a ``get`` of one object, a ``list`` of a collection, or a ``watch`` when it
asks for one; discovery documents (``/api``, ``/apis/apps/v1``) are ``get``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

_WRITES = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_verb(method: str, url: str, query: Iterable[Any] | Mapping[str, Any] | None) -> str:
    """The verb of ``method`` on ``url`` with ``query`` (kubernetes-asyncio's list of pairs)."""
    method = method.upper()
    if method != "GET":
        return _WRITES.get(method, method.lower())
    if _asks_to_watch(query):
        return "watch"
    return "list" if _is_collection(urlsplit(url).path) else "get"


def _asks_to_watch(query: Iterable[Any] | Mapping[str, Any] | None) -> bool:
    pairs = query.items() if isinstance(query, Mapping) else (query or ())
    return any(pair[0] == "watch" and str(pair[1]).lower() in ("true", "1") for pair in pairs)


def _is_collection(path: str) -> bool:
    """``/api/v1/pods``, ``/apis/apps/v1/namespaces/ns/deployments``: yes; an object, its
    subresource, or a discovery document: no."""
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["api"]:
        rest = parts[2:]  # past "api", version
    elif parts[:1] == ["apis"]:
        rest = parts[3:]  # past "apis", group, version
    else:
        return False
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return len(rest) == 1
