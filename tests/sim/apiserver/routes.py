"""The HTTP face of the simulator: path parsing, content negotiation, auth and the handlers.

One catch-all aiohttp handler parses the path as the real server's RequestInfo resolver does
(``/api/v1/...`` and ``/apis/<group>/<version>/...``, optional ``namespaces/<ns>/``, name,
subresource), authenticates the bearer token (401), holds or cuts a partitioned user's request,
authorizes the verb (403), applies injected faults, then dispatches to discovery, the REST
storage, Table output or a watch stream. Each request is logged once, when its answer is sent
(or known never to be), with when it arrived, was applied and was answered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from . import discovery, leases, managed, sharding
from .access import Principal, RequestRecord, access_review
from .apply import server_side_apply
from .errors import (
    ApiError,
    bad_request,
    forbidden,
    injected,
    method_not_allowed,
    unauthorized,
)
from .patch import APPLY, PATCH_TYPES
from .resources import ResourceType
from .selectors import parse_field_selector, parse_label_selector
from .tables import table, wants_table
from .wire import JSON, encode, list_body

if TYPE_CHECKING:
    from .server import SimApiServer



@dataclass(slots=True, kw_only=True)
class RequestInfo:
    """A resource path as upstream's RequestInfoFactory reads it, before any lookup."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None
    verb: str

    @property
    def resource(self) -> str:
        return f"{self.plural}/{self.subresource}" if self.subresource else self.plural


@dataclass(slots=True, kw_only=True)
class RequestTimes:
    """The sim clock's monotonic readings of one request, filled in as it is served."""

    arrived: float
    applied: float | None = None


