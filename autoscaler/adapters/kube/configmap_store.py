"""History persisted on a ConfigMap, so a restart or a leader failover keeps the windows.

The encoded state (gzip JSON, see ``autoscaler.snapshot``) goes into ``binaryData``; each
write carries the resourceVersion last read or written. Another writer since (409, or the
ConfigMap deleted: 404) is a ``ConflictError``: never retried here, never written over; the
caller (``runtime.history``) reads again and decides, fenced by its lease.

A store is one daemon's: each write names its owner in the ``autoscaler.dev/owner``
annotation, the Lease its daemons elect a leader on (``Lease <namespace>/<name>``: any
holder of that Lease may write; the Lease decides which) or, without leader election, the
pod (``host <hostname>``: a container restarted in the same pod is the same owner). A read
that finds another owner is ``StateInUseError``, naming it (and the Lease's holder): two
daemons on different Leases, or without one, never write one ConfigMap. A daemon without
leader election gives its claim up at a graceful stop (``release``); one killed keeps it
until its pod restarts it, or until the annotation is removed by hand.

``load`` is strict, because a wrong "nothing saved" wipes the history at the next write: a 404
is the only proof of absence (a ConfigMap without our key, which someone created for us, counts
as empty); any other failure is ``StateUnavailableError`` and the caller retries. A ConfigMap whose
state cannot be decoded is copied to ``<name>.unreadable-<UTC time>`` before anything may
replace it (``StateSetAsideError``); if the copy fails, the read fails and nothing is written.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from typing import Any, NoReturn, cast

from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, CoreV1Api

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.errors import (
    AutoscalerError,
    ConflictError,
    NotFoundError,
    StateInUseError,
    StateSetAsideError,
    StateUnavailableError,
)
from autoscaler.snapshot import MAX_STORED_BYTES, Snapshot, StateFormatError, decode, set_aside_name

STATE_KEY = "state.json.gz"
MANAGED_BY = {"app.kubernetes.io/managed-by": "autoscaler"}
SET_ASIDE_ANNOTATION = "autoscaler.dev/unreadable-state"
OWNER_ANNOTATION = "autoscaler.dev/owner"


def lease_owner(namespace: str, name: str) -> str:
    return f"Lease {namespace}/{name}"


def host_owner(hostname: str) -> str:
    return f"host {hostname}"


class ConfigMapStateStore:
    def __init__(
        self, api_client: ApiClient, *, namespace: str, name: str, request_timeout: float = 10.0,
        clock: Callable[[], float] = time.time, owner: str | None = None,
        read_only: bool = False,
    ) -> None:
        self._api = CoreV1Api(api_client)
        self._leases = CoordinationV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.owner = owner
        """Who this store's writes name as owner; ``None``: no owner is checked or written."""
        self._read_only = read_only
        """Never copy aside or write (a dry run reads the live daemon's store)."""
        self._timeout = request_timeout
        self._clock = clock
        self._resource_version: str | None = None
        self._last_saved: bytes | None = None

    @property
    def description(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    async def load(self) -> Snapshot | None:
        try:
            with api_errors(f"get {self.description}"):
                cm = await self._api.read_namespaced_config_map(
                    self.name, self.namespace, _request_timeout=self._timeout)
        except NotFoundError:
            self._resource_version = None
            return None
        except AutoscalerError as error:
            raise StateUnavailableError(str(error)) from error
        await self._check_owner(cm)
        self._resource_version = cm.metadata.resource_version
        raw = (cm.binary_data or {}).get(STATE_KEY)
        if raw is None:
            return None  # created empty by someone else: nothing of ours to lose
        try:
            data = unbase64(raw)
            snapshot = decode(data)
        except StateFormatError as error:
            await self._set_aside(cm, str(error))
        self._last_saved = data
        return snapshot

    async def check(self) -> None:
        """``StateInUseError`` if the ConfigMap is another daemon's now; anything else (it
        is missing, or cannot be read now) passes: ``load`` checks again."""
        try:
            with api_errors(f"get {self.description}"):
                cm = await self._api.read_namespaced_config_map(
                    self.name, self.namespace, _request_timeout=self._timeout)
        except AutoscalerError:
            return
        await self._check_owner(cm)

    async def _check_owner(self, cm: Any) -> None:
        theirs = (cm.metadata.annotations or {}).get(OWNER_ANNOTATION)
        if self.owner is None or self._read_only or not theirs or theirs == self.owner:
            return
        raise StateInUseError(
            f"{self.description} is the state of another autoscaler ({await self._who(theirs)}; "
            f"this one is {self.owner}): two daemons never share a store (give each its own "
            f"leaseName, or remove the {OWNER_ANNOTATION} annotation if that one is gone)")

    async def _who(self, owner: str) -> str:
        """``owner``, and the holder of its Lease when it names one that can be read."""
        kind, _, where = owner.partition(" ")
        namespace, _, name = where.partition("/")
        if kind != "Lease" or not name:
            return owner
        try:
            lease = await self._leases.read_namespaced_lease(
                name, namespace, _request_timeout=self._timeout)
        except Exception:  # who holds it is only said
            return owner
        holder = lease.spec.holder_identity if lease.spec is not None else None
        return f"{owner}, held by {holder}" if holder else f"{owner}, not held now"

    async def release(self) -> None:
        """Give up this daemon's claim (its last write, at a graceful stop, without leader
        election): the next daemon may be another pod's."""
        if self.owner is None or self._read_only or self._last_saved is None:
            return
        owner, self.owner = self.owner, None
        data, self._last_saved = self._last_saved, None
        try:
            await self.save(data)
        finally:
            self.owner = owner

    async def _set_aside(self, cm: Any, problem: str) -> NoReturn:
        if self._read_only:
            raise StateUnavailableError(f"{self.description} cannot be decoded: {problem}")
        await set_aside(self._api, cm, namespace=self.namespace, name=self.name,
                        now=self._clock(), problem=problem, timeout=self._timeout)

    async def save(self, data: bytes) -> None:
        """One write, carrying the version last read or written (none: a create)."""
        if self._read_only:
            raise StateUnavailableError(f"{self.description} is only read here")
        if data == self._last_saved:
            return  # nothing changed: no write
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                    "labels": MANAGED_BY}
        if self.owner is not None:
            metadata["annotations"] = {OWNER_ANNOTATION: self.owner}
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "binaryData": {STATE_KEY: base64.b64encode(data).decode()},
        }
        try:
            cm = await self._put(body)
        except NotFoundError as error:
            raise ConflictError(f"{self.description} was deleted since it was read") from error
        self._resource_version = cm.metadata.resource_version
        self._last_saved = data

    async def _put(self, body: dict[str, Any]) -> Any:
        with api_errors(f"write {self.description}"):
            if self._resource_version is None:
                return await self._api.create_namespaced_config_map(
                    self.namespace, cast(Any, body), _request_timeout=self._timeout)
            body["metadata"]["resourceVersion"] = self._resource_version
            return await self._api.replace_namespaced_config_map(
                self.name, self.namespace, cast(Any, body), _request_timeout=self._timeout)


