"""One connection to the API server: an ``ApiClient`` with an explicit configuration.

``KubeSession.connect(settings)`` builds the client inside the running loop (aiohttp needs
one) from a kubeconfig (path, context) or the in-cluster service account, never touching
kubernetes-asyncio's global default configuration. The library has no request timeout by
default, so a hung API server would block a pass forever: the session's client applies
``settings.request_timeout`` to every call that does not pass its own ``_request_timeout``.

A token kept in a file (a kubeconfig user's ``tokenFile``, the in-cluster service-account
token) is followed as it rotates (``token_file.py``): every request carries the file's current
token, and a 401 makes the client read the file again and retry that request once with the new
token. Watches need nothing more: each (re)connection is a request of this client.

Every request's verb and answer (HTTP code, or ``<error>`` when none came) can be reported
to an observer (``on_request``), for the daemon's own metrics; and every answer's ``Date``
header with the monotonic times the request was sent and answered (``on_date``), from which
the daemon knows the API server's clock (``runtime.timeline``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from asyncio import sslproto
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException, load_kube_config
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_HOST_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

from autoscaler.adapters.kube.token_file import TokenFile, bearer
from autoscaler.adapters.kube.verbs import request_verb
from autoscaler.config import KubernetesSettings
from autoscaler.errors import InvalidConfigError

log = structlog.get_logger("autoscaler.kube.session")

RequestObserver = Callable[[str, str], None]
"""Told of each request's end: its verb and its HTTP code ("<error>" if no answer came)."""
NO_ANSWER = "<error>"
DateObserver = Callable[[str | None, float, float], None]
"""Told of each answer's ``Date`` header, with the monotonic times of sending and answer."""


