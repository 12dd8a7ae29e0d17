"""Read and write any target's ``/scale`` subresource, with optimistic concurrency.

The target's kind is resolved through discovery, so Deployments, StatefulSets, ReplicaSets
and custom resources (Argo Rollouts, ...) are handled alike: named groups through
``CustomObjectsApi``'s scale calls, the core group (ReplicationController) through
``CoreV1Api``. A write is a PUT of the Scale carrying the resourceVersion we read, as
upstream's HPA and KEDA do; a 409 (``ConflictError``) means someone wrote in between, and
the reconciler re-reads and decides again rather than overwrite their change. Every write
names the field manager ``autoscaler`` (``runtime.ports.FIELD_MANAGER``): the API server then
records the daemon as whoever last set the replicas, which is how a zero it made is told
from one set by hand, whatever became of its own memory (``runtime.zero_owner``).

With a ``TargetCache``, a read of an apps/v1 Deployment, StatefulSet or ReplicaSet in a
synced namespace is served from the cache's watch (no HTTP call); anything else (custom
resources, a namespace still syncing) is a GET of ``/scale`` plus a GET of the object for
its annotations (the Scale carries none; pause annotations live on the object).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.adapters.kube.discovery import Discovery, ResourceInfo
from autoscaler.adapters.kube.structs import ObjectRef, Scale, annotations_of, replicas_managers
from autoscaler.config import ScaleTargetRef
from autoscaler.errors import AccessDeniedError, BadDataError, NotFoundError
from autoscaler.runtime.ports import FIELD_MANAGER

if TYPE_CHECKING:
    from autoscaler.adapters.kube.target_cache import TargetCache

log = structlog.get_logger("autoscaler.kube.scale")


def scale_from_json(body: dict[str, Any], target: ObjectRef) -> Scale:
    """The Scale of a response body; ``BadDataError`` if it is not one."""
    try:
        metadata, spec, status = (body.get(k) or {} for k in ("metadata", "spec", "status"))
        return Scale(
            target=ObjectRef(api_version=target.api_version, kind=target.kind,
                             namespace=target.namespace, name=target.name,
                             uid=metadata.get("uid")),
            spec_replicas=int(spec.get("replicas") or 0),
            status_replicas=int(status.get("replicas") or 0),
            selector=str(status.get("selector") or ""),
            resource_version=str(metadata.get("resourceVersion") or ""),
        )
    except (AttributeError, TypeError, ValueError) as error:
        raise BadDataError(
            f"/scale of {target.kind} {target.namespace}/{target.name} is not a Scale: {error}"
        ) from error


class ScaleClient:
    """GET and PUT ``/scale`` of any scalable kind the API server serves."""

    def __init__(self, api_client: ApiClient, discovery: Discovery, *,
                 targets: TargetCache | None = None) -> None:
        self._client = api_client
        self._discovery = discovery
        self._targets = targets
        self._custom = CustomObjectsApi(api_client)
        self._core = CoreV1Api(api_client)
        self._uids: dict[tuple[str, str, str, str], str] = {}

    def uid_of(self, namespace: str, ref: ScaleTargetRef) -> str | None:
        """The target's uid as its last /scale read reported it (events need it)."""
        return self._uids.get(_uid_key(namespace, ref))

    def cached_scale(self, namespace: str, ref: ScaleTargetRef) -> Scale | None:
        """The target's Scale from the watch cache, or ``None``: only the server can tell."""
        if self._targets is not None:
            cached = self._targets.lookup(namespace, ref)
            if cached is not None:
                return self._remember(cached, ref)
        return None

    async def get_scale(self, namespace: str, ref: ScaleTargetRef, *,
                        fresh: bool = False) -> Scale:
        """The target's Scale with its object's annotations, from the cache if it can and
        ``fresh`` is not asked for (after a conflict, or to learn whether a write landed)."""
        cached = None if fresh else self.cached_scale(namespace, ref)
        if cached is not None:
            return cached
        info = await self._resolve(ref)
        what = f"get /scale of {ref.kind} {namespace}/{ref.name}"
        with api_errors(what):
            if info.group:
                body = await self._custom.get_namespaced_custom_object_scale(
                    info.group, info.version, namespace, info.plural, ref.name)
            else:
                body = self._client.sanitize_for_serialization(
                    await self._core.read_namespaced_replication_controller_scale(
                        ref.name, namespace))
        scale = scale_from_json(body, _object_ref(namespace, ref))
        annotations, managers = await self._annotations(info, namespace, ref)
        return self._remember(dataclasses.replace(
            scale, annotations=annotations, replicas_managers=managers), ref)

    async def _annotations(self, info: ResourceInfo, namespace: str, ref: ScaleTargetRef,
                           ) -> tuple[Mapping[str, str], tuple[str, ...] | None]:
        """The object's annotations, and who last set its replicas (its managed fields)."""
        what = f"get {ref.kind} {namespace}/{ref.name} (for its annotations)"
        try:
            with api_errors(what):
                if info.group:
                    body = await self._custom.get_namespaced_custom_object(
                        info.group, info.version, namespace, info.plural, ref.name)
                else:
                    body = self._client.sanitize_for_serialization(
                        await self._core.read_namespaced_replication_controller(
                            ref.name, namespace))
        except AccessDeniedError as error:
            # Fail closed: without the annotations a paused target would be scaled.
            raise AccessDeniedError(
                f"{error} (grant get on {info.plural} in group {info.group or 'core'!r}: "
                "see deploy/rbac.yaml)") from error
        metadata = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        annotations = metadata.get("annotations") or {} if isinstance(metadata, dict) else {}
        if not isinstance(annotations, dict):
            raise BadDataError(f"{what}: metadata.annotations is not a map")
        return (annotations_of(annotations),
                replicas_managers(metadata) if isinstance(metadata, dict) else None)

    async def update_scale(
        self, namespace: str, ref: ScaleTargetRef, replicas: int, resource_version: str
    ) -> Scale:
        """PUT ``spec.replicas``; ``ConflictError`` if the object changed since it was read.

        The returned Scale carries the cached annotations for a cached kind, else none (the
        PUT's answer is a Scale, which has no annotations).
        """
        info = await self._resolve(ref)
        body: Any = {
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": ref.name, "namespace": namespace,
                         "resourceVersion": resource_version},
            "spec": {"replicas": replicas},
        }
        with api_errors(f"update /scale of {ref.kind} {namespace}/{ref.name} to {replicas}"):
            if info.group:
                result = await self._custom.replace_namespaced_custom_object_scale(
                    info.group, info.version, namespace, info.plural, ref.name, body,
                    field_manager=FIELD_MANAGER)
            else:
                result = self._client.sanitize_for_serialization(
                    await self._core.replace_namespaced_replication_controller_scale(
                        ref.name, namespace, body, field_manager=FIELD_MANAGER))
        written = scale_from_json(result, _object_ref(namespace, ref))
        if self._targets is not None:
            # The cache must not serve a version older than this write on the next pass.
            written = self._targets.record_write(namespace, ref, written)
        return self._remember(written, ref)

    def _remember(self, scale: Scale, ref: ScaleTargetRef) -> Scale:
        if scale.target.uid:
            self._uids[_uid_key(scale.target.namespace, ref)] = scale.target.uid
        return scale

    async def _resolve(self, ref: ScaleTargetRef) -> ResourceInfo:
        info = await self._discovery.resolve(ref.api_version, ref.kind)
        if not info.scalable:
            raise NotFoundError(f"{ref.kind} ({ref.api_version}) has no /scale subresource")
        if not info.namespaced:
            raise NotFoundError(f"{ref.kind} ({ref.api_version}) is not namespaced")
        return info


def _uid_key(namespace: str, ref: ScaleTargetRef) -> tuple[str, str, str, str]:
    return namespace, ref.api_version.rpartition("/")[0], ref.kind, ref.name


def _object_ref(namespace: str, ref: ScaleTargetRef) -> ObjectRef:
    return ObjectRef(api_version=ref.api_version, kind=ref.kind, namespace=namespace,
                     name=ref.name)