async def set_aside(api: CoreV1Api, cm: Any, *, namespace: str, name: str, now: float,
                    problem: str, timeout: float) -> NoReturn:
    """Copy the undecodable ConfigMap ``cm`` to ``<name>.unreadable-<UTC time>`` with the
    reason, then ``StateSetAsideError``; ``StateUnavailableError`` if it cannot be copied
    (then nothing may replace it). The bucket stores set theirs aside the same way."""
    description = f"ConfigMap {namespace}/{name}"
    kept = set_aside_name(name, now)
    body = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": kept, "namespace": namespace, "labels": MANAGED_BY,
                     "annotations": {SET_ASIDE_ANNOTATION: f"{name}: {problem}"}},
        "binaryData": dict(cm.binary_data or {}),
        "data": dict(cm.data or {}),
    }
    try:
        with api_errors(f"copy {description} to {kept}"):
            await api.create_namespaced_config_map(
                namespace, cast(Any, body), _request_timeout=timeout)
    except AutoscalerError as error:
        raise StateUnavailableError(
            f"{description} cannot be decoded ({problem}) and cannot be copied "
            f"aside: {error}") from error
    raise StateSetAsideError(f"{description} cannot be decoded: {problem}",
                             kept_as=f"ConfigMap {namespace}/{kept}")


def unbase64(raw: str) -> bytes:
    """A stored state's bytes from its ``binaryData`` text, refused over the size limit
    before decoding (``StateFormatError``); the bucket stores read theirs the same way."""
    if len(raw) > MAX_STORED_BYTES * 4 // 3 + 4:
        raise StateFormatError("state is over the size limit")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as error:
        raise StateFormatError(f"state is not base64: {error}") from error
