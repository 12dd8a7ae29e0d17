"""The generic REST storage: create, get, list, update, patch, delete, and subresources.

It follows upstream's generic registry: system metadata (uid, creationTimestamp, generation,
resourceVersion) is the server's; an update with a stale resourceVersion is a 409 Conflict; a
no-op update writes nothing and keeps the resourceVersion; the main resource ignores status
changes where a status subresource exists, and the status subresource ignores everything else;
pods are deleted gracefully (deletionTimestamp first); objects with finalizers wait for them.
"""

from __future__ import annotations

import bisect
import secrets
import uuid
from datetime import timedelta
from typing import Any

from . import managed, objects, scale
from .clock import Clock, rfc3339
from .errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    namespace_not_found,
    not_found,
)
from .patch import apply_patch
from .resources import Registry, ResourceType
from .store import Obj, Store, copy_obj, json_copy

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(n: int = 5) -> str:
    return "".join(secrets.choice(_NAME_CHARS) for _ in range(n))


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


class Rest:
    def __init__(self, registry: Registry, store: Store, clock: Clock) -> None:
        self.registry, self.store, self.clock = registry, store, clock
        self._service_ips = 0

    # helpers -----------------------------------------------------------------------------
    def _current(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(rt.storage_key, namespace, name)
        if obj is None:
            raise not_found(rt, name)
        return objects.to_view(rt, obj)

    def _check_namespace(self, rt: ResourceType, namespace: str | None) -> None:
        if rt.namespaced and self.store.get(("", "namespaces"), None, namespace or "") is None:
            raise namespace_not_found(namespace or "")

    def _check_body(self, rt: ResourceType, body: Any, namespace: str | None) -> Obj:
        if not isinstance(body, dict):
            raise bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a "
                              f"{rt.kind}: body must be a JSON object")
        if body.get("apiVersion", rt.api_version) != rt.api_version or \
                body.get("kind", rt.kind) != rt.kind:
            raise bad_request(f"the API version in the data ({body.get('apiVersion')}) does not "
                              f"match the expected API version ({rt.api_version})")
        obj = copy_obj(body)
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace", namespace) != namespace:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        objects.check_decodable(rt, obj)
        return obj

    # reads -------------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str | None, name: str,
            subresource: str | None = None) -> Obj:
        obj = self._current(rt, namespace, name)
        return scale.scale_of(rt, obj) if subresource == "scale" else obj

    def list(self, rt: ResourceType, namespace: str | None, matches: Any = None) -> list[Obj]:
        """Matching objects, each a shallow copy: the list answer drops kind and apiVersion
        from its items but never touches nested values, so they may share the stored ones
        (a LIST of thousands of pods would otherwise spend its time deep-copying)."""
        views = (objects.to_view(rt, o) for o in self.store.scan(rt.storage_key, namespace))
        return [dict(v) for v in views if matches is None or matches(v)]

    def list_page(self, rt: ResourceType, namespace: str | None, matches: Any, *,
                  after: tuple[str, str] | None, limit: int) -> tuple[list[Obj], int]:
        """One page of ``list``: up to ``limit`` + 1 matching objects stored after the key
        ``after`` (namespace, name; the extra one says whether more follow), and how many
        objects are stored after the last one returned. Only what it returns is copied, and
        the page's start is found by bisection: paging through N objects costs O(N) instead
        of a copy of every object per page (200,000 pods in pages of 500: minutes)."""
        places = self.store.places(rt.storage_key, namespace)
        index = bisect.bisect_right(places, after) if after else 0
        page: list[Obj] = []
        while index < len(places) and len(page) <= limit:
            stored = self.store.peek(rt.storage_key, *places[index])
            assert stored is not None  # places and objects change together
            view = objects.to_view(rt, stored)
            index += 1
            if matches is None or matches(view):
                page.append(dict(view))
        return page, len(places) - index

    # writes ------------------------------------------------------------------------------
    def create(self, rt: ResourceType, namespace: str | None, body: Any) -> Obj:
        obj = self._check_body(rt, body, namespace)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise ApiError(500, "InternalError",
                           "resourceVersion should not be set on objects to be created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise invalid(rt.kind, rt.group, "", [
                    ("metadata.name", "FieldValueRequired",
                     "Required value: name or generateName is required")])
            meta["name"] = self._generate_name(rt, namespace, meta["generateName"])
        objects.check_name(rt, meta["name"])
        self._check_namespace(rt, namespace)
        if self.store.get(rt.storage_key, namespace, meta["name"]) is not None:
            raise already_exists(rt, meta["name"])
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=rfc3339(self.clock.now()))
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        if rt.generation:
            meta["generation"] = 1
        if rt.has_status:
            obj["status"] = {"phase": "Pending"} if rt.kind == "Pod" else {}
        if rt.kind == "Namespace":
            obj["status"] = {"phase": "Active"}
            obj["spec"] = {"finalizers": ["kubernetes"]}
        if rt.kind == "Service":
            self._allocate_cluster_ip(obj)
        objects.apply_defaults(rt, obj)
        if rt.kind == "Pod":
            obj["status"]["qosClass"] = objects.qos_class(obj["spec"])
        objects.validate(rt, obj, None)
        managed.record_write(rt, None, obj, subresource=None, now=rfc3339(self.clock.now()))
        stored = self.store.create(rt.storage_key, objects.to_storage(rt, obj), adopt=True)
        return objects.to_view(rt, stored)

    def _allocate_cluster_ip(self, service: Obj) -> None:
        spec = service.setdefault("spec", {})
        if spec.get("clusterIP") in (None, ""):
            self._service_ips += 1
            spec["clusterIP"] = f"10.96.{self._service_ips // 250}.{self._service_ips % 250 + 2}"
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        service["status"] = {"loadBalancer": {}}

    def _generate_name(self, rt: ResourceType, namespace: str | None, prefix: str) -> str:
        """A free name for generateName; upstream retries a taken one (RetryGenerateName)."""
        for _ in range(8):
            name = prefix + random_suffix()
            if self.store.get(rt.storage_key, namespace, name) is None:
                return name
        return name

    def update(self, rt: ResourceType, namespace: str | None, name: str, body: Any,
               subresource: str | None = None) -> Obj:
        if subresource == "scale":
            return self._update_scale(rt, namespace, name, body)
        old = self._current(rt, namespace, name)
        obj = self._check_body(rt, body, namespace)
        meta = obj["metadata"]
        if meta.get("name", name) != name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the "
                              f"name on the URL ({name})")
        meta["name"] = name
        self._check_precondition(rt, old, meta.get("resourceVersion"))
        return self._write(rt, old, obj, subresource)

    def _check_precondition(self, rt: ResourceType, old: Obj, rv: Any) -> None:
        if rv in (None, ""):
            if rt.custom:
                raise invalid(rt.kind, rt.group, old["metadata"]["name"], [(
                    "metadata.resourceVersion", "FieldValueInvalid",
                    "Invalid value: 0x0: must be specified for an update")])
            return
        if not str(rv).isdigit():
            raise bad_request(f'metadata.resourceVersion: Invalid value: "{rv}": '
                              "resourceVersion must be an integer")
        if str(rv) != old["metadata"]["resourceVersion"]:
            raise conflict(rt, old["metadata"]["name"])

    def _write(self, rt: ResourceType, old: Obj, obj: Obj, subresource: str | None, *,
               managed_as: str | None = None) -> Obj:
        """Merge ``obj`` over ``old`` as the main resource or the status subresource does;
        ``managed_as``: the subresource the write came through, for ``managedFields``."""
        if subresource == "status":
            new = json_copy(old)
            new["status"] = obj.get("status")
        elif subresource == "resize":
            new = _resized(old, obj)
        else:
            new = obj
            if rt.has_status:
                new["status"] = json_copy(old.get("status"))
            system = ("uid", "creationTimestamp", "generation", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "namespace", "managedFields")
            for key in system:
                new["metadata"].pop(key, None)
                if key in old["metadata"]:
                    new["metadata"][key] = old["metadata"][key]
            objects.apply_defaults(rt, new)
            if rt.generation and _spec_part(new) != _spec_part(old):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            managed.record_write(rt, old, new, subresource=managed_as,
                                 now=rfc3339(self.clock.now()))
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        objects.check_decodable(rt, new)
        objects.validate(rt, new, old)
        if new == old:  # upstream skips the etcd write: no new resourceVersion, no watch event
            return old
        if old["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers") \
                and rt.kind != "Pod":
            return objects.to_view(rt, self.store.delete(rt.storage_key, *self._slot(new)))
        return objects.to_view(rt, self.store.replace(rt.storage_key, objects.to_storage(rt, new),
                                                                adopt=True))

    @staticmethod
    def _slot(obj: Obj) -> tuple[str | None, str]:
        return obj["metadata"].get("namespace"), obj["metadata"]["name"]

    def _update_scale(self, rt: ResourceType, namespace: str | None, name: str, body: Any) -> Obj:
        if rt.scale is None:
            raise not_found(rt, name)
        old = self._current(rt, namespace, name)
        rv = ((body or {}).get("metadata") or {}).get("resourceVersion") \
            if isinstance(body, dict) else None
        if rv not in (None, "") and str(rv) != old["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        new = scale.with_scale(rt, json_copy(old), body)
        written = self._write(rt, old, new, None, managed_as="scale")
        return scale.scale_of(rt, written)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, *, content_type: str,
              body: Any, subresource: str | None = None) -> Obj:
        current = self.get(rt, namespace, name, subresource)
        patched = apply_patch(content_type, current, body, custom=rt.custom)
        if isinstance(patched, dict):
            meta = patched.setdefault("metadata", {})
            if isinstance(meta, dict) and meta.get("name", name) != name:
                raise bad_request("metadata.name: the name of the object does not match the "
                                  "name on the URL")
            if isinstance(meta, dict) and meta.get("uid", current["metadata"].get("uid")) != \
                    current["metadata"].get("uid"):
                raise conflict(rt, name)
        return self.update(rt, namespace, name, patched, subresource)

    def delete(self, rt: ResourceType, namespace: str | None, name: str,
               options: dict[str, Any], grace_query: int | None) -> Obj:
        old = self._current(rt, namespace, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") not in (None, old["metadata"]["uid"]) or pre.get(
                "resourceVersion") not in (None, old["metadata"]["resourceVersion"]):
            raise conflict(rt, name)
        if rt.kind == "Namespace":
            for other in self.registry:
                if other.namespaced and other.storage is None:
                    for item in self.store.list(other.storage_key, name):
                        self.store.delete(other.storage_key, name, item["metadata"]["name"])
        if rt.kind == "Pod":
            return self._delete_pod(rt, old, options, grace_query)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old
            new = json_copy(old)
            new["metadata"]["deletionTimestamp"] = rfc3339(self.clock.now())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return objects.to_view(rt, self.store.replace(rt.storage_key, new, adopt=True))
        return objects.to_view(rt, self.store.delete(rt.storage_key, namespace, name))

    def _delete_pod(self, rt: ResourceType, old: Obj, options: dict[str, Any],
                    grace_query: int | None) -> Obj:
        grace = grace_query if grace_query is not None else options.get("gracePeriodSeconds")
        if grace is None:
            grace = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        node = (old.get("spec") or {}).get("nodeName")
        if grace == 0 or not node or (old.get("status") or {}).get("phase") in (
                "Succeeded", "Failed"):
            return self.store.delete(rt.storage_key, *self._slot(old))
        if old["metadata"].get("deletionTimestamp"):
            return old
        new = json_copy(old)
        new["metadata"]["deletionTimestamp"] = rfc3339(
            self.clock.now() + timedelta(seconds=int(grace)))
        new["metadata"]["deletionGracePeriodSeconds"] = int(grace)
        return self.store.replace(rt.storage_key, new, adopt=True)


def _resized(old: Obj, obj: Obj) -> Obj:
    """A pod's ``/resize`` subresource (InPlacePodVerticalScaling): only the resources of its
    containers (and pod-level ``spec.resources``) change; the rest of the body is ignored,
    as the status subresource ignores all but the status. The kubelet applies them later."""
    new = json_copy(old)
    spec, wanted = new.setdefault("spec", {}), obj.get("spec") or {}
    for key in ("containers", "initContainers"):
        given = {c.get("name"): c for c in wanted.get(key) or [] if isinstance(c, dict)}
        for container in spec.get(key) or []:
            resources = (given.get(container.get("name")) or {}).get("resources")
            if resources is not None:
                container["resources"] = json_copy(resources)
    if wanted.get("resources") is not None:
        spec["resources"] = json_copy(wanted["resources"])
    return new
