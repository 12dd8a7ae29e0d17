"""The boundary between kubernetes-asyncio and our error taxonomy.

Every call to the API server goes through ``api_errors(...)`` so that ``ApiException``,
aiohttp's transport errors and timeouts never leak past this package: callers decide on
retry and reporting by kind (``autoscaler.errors``), and every message names the operation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.errors import (
    AccessDeniedError,
    AutoscalerError,
    ConflictError,
    NotFoundError,
    RejectedError,
    ThrottledError,
    TransientError,
)

__all__ = ["RejectedError", "api_errors", "read_body", "status_message", "translate"]


def status_message(error: ApiException) -> str:
    """The ``Status.message`` of an error response, else its HTTP reason."""
    body = getattr(error, "body", None)
    if body:
        try:
            status = json.loads(body)
        except (TypeError, ValueError):
            status = None
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])
    return str(error.reason or "no reason given")


def retry_after(error: ApiException) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (the API server's form)."""
    headers = getattr(error, "headers", None) or {}
    try:
        value = float(headers.get("Retry-After", ""))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 and not math.isnan(value) else None


def translate(error: ApiException, what: str) -> AutoscalerError:
    """Map an HTTP error status onto our taxonomy, keeping the server's message."""
    code = int(error.status or 0)
    detail = f"{what}: HTTP {code}: {status_message(error)}"
    if code in (401, 403):
        return AccessDeniedError(detail)
    if code == 404:
        return NotFoundError(detail)
    if code == 409:
        return ConflictError(detail)
    if code == 429:
        return ThrottledError(detail, retry_after=retry_after(error))
    if code == 0 or code >= 500:
        return TransientError(detail)
    return RejectedError(detail)


@contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Wrap whatever the client raises inside the block into our errors, naming ``what``."""
    try:
        yield
    except ApiException as error:
        raise translate(error, what) from error
    except TimeoutError as error:
        raise TransientError(f"{what}: timed out") from error
    except (aiohttp.ClientError, OSError) as error:
        raise TransientError(f"{what}: {type(error).__name__}: {error}") from error


async def read_body(response: Any) -> bytes:
    """The body of a raw aiohttp response (a request sent with ``_preload_content=False``),
    the response released; an error status raises ``ApiException`` as the client would."""
    try:
        body: bytes = await response.read()
    finally:
        response.release()
    if response.status >= 300:  # unread bodies skip the client's status check
        error = ApiException(status=response.status, reason=response.reason)
        error.body = body.decode(errors="replace")  # type: ignore[assignment] # str, as the client sets
        raise error
    return body
