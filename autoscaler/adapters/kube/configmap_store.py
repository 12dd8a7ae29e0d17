"""History persisted on a ConfigMap, so a restart or a leader failover keeps the windows.

The encoded state (gzip JSON, see ``autoscaler.snapshot``) goes into ``binaryData``; each
write carries the resourceVersion last read or written. Another writer since (409, or the
ConfigMap deleted: 404) is a ``ConflictError``: never retried here, never written over; the
caller (``runtime.history``) reads again and decides, fenced by its lease.

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

from kubernetes_asyncio.client import ApiClient, CoreV1Api

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.errors import (
    AutoscalerError,
    ConflictError,
    NotFoundError,
    StateSetAsideError,
    StateUnavailableError,
)
from autoscaler.snapshot import MAX_STORED_BYTES, Snapshot, StateFormatError, decode, set_aside_name

STATE_KEY = "state.json.gz"
MANAGED_BY = {"app.kubernetes.io/managed-by": "autoscaler"}
SET_ASIDE_ANNOTATION = "autoscaler.dev/unreadable-state"


class ConfigMapStateStore:
    def __init__(
        self, api_client: ApiClient, *, namespace: str, name: str, request_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
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
        self._resource_version = cm.metadata.resource_version
        raw = (cm.binary_data or {}).get(STATE_KEY)
        if raw is None:
            return None  # created empty by someone else: nothing of ours to lose
        try:
            data = _unbase64(raw)
            snapshot = decode(data)
        except StateFormatError as error:
            await self._set_aside(cm, str(error))
        self._last_saved = data
        return snapshot

    async def _set_aside(self, cm: Any, problem: str) -> NoReturn:
        kept = set_aside_name(self.name, self._clock())
        body = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": kept, "namespace": self.namespace, "labels": MANAGED_BY,
                         "annotations": {SET_ASIDE_ANNOTATION: f"{self.name}: {problem}"}},
            "binaryData": dict(cm.binary_data or {}),
            "data": dict(cm.data or {}),
        }
        try:
            with api_errors(f"copy {self.description} to {kept}"):
                await self._api.create_namespaced_config_map(
                    self.namespace, cast(Any, body), _request_timeout=self._timeout)
        except AutoscalerError as error:
            raise StateUnavailableError(
                f"{self.description} cannot be decoded ({problem}) and cannot be copied "
                f"aside: {error}") from error
        raise StateSetAsideError(f"{self.description} cannot be decoded: {problem}",
                            kept_as=f"ConfigMap {self.namespace}/{kept}")

    async def save(self, data: bytes) -> None:
        """One write, carrying the version last read or written (none: a create)."""
        if data == self._last_saved:
            return  # nothing changed: no write
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": MANAGED_BY},
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


def _unbase64(raw: str) -> bytes:
    if len(raw) > MAX_STORED_BYTES * 4 // 3 + 4:
        raise StateFormatError("state is over the size limit")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as error:
        raise StateFormatError(f"state is not base64: {error}") from error
