"""Never fight another controller: find HPAs and KEDA ScaledObjects that scale our target.

Two autoscalers writing one ``/scale`` flap it between their answers. Before acting on a
target, the daemon asks whether any autoscaling/v2 HorizontalPodAutoscaler or keda.sh/v1alpha1
ScaledObject in the namespace has a ``scaleTargetRef`` naming the same object (same API group
and kind and name; the version may differ, it is the same object).

The daemon asks ``OwnerCache``: both kinds are watched (list, then watch, as the pod and
target caches are), so an HPA created while the daemon runs is seen by the next pass, one
deleted frees the target on the next pass, and a steady-state pass makes no request. A 404 on
KEDA's group means KEDA is not installed: no ScaledObjects (looked for again every minute).
Until a namespace's watches have listed once, or when they have not heard from the server
for too long, the answer comes from a fresh LIST (``OwnerCheck``, which ``plan`` uses too).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient, AutoscalingV2Api, CustomObjectsApi

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.adapters.kube.informer import (
    Backoff,
    ListCall,
    RawObject,
    WatchCounters,
    WatchOptions,
)
from autoscaler.adapters.kube.watch_cache import Informers, WatchCache, WatchedKind, WatchScope
from autoscaler.config import ScaleTargetRef
from autoscaler.errors import NotFoundError


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnerKind:
    group: str
    version: str
    plural: str
    kind: str
    default_target_api_version: str | None = None
    default_target_kind: str | None = None


HPA = OwnerKind(group="autoscaling", version="v2", plural="horizontalpodautoscalers",
                kind="HorizontalPodAutoscaler")
# KEDA defaults an omitted scaleTargetRef apiVersion/kind to a Deployment.
SCALED_OBJECT = OwnerKind(group="keda.sh", version="v1alpha1", plural="scaledobjects",
                          kind="ScaledObject", default_target_api_version="apps/v1",
                          default_target_kind="Deployment")
OWNER_KINDS = (HPA, SCALED_OBJECT)


@dataclass(frozen=True, slots=True, kw_only=True)
class Owner:
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def targets(item: Mapping[str, Any], owner: OwnerKind, ref: ScaleTargetRef) -> bool:
    """Whether one HPA or ScaledObject's ``spec.scaleTargetRef`` names ``ref``."""
    target = (item.get("spec") or {}).get("scaleTargetRef") or {}
    api_version = target.get("apiVersion") or owner.default_target_api_version or ""
    kind = target.get("kind") or owner.default_target_kind or ""
    return (target.get("name") == ref.name and kind == ref.kind
            and _group(api_version) == _group(ref.api_version))


class OwnerCheck:
    """Cached lists of HPAs and ScaledObjects per namespace."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._custom = CustomObjectsApi(api_client)
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[float, list[dict[str, Any]]]] = {}

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        """The runtime's ``OwnersPort``: ``"<Kind> <name>"`` of each autoscaler on ``ref``."""
        return _names(await self.find(namespace, ref))

    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...] | None:
        """``owners_of`` from lists still fresh in the cache; ``None`` when one must be
        fetched (a pass reads its targets without a coroutine each when none has to be)."""
        lists = []
        for owner in OWNER_KINDS:
            items = self._fresh(namespace, owner)
            if items is None:
                return None
            lists.append(items)
        return _names(_matching(ref, lists))

    async def find(self, namespace: str, ref: ScaleTargetRef) -> list[Owner]:
        """Every other autoscaler that targets ``ref`` in ``namespace``, sorted.

        List errors other than a 404 propagate: not knowing is no licence to act.
        """
        lists = [await self._items(namespace, owner) for owner in OWNER_KINDS]
        return _matching(ref, lists)

    async def _items(self, namespace: str, owner: OwnerKind) -> list[dict[str, Any]]:
        cached = self._fresh(namespace, owner)
        if cached is not None:
            return cached
        try:
            with api_errors(f"list {owner.plural}.{owner.group} in namespace {namespace}"):
                result = await self._custom.list_namespaced_custom_object(
                    owner.group, owner.version, namespace, owner.plural)
            items = list(result.get("items") or [])
        except NotFoundError:
            items = []  # the group is not served (KEDA not installed): nobody of that kind
        self._cache[(namespace, owner.plural)] = (self._clock(), items)
        return items

    def _fresh(self, namespace: str, owner: OwnerKind) -> list[dict[str, Any]] | None:
        """The namespace's list of ``owner`` if it was fetched within the TTL."""
        cached = self._cache.get((namespace, owner.plural))
        if cached is None or self._clock() - cached[0] >= self._ttl:
            return None
        return cached[1]


def _matching(ref: ScaleTargetRef, lists: Sequence[list[dict[str, Any]]]) -> list[Owner]:
    """The owners among ``lists`` (one per ``OWNER_KINDS``) that target ``ref``, sorted."""
    found = [Owner(kind=owner.kind, name=item["metadata"]["name"])
             for owner, items in zip(OWNER_KINDS, lists, strict=True)
             for item in items if targets(item, owner, ref)]
    return sorted(found, key=lambda o: (o.kind, o.name))