class SessionApiClient(ApiClient):
    """An ``ApiClient`` whose calls default to a request timeout instead of none, and retry
    once with a re-read token when the server answers 401 to a token kept in a file."""

    def __init__(self, configuration: Configuration, *, request_timeout: float,
                 token: TokenFile | None = None,
                 on_request: RequestObserver | None = None,
                 on_date: DateObserver | None = None) -> None:
        super().__init__(configuration)
        self.request_timeout = request_timeout
        self.token = token
        self.on_request = on_request
        self.on_date = on_date

    async def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = self.request_timeout
        try:
            response = await self._observed(method, url, *args, **kwargs)
        except ApiException as error:
            if error.status != 401 or not self._renew_token(kwargs):
                raise
        else:
            # _preload_content=False (lists, watches) hands back the raw response unchecked.
            if getattr(response, "status", None) != 401 or not self._renew_token(kwargs):
                return response
            response.release()
        return await self._observed(method, url, *args, **kwargs)

    async def _observed(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self.on_request is None and self.on_date is None:
            return await super().request(method, url, *args, **kwargs)
        code: str | None = NO_ANSWER
        sent = time.monotonic()
        try:
            response = await super().request(method, url, *args, **kwargs)
            code = str(getattr(response, "status", NO_ANSWER))
            self._dated(response, sent)
            return response
        except ApiException as error:
            code = str(error.status) if error.status else NO_ANSWER
            self._dated(error, sent)
            raise
        except asyncio.CancelledError:  # we stopped waiting (a watch restarted, a stop)
            code = None
            raise
        finally:
            if code is not None and self.on_request is not None:
                query = args[0] if args else kwargs.get("query_params")
                self.on_request(request_verb(method, url, query), code)

    def _dated(self, answer: Any, sent: float) -> None:
        """Report the answer's ``Date`` (a RESTResponse, a raw aiohttp response or an
        ApiException all carry the headers)."""
        if self.on_date is None:
            return
        headers = getattr(answer, "headers", None)
        if headers is None and hasattr(answer, "getheaders"):
            headers = answer.getheaders()
        self.on_date(headers.get("Date") if headers else None, sent, time.monotonic())

    def _renew_token(self, kwargs: dict[str, Any]) -> bool:
        """After a 401: read the token file again (client-go drops its cached token on a 401)
        and say whether a retry would carry another token than the one refused. A 401 that a
        retry cannot mend (the file still holds the refused token) is left to the caller."""
        if self.token is None:
            return False
        headers = kwargs.setdefault("headers", {})
        fresh = bearer(self.token.reread())
        if headers.get("authorization") == fresh:
            return False
        headers["authorization"] = fresh
        return True


SERVICE_NAMESPACE_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass(frozen=True, slots=True, kw_only=True)
class InClusterFiles:
    """Where the service account's token, CA and namespace live (overridable for tests)."""

    token: Path = Path(SERVICE_TOKEN_FILENAME)
    ca: Path = Path(SERVICE_CERT_FILENAME)
    namespace: Path = Path(SERVICE_NAMESPACE_FILENAME)


def pod_namespace(environ: Mapping[str, str] | None = None,
                  files: InClusterFiles | None = None) -> str:
    """The namespace this pod runs in (``POD_NAMESPACE`` from the downward API, else the
    service account's), else ``default``."""
    env = (os.environ if environ is None else environ).get("POD_NAMESPACE")
    if env:
        return env
    try:
        return (files or InClusterFiles()).namespace.read_text().strip() or "default"
    except OSError:
        return "default"


def wants_in_cluster(
    settings: KubernetesSettings, environ: Mapping[str, str], files: InClusterFiles
) -> bool:
    """``in_cluster = None`` means auto: in a pod, that is when ``KUBERNETES_SERVICE_HOST``
    is set and the service-account token is mounted (as client-go's InClusterConfig)."""
    if settings.in_cluster is not None:
        return settings.in_cluster
    return bool(environ.get(SERVICE_HOST_ENV_NAME)) and files.token.is_file()


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """What a session is built from: the client configuration, and the file its token is
    kept in when it is kept in one."""

    configuration: Configuration
    token: TokenFile | None = None


async def build_configuration(
    settings: KubernetesSettings,
    *,
    environ: Mapping[str, str] | None = None,
    files: InClusterFiles | None = None,
) -> Connection:
    """A fresh ``Configuration`` from the in-cluster account or a kubeconfig."""
    environ = os.environ if environ is None else environ
    files = files or InClusterFiles()
    in_cluster = wants_in_cluster(settings, environ, files)
    configuration = Configuration()
    try:
        if in_cluster:
            # The token is followed by our TokenFile, not the library's minute-long refresh.
            InClusterConfigLoader(
                token_filename=str(files.token), cert_filename=str(files.ca),
                try_refresh_token=False, environ=dict(environ),
            ).load_and_set(configuration)
            token_path: Path | None = files.token
        else:
            if settings.kubeconfig is None:
                _require_default_kubeconfig()
            path = str(settings.kubeconfig) if settings.kubeconfig else None
            # persist_config=False: refreshing a token must never rewrite the user's file.
            loader = await load_kube_config(
                config_file=path, context=settings.context,
                client_configuration=configuration, persist_config=False,
            )
            token_path = kubeconfig_token_file(loader)
            warn_if_insecure(configuration, settings)
        token = TokenFile(token_path) if token_path else None
    except (ConfigException, OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as error:
        source = "in-cluster service account" if in_cluster else (
            f"kubeconfig {settings.kubeconfig or '(default)'}"
            + (f" context {settings.context!r}" if settings.context else ""))
        raise InvalidConfigError(f"kubernetes: cannot load the {source}: {error}") from error
    if token is not None:
        token.apply(configuration)
        configuration.refresh_api_key_hook = token.apply
    # Every open watch holds one HTTP/1.1 connection for its life (one per kind per watched
    # namespace). The library's pool of 100 would let watches starve every request once
    # more are open; requests are bounded by the daemon's concurrency, not by the pool.
    configuration.connection_pool_maxsize = None  # type: ignore[assignment]  # documented: no limit
    return Connection(configuration=configuration, token=token)


TLS_READ_BUFFER = 32 * 1024
"""Bytes a TLS connection reads from its socket at a time: two full TLS records."""


def small_tls_reads() -> None:
    """TLS connections read ``TLS_READ_BUFFER`` bytes at a time, not asyncio's 256 KiB.

    asyncio gives each TLS connection a read buffer of ``SSLProtocol.max_size`` for its
    whole life, all of it resident. A replica keeps 15-35 connections to the API server
    (its watches, its Lease renewals, a keep-alive pool that grows with each burst of
    requests), and a ring member claiming buckets opens a connection for each claim's
    requests at once: tracemalloc found 184 such buffers, 23 MB, in a one-replica ring of
    10,000 targets claiming its 84 buckets. A TLS record carries at most 16 KiB, so a
    smaller read costs only more turns of the loop on a large LIST (one per 32 KiB). The
    attribute is the process's: its other TLS connections (Prometheus over https) read as
    little. Nothing to do where asyncio has no such attribute.
    """
    with contextlib.suppress(AttributeError):
        sslproto.SSLProtocol.max_size = min(sslproto.SSLProtocol.max_size, TLS_READ_BUFFER)


def _require_default_kubeconfig() -> None:
    """Without a kubeconfig named in the config, the library reads ``$KUBECONFIG`` or
    ``~/.kube/config``; when neither exists it would complain of a missing key in an empty
    file. Say what is missing instead (the library reads the process's own environment)."""
    listed = [part for part in os.environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    candidates = listed or [os.path.expanduser("~/.kube/config")]
    if any(os.path.exists(os.path.expanduser(path)) for path in candidates):
        return
    where = f"KUBECONFIG ({', '.join(listed)})" if listed else f"{candidates[0]}"
    raise InvalidConfigError(
        f"kubernetes: no kubeconfig: {where} does not exist and this is not a pod "
        f"({SERVICE_HOST_ENV_NAME} is unset); set kubernetes.kubeconfig in the config or "
        "pass --kubeconfig")


def kubeconfig_token_file(loader: KubeConfigLoader) -> Path | None:
    """The ``tokenFile`` of the kubeconfig's current user, resolved as the library resolves
    it (relative to the kubeconfig naming it), when the user authenticates by token.

    As client-go, the file wins over a ``token`` also given (the library would take the
    ``token`` and never look at the file). An exec plugin or auth provider brings its own."""
    user = loader._user  # the user the library chose (context, merged KUBECONFIG): no copy
    if not user or "tokenFile" not in user or "exec" in user or loader.provider:
        return None
    return Path(loader._get_base_path(user.path)) / str(user["tokenFile"])


def warn_if_insecure(configuration: Configuration, settings: KubernetesSettings) -> None:
    """insecure-skip-tls-verify sends the token to whoever answers: say so, once, at start."""
    if not configuration.verify_ssl:
        log.warning("kubernetes: insecure-skip-tls-verify is set in the kubeconfig: the API "
                    "server's certificate is not checked",
                    kubeconfig=str(settings.kubeconfig or "(default)"),
                    server=configuration.host)


class KubeSession:
    """Owns the one ``ApiClient`` every Kubernetes adapter of the daemon shares."""

    def __init__(self, api_client: SessionApiClient) -> None:
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
        on_request: RequestObserver | None = None,
        on_date: DateObserver | None = None,
    ) -> AsyncIterator[KubeSession]:
        small_tls_reads()  # before the first connection: each keeps its buffer for life
        connection = await build_configuration(settings, environ=environ, files=files)
        client = SessionApiClient(connection.configuration, token=connection.token,
                                  request_timeout=settings.request_timeout,
                                  on_request=on_request, on_date=on_date)
        try:
            yield cls(client)
        finally:
            await client.close()
