"""Instant queries against several Prometheus servers, off the event loop, within a deadline.

The HTTP of a query is ``transport``'s (bounded bytes, series, time and redirects); this
module runs it in one bounded ``ThreadPoolExecutor`` with one requests session per (worker
thread, server): requests' sessions are not documented as thread-safe. tenacity retries
transient faults with exponential backoff and explicit jitter, and stops before the pass's
deadline. Failures arrive as ``TransientError`` (timeouts, refused connections, 5xx, 429, an
answer too slow), ``AccessDeniedError`` (401/403, a certificate that does not verify),
``BadQueryError`` (other 4xx: PromQL errors) or ``BadDataError`` (an answer that is not
Prometheus JSON, or over a limit, or a redirect not followed).

Credentials are read from files on each query and re-read when the file changes (stat: mtime,
size, inode), so rotated tokens work without a restart. They never appear in a repr, a log
line or an error message; URLs are logged without userinfo. A server with
``insecureSkipVerify`` is named in one warning when the client starts (urllib3's warning per
request is silenced).
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_any,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base
from urllib3.exceptions import InsecureRequestWarning

from autoscaler.adapters.prometheus import deadline, transport
from autoscaler.adapters.prometheus.inputs import ServerSettings
from autoscaler.errors import TimedOutError, TransientError

log = structlog.get_logger(__name__)

_MIN_ATTEMPT = 0.05
"""Seconds an attempt needs at least; no retry starts closer than this to the deadline."""


def redact_url(url: str) -> str:
    """``url`` without ``user:password@``, for logs and messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


class SecretFile:
    """A credential file, re-read whenever its (mtime, size, inode) changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""

    def read(self) -> str:
        try:
            with self._lock:
                info = os.stat(self.path)
                stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
                if stamp != self._stamp:
                    self._value = self.path.read_text().strip()
                    self._stamp = stamp
                    log.info("credential file loaded", path=str(self.path))
                return self._value
        except OSError as error:  # mid-rotation or not mounted yet: worth another try
            raise TransientError(f"cannot read {self.path}: {error.strerror}") from None

    def __repr__(self) -> str:
        return f"SecretFile({str(self.path)!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Attempts per query and tenacity's exponential backoff (seconds)."""

    attempts: int = 3
    initial_wait: float = 0.2
    max_wait: float = 2.0
    jitter: float = 0.1


class _StopBeforeDeadline(stop_base):
    """Stop when the next attempt would start too close to (or after) the deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        start = time.monotonic() + retry_state.upcoming_sleep
        return start + _MIN_ATTEMPT >= self.deadline


class _Server:
    """One server's settings plus its credential files; builds per-request auth."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.url = settings.url.rstrip("/")
        self.safe_url = redact_url(self.url)
        self.token = SecretFile(settings.bearer_token_file) if settings.bearer_token_file else None
        pw_file = settings.basic_auth_password_file
        self.password = SecretFile(pw_file) if pw_file else None

    def headers(self) -> dict[str, str]:
        headers = dict(self.settings.headers)
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token.read()}"
        return headers

    def auth(self) -> tuple[str, str] | None:
        user = self.settings.basic_auth_username
        if user is None:
            return None
        return (user, self.password.read() if self.password else "")

    def connect(self) -> requests.Session:
        if self.settings.insecure_skip_verify:
            return deadline.session(verify=False)
        ca_file = self.settings.ca_file
        return deadline.session(verify=True if ca_file is None else str(ca_file))

    def exchange(self, timeout: float, series: int | None) -> transport.Exchange:
        s = self.settings
        return transport.Exchange(
            server=s.name, url=self.safe_url, timeout=timeout,
            max_response_bytes=s.max_response_bytes, max_series=s.max_series,
            max_query_series=series, follow_redirects=s.follow_redirects)

    def __repr__(self) -> str:
        return f"_Server(name={self.settings.name!r}, url={self.safe_url!r})"


