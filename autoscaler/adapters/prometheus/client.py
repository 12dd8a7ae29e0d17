"""Instant queries against several Prometheus servers, off the event loop, within a deadline.

prometheus-api-client is synchronous (requests), so every query runs in one bounded
``ThreadPoolExecutor`` with one ``PrometheusConnect`` per (worker thread, server): requests'
sessions are not documented as thread-safe. The client's own retries are off
(``Retry(total=0)``); tenacity retries transient faults with exponential backoff and explicit
jitter, and stops before the pass's deadline. Library exceptions become ``TransientError``
(timeouts, refused connections, 5xx, 429), ``AccessDeniedError`` (401/403, a certificate that
does not verify), ``BadQueryError``
(other 4xx: PromQL errors) or ``BadDataError`` (an answer that is not Prometheus JSON).

Credentials are read from files on each query and re-read when the file changes (stat: mtime,
size, inode), so rotated tokens work without a restart. They never appear in a repr, a log
line or an error message; URLs are logged without userinfo.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
import structlog
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_any,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base
from urllib3.util.retry import Retry

from autoscaler.adapters.prometheus.model import ServerSettings
from autoscaler.errors import AccessDeniedError, BadDataError, BadQueryError, TransientError

log = structlog.get_logger(__name__)

_STATUS = re.compile(r"HTTP Status Code (\d{3})")
_BODY = re.compile(r"\((b'.*'|b\".*\")\)\s*$", re.DOTALL)
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

    def connect(self) -> PrometheusConnect:
        session = requests.Session()
        if self.settings.insecure_skip_verify:
            session.verify = False
        elif self.settings.ca_file is not None:
            session.verify = str(self.settings.ca_file)
        # Our retries are tenacity's, bounded by the deadline; the client's would block 6-10 s.
        return PrometheusConnect(url=self.url, retry=Retry(total=0), session=session)

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
        self._opened: list[PrometheusConnect] = []
        self._opened_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PrometheusClient(servers={sorted(self._servers)!r})"

    def knows(self, server: str) -> bool:
        return server in self._servers

    async def query(self, server: str, promql: str, *, at: float, deadline: float,
                    parse: Callable[[Any], Any] | None = None) -> Any:
        """The raw ``data.result`` of ``promql`` at Unix time ``at``; retried until ``deadline``.

        With ``parse``, what it makes of the answer, computed in the worker thread: a large
        answer is neither converted on the event loop nor held as raw JSON past the query.

        Raises ``TransientError``, ``AccessDeniedError``, ``BadQueryError`` or ``BadDataError``.
        """
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
                return await self._attempt(server, promql, at=at, deadline=deadline,
                                           parse=parse)
        raise AssertionError("unreachable: tenacity either returns or reraises")

    async def _attempt(self, server: str, promql: str, *, at: float, deadline: float,
                       parse: Callable[[Any], Any] | None) -> Any:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TransientError("the pass's deadline passed before the query was sent")
        timeout = min(self._servers[server].settings.timeout, remaining)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, self._run, server, promql, at, timeout, parse)
        try:
            # Also bounds the wait for a free worker when the pool is busy.
            return await asyncio.wait_for(future, timeout=remaining)
        except TimeoutError:
            raise TransientError(f"no answer within {remaining:.2f}s (pass deadline)") from None

    def _run(self, server: str, promql: str, at: float, timeout: float,
             parse: Callable[[Any], Any] | None = None) -> Any:
        """Worker-thread side of one attempt: build auth, query, classify failures, parse."""
        target = self._servers[server]
        conn = self._connection(target)
        conn.headers = target.headers()
        conn.auth = target.auth()
        params = {**target.settings.query_params, "time": f"{at:.3f}"}
        try:
            raw = conn.custom_query(promql, params=params, timeout=timeout)
        except (PrometheusApiClientException, requests.RequestException, ValueError,
                KeyError, TypeError) as error:
            raise _translate(error, target.safe_url, timeout) from None
        return raw if parse is None else parse(raw)

    def _connection(self, server: _Server) -> PrometheusConnect:
        conns: dict[str, PrometheusConnect] = self._local.__dict__.setdefault("conns", {})
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


def _translate(error: Exception, url: str, timeout: float) -> Exception:
    """Our taxonomy for what prometheus-api-client and requests raise (order matters)."""
    if isinstance(error, PrometheusApiClientException):
        return _classify_status(str(error))
    plain_value_error = isinstance(error, ValueError) and not isinstance(
        error, requests.RequestException)
    if plain_value_error or isinstance(error, requests.JSONDecodeError | KeyError | TypeError):
        return BadDataError(f"{url} answered with something that is not Prometheus query JSON")
    if isinstance(error, requests.exceptions.SSLError):
        # Not worth retrying within a pass: a certificate does not become valid in seconds.
        return AccessDeniedError(f"TLS verification of {url} failed (check ca_file)")
    cause = _root_cause(error)
    # With Retry(total=0), urllib3 wraps a read timeout in MaxRetryError -> ConnectionError.
    if isinstance(error, requests.Timeout) or cause.startswith(("TimeoutError", "ReadTimeout")):
        return TransientError(f"{url} timed out after {timeout:.2f}s")
    if isinstance(error, requests.ConnectionError):
        return TransientError(f"cannot connect to {url}: {cause}")
    return TransientError(f"request to {url} failed: {type(error).__name__}")


def _classify_status(message: str) -> Exception:
    match = _STATUS.search(message)
    status = int(match.group(1)) if match else 0
    detail = _error_detail(message)
    text = f"HTTP {status}" + (f": {detail[:300]}" if detail else "")
    if status in (401, 403):
        return AccessDeniedError(f"{text} (check the credentials)")
    if status == 429 or status >= 500 or status == 0:
        return TransientError(text)
    return BadQueryError(text)


def _error_detail(message: str) -> str:
    """Prometheus's ``error`` field from the client's ``HTTP Status Code N (b'...')`` text."""
    match = _BODY.search(message)
    if not match:
        return ""
    try:
        body = ast.literal_eval(match.group(1))
        return str(json.loads(body)["error"])
    except (ValueError, SyntaxError, TypeError, KeyError):
        return ""  # not Prometheus's JSON (a proxy's HTML page): the status says enough


def _root_cause(error: BaseException) -> str:
    """The innermost cause's class name ("ConnectionRefusedError"): short, and secret-free."""
    seen = error
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    if isinstance(seen, OSError) and seen.strerror:
        return f"{type(seen).__name__}: {seen.strerror}"
    return type(seen).__name__


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    log.info("retrying query", attempt=state.attempt_number, error=str(error),
             sleep=round(state.upcoming_sleep, 3))