@dataclass(slots=True)
class Target:
    """A resource path resolved to a served type."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    verb: str

    @property
    def resource(self) -> str:
        return f"{self.rt.plural}/{self.subresource}" if self.subresource else self.rt.plural


_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_NOT_FOUND = "the server could not find the requested resource"


def _verb(method: str, name: str | None, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else ("get" if name else "list")
    collection = {"POST": "create", "DELETE": "deletecollection"}
    single = {"PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}
    return (single if name else collection).get(method, method.lower())


def _is_watch(query: Any) -> bool:
    return query.get("watch", "").lower() in ("true", "1")


def json_response(body: Any, status: int = 200, content_type: str = JSON) -> web.Response:
    return web.Response(body=encode(body), status=status,
                        headers={"Content-Type": content_type})


def error_response(error: ApiError) -> web.Response:
    response = json_response(error.status(), error.code)
    if error.code == 429:
        response.headers["Retry-After"] = str(error.retry_after or 1)
    return response


class Router:
    def __init__(self, server: SimApiServer) -> None:
        self.server = server

    # parsing -----------------------------------------------------------------------------
    @staticmethod
    def request_info(method: str, path: str, query: Any) -> RequestInfo | None:
        """Parse a resource path; None for discovery and other non-resource paths."""
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return None
        namespace = None
        if rest[0] == "namespaces" and len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
        name = rest[1] if len(rest) > 1 else None
        return RequestInfo(group=group, version=version, plural=rest[0], namespace=namespace,
                           name=name, subresource="/".join(rest[2:]) or None,
                           verb=_verb(method, name, _is_watch(query)))

    def resolve(self, info: RequestInfo) -> Target:
        """The served type of an authorized request, or 404 as the real server answers."""
        rt = self.server.registry.lookup(info.group, info.version, info.plural)
        if rt is None or (info.subresource is not None and
                          info.subresource not in rt.subresources):
            raise ApiError(404, "NotFound", _NOT_FOUND)
        namespace = info.namespace if rt.namespaced else None
        if not rt.namespaced and info.namespace not in (None, info.name):
            raise ApiError(404, "NotFound", _NOT_FOUND)
        if rt.namespaced and namespace is None and info.verb not in ("list", "watch"):
            raise ApiError(404, "NotFound", _NOT_FOUND)
        return Target(rt, namespace, info.name, info.subresource, info.verb)

    # the one handler ---------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        server = self.server
        clock = server.clock
        times = RequestTimes(arrived=clock.monotonic())
        info: RequestInfo | None = None
        user: str | None = None
        logged: list[int] = []
        due: int | None = None  # the status of an answer computed but not yet sent

        def log(code: int, *, answered: bool = True) -> None:
            if not logged:
                logged.append(code)
                server.log.append(_record(request, info, user, code, times,
                                          answered=clock.monotonic() if answered else None))

        try:
            principal = server.authenticate(request.headers.get("Authorization", ""))
            if principal is None:
                raise unauthorized()
            user = principal.user
            info = self.request_info(request.method, request.path, request.query)
            await self._cross_partition(request, user)
            # Authorization comes before the lookup, as upstream: a denied request for a
            # resource that does not exist is a 403, not a 404.
            if info is not None and not principal.allows(info.verb, info.resource,
                                                         info.namespace):
                raise forbidden(user=user, verb=info.verb, resource=info.resource,
                                group=info.group, namespace=info.namespace, name=info.name)
            await self._faults(request.path, info, user)
            target = self.resolve(info) if info is not None else None
            if target is not None and target.verb == "watch":
                # A watch is logged when its stream starts, so tests can wait for it.
                return await server.watches.serve(request, target, lambda: log(200), user)
            response = await self._dispatch(request, target, principal, times)
            due = response.status
            if response.status < 400 and (late := self._after(request.path, info, user)):
                await asyncio.sleep(late)
            log(response.status)
            return server.count_sent(user, response)
        except ApiError as error:
            log(error.code)
            return server.count_sent(user, error_response(error))
        except ConnectionResetError:
            log(0, answered=False)  # a partition cut it: no status ever reached the client
            return web.Response(status=500)  # never sent: aiohttp drops it on the closed socket
        except asyncio.CancelledError:
            # The client hung up (a timeout) before the answer was sent; 499 as nginx logs it.
            log(due if due is not None else 499, answered=False)
            raise
        finally:
            log(500)  # only if nothing above logged: an unexpected exception

    async def _cross_partition(self, request: web.Request, user: str) -> None:
        partition = self.server.partitions.get(user)
        if partition is not None and not partition.healed.is_set():
            partition.cut += 1
            await partition.cross(request.transport)

    async def _faults(self, path: str, info: RequestInfo | None, user: str) -> None:
        verb = info.verb if info else "get"
        resource = info.resource if info else None
        for rule in self.server.faults:
            if rule.matches(path, verb, resource, user):
                rule.remaining -= 1
                rule.arrived += 1
                if rule.delay:
                    await asyncio.sleep(rule.delay)
                if rule.held is not None:
                    await rule.held.wait()
                if rule.status is not None:
                    if rule.then is not None:
                        rule.then()
                    raise injected(rule.status, retry_after=rule.retry_after)
                return

    def _after(self, path: str, info: RequestInfo | None, user: str) -> float:
        """Run the actions due after this request; how long its answer is then held."""
        verb = info.verb if info else "get"
        resource = info.resource if info else None
        late = 0.0
        for rule in self.server.after_rules:
            if rule.matches(path, verb, resource, user):
                rule.remaining -= 1
                rule.action()
                late = max(late, rule.answer_after)
        return late

    async def _dispatch(self, request: web.Request, target: Target | None,
                        principal: Principal, times: RequestTimes) -> web.StreamResponse:
        if target is None:
            return self._non_resource(request)
        if request.method == "GET":
            return self._get(request, target)
        body = await self._body(request)
        dry_run = request.query.getall("dryRun", [])
        if any(value != "All" for value in dry_run):
            raise bad_request(f"dryRun: Unsupported value: {dry_run[0]!r}: supported values: "
                              '"All"')
        writer = managed.request_manager(request.query.get("fieldManager"),
                                         request.headers.get("User-Agent", ""))
        applying = request.headers.get("Content-Type", "").split(";")[0].strip() == APPLY
        operation = "Apply" if request.method == "PATCH" and applying else "Update"
        with self.server.store.dry_run() if dry_run else contextlib.nullcontext(), \
                managed.manager(writer, operation):
            before = self.server.store.resource_version
            with leases.request(target.verb, principal.user):
                status, result = self._mutate(request, target, body, principal)
            if self.server.store.resource_version != before:
                times.applied = self.server.clock.monotonic()
        return json_response(result, status)

    def _mutate(self, request: web.Request, target: Target, body: Any,
                principal: Principal) -> tuple[int, Any]:
        method, rest = request.method, self.server.rest
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        if method == "POST" and name is None and rt.kind == "SelfSubjectAccessReview":
            return 201, access_review(principal, body)
        if method == "POST" and name is None:
            return 201, rest.create(rt, ns, body)
        if method == "PUT" and name is not None:
            return 200, rest.update(rt, ns, name, body, sub)
        if method == "PATCH" and name is not None:
            return self._patch(request, target, body)
        if method == "DELETE" and name is not None and sub is None:
            grace = request.query.get("gracePeriodSeconds")
            options = body if isinstance(body, dict) else {}
            return 200, rest.delete(rt, ns, name, options,
                                    int(grace) if grace is not None else None)
        if method == "DELETE" and name is None:
            return 200, self._delete_collection(request, target)
        raise method_not_allowed()

    def _patch(self, request: web.Request, target: Target, body: Any) -> tuple[int, Any]:
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        assert name is not None
        content_type, rest = _patch_type(request), self.server.rest
        if content_type == APPLY:
            return server_side_apply(rest, rt, ns, name, body=body, subresource=sub,
                                     field_manager=request.query.get("fieldManager"))
        return 200, rest.patch(rt, ns, name, content_type=content_type, body=body,
                               subresource=sub)

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        if "protobuf" in request.headers.get("Content-Type", ""):
            # Only JSON is served; client-go falls back to JSON on this 415.
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media "
                           f"types include: {JSON}, application/yaml")
        content_type = request.headers.get("Content-Type", "")
        try:
            return json.loads(raw)
        except ValueError as error:
            if content_type.split(";")[0].strip() == APPLY:
                return _apply_yaml(raw)
            if "yaml" in content_type:
                raise ApiError(415, "UnsupportedMediaType",
                               "YAML bodies are not supported by the simulated API server") \
                    from None
            raise bad_request(f"couldn't get version/kind; json parse error: {error}") from None

    # reads -------------------------------------------------------------------------------
    def _matcher(self, request: web.Request, rt: ResourceType,
                 shard: sharding.ShardSelector | None) -> Any:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""), rt.field_labels)
        return lambda obj: labels(obj["metadata"].get("labels") or {}) and fields(obj) and (
            shard is None or shard.matches(obj))

    def _get(self, request: web.Request, target: Target) -> web.Response:
        rt, server = target.rt, self.server
        as_table = wants_table(request.headers.get("Accept", JSON))
        if target.name is not None:
            obj = server.rest.get(rt, target.namespace, target.name, target.subresource)
            if as_table and target.subresource is None:
                return json_response(table(
                    rt, [obj], now=server.clock.now(), list_meta={
                        "resourceVersion": obj["metadata"]["resourceVersion"]},
                    include_object=request.query.get("includeObject", "Metadata")))
            return json_response(obj)
        items, meta = self._list(request, target)
        if as_table:
            return json_response(table(rt, items, now=server.clock.now(), list_meta=meta,
                                       include_object=request.query.get("includeObject",
                                                                        "Metadata")))
        if not rt.custom:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        # A view over another storage (events.k8s.io) is built per request: not cached.
        encoded = (server.encoded.item if rt.storage is None
                   else lambda item: encode(item)[:-1])
        return web.Response(body=list_body(
            {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta},
            [encoded(item) for item in items]), headers={"Content-Type": JSON})

    def _list(self, request: web.Request, target: Target) -> tuple[list[Any], dict[str, Any]]:
        query, store = request.query, self.server.store
        rv = query.get("resourceVersion", "")
        if rv not in ("", "0"):
            if not rv.isdigit():
                raise bad_request(f'resourceVersion: Invalid value: "{rv}": must be an integer')
            if int(rv) > store.resource_version:
                raise ApiError(504, "Timeout", f"Too large resource version: {rv}, current: "
                               f"{store.resource_version}", {"causes": [{
                                   "reason": "ResourceVersionTooLarge",
                                   "message": "Too large resource version"}],
                                   "retryAfterSeconds": 1})
        shard = sharding.requested(query, self.server.shard_selector_mode, watch=False)
        matcher = self._matcher(request, target.rt, shard)
        meta: dict[str, Any] = {"resourceVersion": str(store.resource_version)}
        limit = int(query.get("limit", "0") or 0)
        start = _decode_continue(query.get("continue", ""))
        if limit <= 0 or rv == "0":  # resourceVersion=0: the watch cache, which ignores limit
            items = self.server.rest.list(target.rt, target.namespace, matcher)
            if start:
                items = [i for i in items if _place(_slot(i)) > _place(start)]
        else:
            items, after = self.server.rest.list_page(
                target.rt, target.namespace, matcher, limit=limit,
                after=_place(start) if start else None)
            if len(items) > limit:
                meta["continue"] = _encode_continue(_slot(items[limit - 1]),
                                                    store.resource_version)
                # As the real server: unknown (left out) when selectors filter the list.
                if not _selects(query, shard):
                    meta["remainingItemCount"] = after + 1
                items = items[:limit]
        if shard is not None:
            meta["shardInfo"] = {"selector": shard.text}  # the echo: the server honoured it
        return items, meta

    # non-resource paths ------------------------------------------------------------------
    def _non_resource(self, request: web.Request) -> web.Response:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok", content_type="text/plain")
        body, content_type = discovery.answer(self.server.registry, path,
                                              request.headers.get("Accept", JSON),
                                              f"127.0.0.1:{self.server.port}")
        return json_response(body, content_type=content_type)

    def _delete_collection(self, request: web.Request, target: Target) -> dict[str, Any]:
        items, _ = self._list(request, target)
        rest = self.server.rest
        deleted = [rest.delete(target.rt, target.namespace, i["metadata"]["name"], {}, None)
                   for i in items]
        return {"kind": f"{target.rt.kind}List", "apiVersion": target.rt.api_version,
                "metadata": {"resourceVersion": str(self.server.store.resource_version)},
                "items": deleted}


def _record(request: web.Request, info: RequestInfo | None, user: str | None,
            code: int, times: RequestTimes, *, answered: float | None) -> RequestRecord:
    verb = info.verb if info else ("get" if request.method == "GET" else request.method.lower())
    return RequestRecord(
        method=request.method, path=request.path, query=dict(request.query), verb=verb,
        group=info.group if info else None, resource=info.resource if info else None,
        namespace=info.namespace if info else None, name=info.name if info else None,
        user=user, status=code, content_type=request.headers.get("Content-Type", ""),
        accept=request.headers.get("Accept", ""),
        user_agent=request.headers.get("User-Agent", ""), arrived=times.arrived,
        applied=times.applied, answered=answered)


def _patch_type(request: web.Request) -> str:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type not in PATCH_TYPES:
        raise ApiError(415, "UnsupportedMediaType",
                       f"the body of the request was in an unknown format - accepted media "
                       f"types include: {', '.join(PATCH_TYPES)}")
    return content_type


def _apply_yaml(raw: bytes) -> Any:
    """An apply body in YAML (JSON, which kubectl sends, is YAML too)."""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise bad_request(f"error decoding YAML: {error}") from None


def _slot(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _place(slot: str) -> tuple[str, str]:
    """A continue token's ``namespace/name`` as the store orders objects: by namespace, then
    name (comparing the joined strings would put ``a-b/x`` before ``a/y``)."""
    namespace, _, name = slot.rpartition("/")
    return namespace, name


def _selects(query: Mapping[str, str], shard: object) -> bool:
    return bool(query.get("labelSelector") or query.get("fieldSelector") or shard)


def _encode_continue(start: str, rv: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"v": "meta.k8s.io/v1", "rv": rv,
                                                "start": start}).encode()).decode()


def _decode_continue(token: str) -> str:
    if not token:
        return ""
    try:
        return str(json.loads(base64.urlsafe_b64decode(token.encode()))["start"])
    except (ValueError, KeyError):
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion "
                          "(version meta.k8s.io/v1)") from None

