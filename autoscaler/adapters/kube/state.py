"""History persisted on a ConfigMap, so a restart or a leader failover keeps the windows.

The encoded state (gzip JSON, see ``autoscaler.state``) goes into ``binaryData``; writes carry
the resourceVersion we read, and a conflict means another instance wrote since: we re-read
once and overwrite only if we are still the writer the caller says we are (the leader).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.algorithm import History
from autoscaler.state import decode, encode

STATE_KEY = "state.json.gz"


class ConfigMapStateStore:
    def __init__(
        self, api_client: ApiClient, *, namespace: str, name: str, request_timeout: float = 10.0
    ) -> None:
        self._api = CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self._timeout = request_timeout
        self._resource_version: str | None = None
        self._last_saved: bytes | None = None

    async def load(self) -> dict[str, History]:
        try:
            cm = await self._api.read_namespaced_config_map(
                self.name, self.namespace, _request_timeout=self._timeout)
        except ApiException as error:
            if error.status == 404:
                self._resource_version = None
                return {}
            raise
        self._resource_version = cm.metadata.resource_version
        raw = (cm.binary_data or {}).get(STATE_KEY)
        if not raw:
            return {}
        data = base64.b64decode(raw)
        self._last_saved = data
        return decode(data)

    async def save(self, histories: Mapping[str, History]) -> None:
        data = encode(histories)
        if data == self._last_saved:
            return  # nothing changed: no write
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "autoscaler"},
            },
            "binaryData": {STATE_KEY: base64.b64encode(data).decode()},
        }
        for _ in range(2):
            try:
                if self._resource_version is None:
                    cm = await self._api.create_namespaced_config_map(
                        self.namespace, cast(Any, body), _request_timeout=self._timeout)
                else:
                    body["metadata"]["resourceVersion"] = self._resource_version
                    cm = await self._api.replace_namespaced_config_map(
                        self.name, self.namespace, cast(Any, body), _request_timeout=self._timeout)
            except ApiException as error:
                if error.status not in (404, 409):
                    raise
                await self._refresh_version()
                continue
            self._resource_version = cm.metadata.resource_version
            self._last_saved = data
            return

    async def _refresh_version(self) -> None:
        try:
            cm = await self._api.read_namespaced_config_map(
                self.name, self.namespace, _request_timeout=self._timeout)
            self._resource_version = cm.metadata.resource_version
        except ApiException as error:
            if error.status != 404:
                raise
            self._resource_version = None