def _names(owners: Sequence[Owner]) -> tuple[str, ...]:
    return tuple(str(owner) for owner in owners)


ABSENT_RECHECK = 60.0
"""Seconds between looks for a kind that is not served (KEDA installed later)."""


class _OwnerSink:
    """One kind in one namespace: name -> what ``targets`` reads of the object."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def convert(self, obj: RawObject) -> dict[str, Any] | None:
        metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        name = metadata.get("name")
        if not isinstance(name, str) or not isinstance(spec, dict):
            return None
        status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        desired = status.get("desiredReplicas") if isinstance(status, dict) else None
        return {"metadata": {"name": name},
                "spec": {"scaleTargetRef": spec.get("scaleTargetRef")},
                "status": {"desiredReplicas": desired if isinstance(desired, int) else None}}

    def replace(self, converted: list[dict[str, Any]]) -> None:
        self.items = {item["metadata"]["name"]: item for item in converted}

    def upsert(self, obj: RawObject) -> None:
        item = self.convert(obj)
        if item is not None:
            self.items[item["metadata"]["name"]] = item

    def delete(self, obj: RawObject) -> None:
        self.items.pop(str((obj.get("metadata") or {}).get("name", "")), None)


class OwnerCache(WatchCache):
    """The runtime's ``OwnersPort`` over watches of HPAs and ScaledObjects."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        scope: WatchScope = "cluster",
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        absent_recheck: float = ABSENT_RECHECK,
    ) -> None:
        autoscaling, custom = AutoscalingV2Api(api_client), CustomObjectsApi(api_client)
        self._sinks: dict[tuple[str, str], _OwnerSink] = {}
        self._fallback = OwnerCheck(api_client, ttl=0.0)
        self._max_staleness = watch_timeout + 60.0
        self.counters = WatchCounters()
        kinds = [
            WatchedKind(resource=HPA.plural,
                        namespaced=autoscaling.list_namespaced_horizontal_pod_autoscaler,
                        cluster=autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces,
                        sink_for=self._sink_maker(HPA)),
            WatchedKind(resource=SCALED_OBJECT.plural,
                        namespaced=_namespaced_custom(custom, SCALED_OBJECT),
                        cluster=_cluster_custom(custom, SCALED_OBJECT),
                        sink_for=self._sink_maker(SCALED_OBJECT),
                        absent_recheck=absent_recheck, sharded=False),
        ]
        self._informers = Informers(
            kinds, owner="the owner cache", scope=scope, counters=self.counters,
            options=WatchOptions(watch_timeout=watch_timeout, backoff=backoff or Backoff()))

    def cached_owners(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...] | None:
        """The owners from the watches, or ``None`` while they cannot tell (not listed yet,
        or silent for too long): then ``owners_of`` asks the server."""
        self.add_namespace(namespace)
        if not self._informers.is_synced(namespace) or \
                self._informers.seconds_since_contact(namespace) > self._max_staleness:
            return None
        lists = [list(self._sinks[(namespace, owner.plural)].items.values())
                 for owner in OWNER_KINDS]
        return _names(_matching(ref, lists))

    async def owners_of(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, ...]:
        cached = self.cached_owners(namespace, ref)
        if cached is not None:
            return cached
        return await self._fallback.owners_of(namespace, ref)

    def reported_desired(self, namespace: str, ref: ScaleTargetRef) -> tuple[
            tuple[str, int], ...] | None:
        """The HPAs on ``ref`` with their ``status.desiredReplicas`` (those reporting one)."""
        if self.cached_owners(namespace, ref) is None:
            return None
        items = self._sinks[(namespace, HPA.plural)].items.values()
        return tuple(sorted(
            (str(Owner(kind=HPA.kind, name=item["metadata"]["name"])),
             item["status"]["desiredReplicas"])
            for item in items if targets(item, HPA, ref)
            and item["status"]["desiredReplicas"] is not None))

    def _forget(self, namespace: str) -> None:
        for owner in OWNER_KINDS:
            self._sinks.pop((namespace, owner.plural), None)

    def _sink_maker(self, owner: OwnerKind) -> Callable[[str], _OwnerSink]:
        def sink_for(namespace: str) -> _OwnerSink:
            sink = self._sinks[(namespace, owner.plural)] = _OwnerSink()
            return sink
        return sink_for


def _namespaced_custom(api: CustomObjectsApi, owner: OwnerKind) -> ListCall:
    def list_namespaced(namespace: str, **query: Any) -> Any:
        return api.list_namespaced_custom_object(owner.group, owner.version, namespace,
                                                 owner.plural, **query)
    return list_namespaced


def _cluster_custom(api: CustomObjectsApi, owner: OwnerKind) -> ListCall:
    def list_all(**query: Any) -> Any:
        return api.list_custom_object_for_all_namespaces(owner.group, owner.version,
                                                          owner.plural, **query)
    return list_all
