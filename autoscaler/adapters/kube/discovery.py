"""API discovery: ``apiVersion`` + ``kind`` to the resource's plural, scope and ``/scale``.

One discovery document per groupVersion (``/api/v1`` for the core group, ``/apis/<g>/<v>``
otherwise), cached; a kind missing from the cached document triggers one refresh of that
groupVersion (at most every ``refresh_interval`` seconds), so a CRD installed while the
daemon runs is found without rediscovering every group, as the bundled ``DynamicClient``
would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.errors import NotFoundError


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceInfo:
    group: str
    """``""`` for the core group."""
    version: str
    kind: str
    plural: str
    namespaced: bool
    scalable: bool
    """The resource serves a ``/scale`` subresource."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` -> (``apps``, ``v1``); ``v1`` -> (``""``, ``v1``)."""
    group, _, version = api_version.rpartition("/")
    if not version or "/" in group:
        raise NotFoundError(f"{api_version!r} is not an apiVersion (expected group/version)")
    return group, version


def resources_by_kind(
    group: str, version: str, document: Mapping[str, Any]
) -> dict[str, ResourceInfo]:
    """Index an ``APIResourceList`` by kind; subresources only mark their parent scalable."""
    entries = document.get("resources") or []
    names = {entry.get("name", "") for entry in entries}
    found: dict[str, ResourceInfo] = {}
    for entry in entries:
        name = entry.get("name", "")
        if "/" in name or not entry.get("kind"):
            continue
        found[entry["kind"]] = ResourceInfo(
            group=group, version=version, kind=entry["kind"], plural=name,
            namespaced=bool(entry.get("namespaced")), scalable=f"{name}/scale" in names,
        )
    return found


class Discovery:
    """Resolves kinds through cached per-groupVersion discovery documents."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        refresh_interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = api_client
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._cache: dict[str, tuple[float, dict[str, ResourceInfo]]] = {}
        self.fetches = 0
        """Discovery documents fetched (a test proves the cache holds)."""

    async def resolve(self, api_version: str, kind: str) -> ResourceInfo:
        """The resource for a kind; ``NotFoundError`` when the server does not serve it."""
        group, version = split_api_version(api_version)
        cached = self._cache.get(api_version)
        if cached is not None and kind in cached[1]:
            return cached[1][kind]
        if cached is None or self._clock() - cached[0] >= self._refresh_interval:
            cached = (self._clock(), await self._fetch(group, version))
            self._cache[api_version] = cached
        if not cached[1]:
            raise NotFoundError(f"the API server serves no API group version {api_version}")
        if kind not in cached[1]:
            known = ", ".join(sorted(cached[1])) or "none"
            raise NotFoundError(
                f"the API server serves no kind {kind!r} in {api_version} (it serves: {known})")
        return cached[1][kind]

    async def _fetch(self, group: str, version: str) -> dict[str, ResourceInfo]:
        api_version = f"{group}/{version}" if group else version
        self.fetches += 1
        try:
            with api_errors(f"discovery of {api_version}"):
                if group:
                    result = await CustomObjectsApi(self._client).get_api_resources(
                        group, version)
                else:
                    result = await CoreV1Api(self._client).get_api_resources()
        except NotFoundError:
            return {}  # cached like any answer, so an absent group is not asked every pass
        document = self._client.sanitize_for_serialization(result)
        return resources_by_kind(group, version, document)
