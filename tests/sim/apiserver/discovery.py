"""Discovery documents: legacy (/api, /apis, /api/v1, /apis/<g>/<v>) and aggregated (v2, v2beta1).

kubectl 1.32 asks /api and /apis for ``application/json;g=apidiscovery.k8s.io;v=v2;
as=APIGroupDiscoveryList`` and recognises the answer only by the parameters of the response's
Content-Type; ``kubectl scale`` then finds ``<plural>/scale`` and its autoscaling/v1 Scale kind
there. kubernetes-asyncio's ``get_api_resources`` reads the legacy APIResourceList.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import Any

from .errors import ApiError, not_acceptable
from .resources import Registry, ResourceType
from .wire import JSON

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

_SUB_KINDS = {"scale": ("autoscaling", "v1", "Scale")}


def _storage_hash(rt: ResourceType) -> str:
    digest = hashlib.sha256(f"{rt.group}/{rt.version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _sub_kind(rt: ResourceType, sub: str) -> tuple[str, str, str]:
    return _SUB_KINDS.get(sub, (rt.group, rt.version, rt.kind))


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)} \
        if versions and group else None


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular,
                                 "namespaced": rt.namespaced, "kind": rt.kind,
                                 "verbs": list(rt.verbs)}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        entry["storageVersionHash"] = _storage_hash(rt)
        resources.append(entry)
        for sub in rt.subresources:
            g, v, k = _sub_kind(rt, sub)
            sub_entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "",
                                         "namespaced": rt.namespaced, "kind": k,
                                         "verbs": ["get", "patch", "update"]}
            if (g, v) != (rt.group, rt.version):
                sub_entry["group"], sub_entry["version"] = g, v
            resources.append(sub_entry)
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular, "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subs = []
    for sub in rt.subresources:
        g, v, k = _sub_kind(rt, sub)
        subs.append({"subresource": sub, "responseKind": {"group": g, "version": v, "kind": k},
                     "verbs": ["get", "patch", "update"]})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(registry: Registry, *, core: bool, version: str = "v2") -> dict[str, Any]:
    """The APIGroupDiscoveryList for /api (core) or /apis (every named group)."""
    items = []
    for group, versions in registry.group_versions().items():
        if bool(group) == core:
            continue
        items.append({
            "metadata": {"name": group, "creationTimestamp": None} if group
            else {"creationTimestamp": None},
            "versions": [{"version": v, "resources": [
                _aggregated_resource(rt) for rt in registry.in_group_version(group, v)],
                "freshness": "Current"} for v in versions],
        })
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}",
            "metadata": {}, "items": items}


def version_info() -> dict[str, str]:
    return {"major": "1", "minor": "32", "gitVersion": "v1.32.0-sim", "gitCommit": "0" * 40,
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.23.4", "compiler": "gc", "platform": "linux/amd64"}


def openapi_v3_paths(registry: Registry) -> dict[str, Any]:
    """A minimal /openapi/v3 index: one entry per group version, pointing at a tiny document."""
    paths: dict[str, Any] = {}
    for group, versions in registry.group_versions().items():
        for v in versions:
            key = f"apis/{group}/{v}" if group else "api/v1"
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash=0"}
    return {"paths": paths}


def openapi_v3_document(registry: Registry, group: str, version: str) -> dict[str, Any]:
    """A minimal OpenAPI v3 document: one permissive schema per kind, tagged with its GVK.

    Enough for kubectl's client-side validation (create/apply) to find the kind and accept
    any fields; real schemas are not modelled.
    """
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schemas = {
        f"{group or 'core'}.{version}.{rt.kind}": {
            **loose, "x-kubernetes-group-version-kind": [
                {"group": rt.group, "version": rt.version, "kind": rt.kind}],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": loose, "spec": loose, "status": loose}}
        for rt in registry.in_group_version(group, version)}
    paths = {
        f"{rt.path_prefix('{namespace}' if rt.namespaced else None)}/{{name}}": {"patch": {
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version,
                                                "kind": rt.kind},
            # kubectl looks for this parameter to choose server-side field validation; the
            # simulator accepts the parameter and checks only what objects.py validates.
            "parameters": [{"name": "fieldValidation", "in": "query",
                            "schema": {"type": "string"}}],
            "responses": {}}}
        for rt in registry.in_group_version(group, version)}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0-sim"},
            "paths": paths, "components": {"schemas": schemas}}


def openapi_v2() -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0-sim"},
            "paths": {}, "definitions": {}}


def answer(registry: Registry, path: str, accept: str, address: str) -> tuple[Any, str]:
    """(body, content type) for a discovery, version or OpenAPI path; 404/406 as upstream."""
    if path in ("/api", "/apis"):
        for version, media in (("v2", AGGREGATED_V2), ("v2beta1", AGGREGATED_V2BETA1)):
            if f"v={version};as=APIGroupDiscoveryList" in accept.replace(" ", ""):
                return aggregated(registry, core=path == "/api", version=version), media
    found = _document(registry, path, address)
    if found is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    # Only JSON is served: a client that accepts nothing else (protobuf) gets 406.
    if not any(a.split(";")[0].strip() in (JSON, "*/*") and "as=" not in a
               for a in accept.split(",")):
        raise not_acceptable([JSON])
    return found, JSON


def _document(registry: Registry, path: str, address: str) -> Any:
    parts = path.strip("/").split("/")
    fixed: dict[str, Callable[[], Any]] = {
        "/api": lambda: api_versions(address),
        "/apis": lambda: api_group_list(registry),
        "/api/v1": lambda: api_resource_list(registry, "", "v1"),
        "/version": version_info, "/openapi/v2": openapi_v2,
        "/openapi/v3": lambda: openapi_v3_paths(registry),
    }
    if path in fixed:
        return fixed[path]()
    if parts[0] == "apis" and len(parts) == 2:
        return api_group(registry, parts[1])
    if parts[0] == "apis" and len(parts) == 3:
        return api_resource_list(registry, parts[1], parts[2])
    if parts[:3] == ["openapi", "v3", "api"] and len(parts) == 4:
        return openapi_v3_document(registry, "", parts[3])
    if parts[:3] == ["openapi", "v3", "apis"] and len(parts) == 5:
        return openapi_v3_document(registry, parts[3], parts[4])
    return None
