"""One connection to the API server: an ``ApiClient`` with an explicit configuration.

``KubeSession.connect(settings)`` builds the client inside the running loop (aiohttp needs
one) from a kubeconfig (path, context) or the in-cluster service account, never touching
kubernetes-asyncio's global default configuration. The library has no request timeout by
default, so a hung API server would block a pass forever: the session's client applies
``settings.request_timeout`` to every call that does not pass its own ``_request_timeout``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_kube_config
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_HOST_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)

from autoscaler.config import KubernetesSettings
from autoscaler.errors import InvalidConfigError


class TimeoutApiClient(ApiClient):
    """An ``ApiClient`` whose calls default to a request timeout instead of none."""

    def __init__(self, configuration: Configuration, *, request_timeout: float) -> None:
        super().__init__(configuration)
        self.request_timeout = request_timeout

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = self.request_timeout
        return super().request(method, url, *args, **kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class InClusterFiles:
    """Where the service account's token and CA live (overridable for tests)."""

    token: Path = Path(SERVICE_TOKEN_FILENAME)
    ca: Path = Path(SERVICE_CERT_FILENAME)


def wants_in_cluster(
    settings: KubernetesSettings, environ: Mapping[str, str], files: InClusterFiles
) -> bool:
    """``in_cluster = None`` means auto: in a pod, that is when ``KUBERNETES_SERVICE_HOST``
    is set and the service-account token is mounted (as client-go's InClusterConfig)."""
    if settings.in_cluster is not None:
        return settings.in_cluster
    return bool(environ.get(SERVICE_HOST_ENV_NAME)) and files.token.is_file()


async def build_configuration(
    settings: KubernetesSettings,
    *,
    environ: Mapping[str, str] | None = None,
    files: InClusterFiles | None = None,
) -> Configuration:
    """A fresh ``Configuration`` from the in-cluster account or a kubeconfig."""
    environ = os.environ if environ is None else environ
    files = files or InClusterFiles()
    in_cluster = wants_in_cluster(settings, environ, files)
    configuration = Configuration()
    try:
        if in_cluster:
            # The library's loader re-reads the token file every minute: rotated tokens work.
            InClusterConfigLoader(
                token_filename=str(files.token), cert_filename=str(files.ca),
                try_refresh_token=True, environ=dict(environ),
            ).load_and_set(configuration)
        else:
            path = str(settings.kubeconfig) if settings.kubeconfig else None
            # persist_config=False: refreshing a token must never rewrite the user's file.
            await load_kube_config(
                config_file=path, context=settings.context,
                client_configuration=configuration, persist_config=False,
            )
    except (ConfigException, OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as error:
        source = "in-cluster service account" if in_cluster else (
            f"kubeconfig {settings.kubeconfig or '(default)'}"
            + (f" context {settings.context!r}" if settings.context else ""))
        raise InvalidConfigError(f"kubernetes: cannot load the {source}: {error}") from error
    # Every open watch holds one HTTP/1.1 connection for its life (one per kind per watched
    # namespace). The library's pool of 100 would let watches starve every request once
    # more are open; requests are bounded by the daemon's concurrency, not by the pool.
    configuration.connection_pool_maxsize = None  # type: ignore[assignment]  # documented: no limit
    return configuration


class KubeSession:
    """Owns the one ``ApiClient`` every Kubernetes adapter of the daemon shares."""

    def __init__(self, api_client: TimeoutApiClient) -> None:
        self.api_client = api_client

    @property
    def request_timeout(self) -> float:
        return float(self.api_client.request_timeout)

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        settings: KubernetesSettings,
        *,
        environ: Mapping[str, str] | None = None,
        files: InClusterFiles | None = None,
    ) -> AsyncIterator[KubeSession]:
        configuration = await build_configuration(settings, environ=environ, files=files)
        client = TimeoutApiClient(configuration, request_timeout=settings.request_timeout)
        try:
            yield cls(client)
        finally:
            await client.close()