class PrometheusClient:
    """Runs instant queries for named servers in a bounded thread pool."""

    def __init__(
        self, servers: Mapping[str, ServerSettings], *, max_workers: int = 4,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._servers = {name: _Server(settings) for name, settings in servers.items()}
        self._retry = retry or RetryPolicy()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="prometheus")
        self._local = threading.local()
        self._opened: list[requests.Session] = []
        self._opened_lock = threading.Lock()
        _warn_unverified(self._servers.values())

    def __repr__(self) -> str:
        return f"PrometheusClient(servers={sorted(self._servers)!r})"

    def knows(self, server: str) -> bool:
        return server in self._servers

    async def query(self, server: str, promql: str, *, at: float, deadline: float,
                    parse: Callable[[Any], Any] | None = None,
                    max_series: int | None = None) -> Any:
        """The raw ``data.result`` of ``promql`` at Unix time ``at``; retried until ``deadline``.

        With ``parse``, what it makes of the answer, computed in the worker thread: a large
        answer is neither converted on the event loop nor held as raw JSON past the query.
        ``max_series``: the series this query may bring, refused on the answer's bytes before
        it is decoded (as the server's ``maxSeries`` is).

        Raises ``TransientError``, ``AccessDeniedError``, ``BadQueryError`` or ``BadDataError``.
        """
        params = {"query": promql, "time": f"{at:.3f}"}
        return await self._retrying(server, "query", params, deadline=deadline, parse=parse,
                                    max_series=max_series)

    async def query_range(self, server: str, promql: str, *, start: float, end: float,
                          step: float, deadline: float,
                          parse: Callable[[Any], Any] | None = None) -> Any:
        """The raw ``data.result`` (a matrix) of ``promql`` evaluated every ``step`` seconds
        from ``start`` to ``end`` (Unix times); bounded and retried as ``query``."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                  "step": f"{step:g}"}
        return await self._retrying(server, "query_range", params, deadline=deadline,
                                    parse=parse)

    async def _retrying(self, server: str, endpoint: str, params: Mapping[str, str], *,
                        deadline: float, parse: Callable[[Any], Any] | None,
                        max_series: int | None = None) -> Any:
        policy = self._retry
        async for attempt in AsyncRetrying(
            stop=stop_any(stop_after_attempt(policy.attempts), _StopBeforeDeadline(deadline)),
            wait=wait_exponential_jitter(
                multiplier=policy.initial_wait, max=policy.max_wait, jitter=policy.jitter),
            retry=retry_if_exception_type(TransientError),
            before_sleep=_log_retry,
            reraise=True,
        ):
            with attempt:
                return await self._attempt(server, endpoint, params, deadline=deadline,
                                           parse=parse, max_series=max_series)
        raise AssertionError("unreachable: tenacity either returns or reraises")

    async def _attempt(self, server: str, endpoint: str, params: Mapping[str, str], *,
                       deadline: float, parse: Callable[[Any], Any] | None,
                       max_series: int | None) -> Any:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimedOutError("the pass's deadline passed before the query was sent")
        timeout = min(self._servers[server].settings.timeout, remaining)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, functools.partial(
            self._run, server, endpoint, params, timeout=timeout, parse=parse,
            max_series=max_series))
        try:
            # Also bounds the wait for a free worker when the pool is busy.
            return await asyncio.wait_for(future, timeout=remaining)
        except TimeoutError:
            raise TimedOutError(f"no answer within {remaining:.2f}s (pass deadline)") from None

    def _run(self, server: str, endpoint: str, params: Mapping[str, str], *, timeout: float,
             parse: Callable[[Any], Any] | None = None, max_series: int | None = None) -> Any:
        """Worker-thread side of one attempt: build auth, query, classify failures, parse."""
        target = self._servers[server]
        # The server's own query parameters, and ours over them (the evaluation time).
        sent = {"query": params["query"], **target.settings.query_params, **params}
        return transport.query(
            self._connection(target), f"{target.url}/api/v1/{endpoint}", params=sent,
            headers=target.headers(), auth=target.auth(),
            exchange=target.exchange(timeout, max_series), matrix=endpoint == "query_range",
            parse=parse)

    def _connection(self, server: _Server) -> requests.Session:
        conns: dict[str, requests.Session] = self._local.__dict__.setdefault("conns", {})
        name = server.settings.name
        if name not in conns:
            conns[name] = server.connect()
            with self._opened_lock:
                self._opened.append(conns[name])
        return conns[name]

    def close(self) -> None:
        """Stop the pool (without waiting for hung queries) and close every session."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._opened_lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()


def _warn_unverified(servers: Iterable[_Server]) -> None:
    unverified = [server for server in servers if server.settings.insecure_skip_verify]
    for server in unverified:
        log.warning("TLS certificate of Prometheus server not verified (insecureSkipVerify)",
                    server=server.settings.name, url=server.safe_url)
    if unverified:  # said once above; urllib3 would repeat it on stderr for every request
        warnings.filterwarnings("ignore", category=InsecureRequestWarning)


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    log.info("retrying query", attempt=state.attempt_number, error=str(error),
             sleep=round(state.upcoming_sleep, 3))
