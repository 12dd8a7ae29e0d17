"""Can the backends be reached at all: one TCP connection each, bounded, before real work.

``plan`` and ``check`` fail fast on a backend that refuses or does not exist (instead of
retrying for tens of seconds and ending in a bare ``TimeoutError``); ``run`` says at start
which it cannot reach and goes on retrying in the background as it always does. A TCP
connection proves little (a server may accept and never answer); it is the cheap check that
tells "nothing listens there" from everything else.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from autoscaler.adapters.prometheus.client import redact_url
from autoscaler.config import Config
from autoscaler.errors import AutoscalerError

REACH_TIMEOUT = 3.0
"""Seconds a TCP connection may take before the backend counts as unreachable."""


async def unreachable(urls: Iterable[str], *, timeout: float = REACH_TIMEOUT) -> dict[str, str]:
    """URL -> why it cannot be reached, for each URL nothing answers at (concurrently)."""
    distinct = list(dict.fromkeys(urls))
    reasons = await asyncio.gather(*(_reach(url, timeout) for url in distinct))
    return {url: reason for url, reason in zip(distinct, reasons, strict=True)
            if reason is not None}


async def _reach(url: str, timeout: float) -> str | None:
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return "the URL names no host"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "the URL's port is not a number"
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return f"no TCP connection within {timeout:g}s"
    except OSError as error:  # asyncio's own text names the address again: say only why
        return os.strerror(error.errno).lower() if error.errno else str(error)
    writer.close()
    return None


async def api_server_url(config: Config) -> str:
    """The API server the config's kubeconfig (or the in-cluster account) points at."""
    from autoscaler.adapters.kube.session import build_configuration

    connection = await build_configuration(config.kubernetes)
    return str(connection.configuration.host)


def prometheus_urls(config: Config, servers: Iterable[str] | None = None) -> Mapping[str, str]:
    """Server name -> URL, for ``servers`` (default: every server the targets use)."""
    wanted = set(servers) if servers is not None else {t.prometheus for t in config.targets}
    return {name: server.url for name, server in config.prometheus_servers.items()
            if name in wanted}


class UnreachableError(AutoscalerError):
    """A backend the command needs does not accept connections."""


async def require(config: Config, *, kube: bool, prometheus: bool,
                  timeout: float = REACH_TIMEOUT) -> None:
    """Raise ``UnreachableError`` naming the first backend that cannot be reached."""
    for problem in await problems(config, kube=kube, prometheus=prometheus, timeout=timeout):
        raise UnreachableError(problem)


async def problems(config: Config, *, kube: bool, prometheus: bool,
                   timeout: float = REACH_TIMEOUT) -> list[str]:
    """One line per backend that cannot be reached, naming it and what to check."""
    urls: dict[str, str] = {}
    if kube:
        urls[await api_server_url(config)] = "the API server"
    if prometheus:
        for name, url in prometheus_urls(config).items():
            urls.setdefault(url, f"Prometheus server {name!r}")
    down = await unreachable(urls, timeout=timeout)
    hints = {"the API server": "check the kubeconfig's server (kubernetes.kubeconfig, "
                               "--kubeconfig, --context) and that the cluster is up"}
    return [f"cannot reach {urls[url]} at {redact_url(url)}: {why}; "
            f"{hints.get(urls[url], 'check its url in the [prometheus] table')}"
            for url, why in down.items()]

