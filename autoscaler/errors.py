"""The daemon's own error taxonomy, raised at adapter boundaries.

Library exceptions (aiohttp, kubernetes-asyncio's ``ApiException``, requests, urllib3) are
wrapped into these where they cross into our code, so callers decide on retry and reporting
by kind, never by a transport library's type.
"""

from __future__ import annotations

from typing import TypeVar


class AutoscalerError(Exception):
    """Base of every error the daemon raises on purpose."""


class TransientError(AutoscalerError):
    """Worth retrying: timeouts, refused connections, 5xx, 429."""


class TimedOutError(TransientError):
    """No answer in time: the request's timeout or the pass's deadline passed."""


class ThrottledError(TransientError):
    """The server asked us to slow down (HTTP 429), after ``retry_after`` seconds if it said."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConflictError(AutoscalerError):
    """A write lost an optimistic-concurrency race (HTTP 409): re-read and recompute."""


class NotFoundError(AutoscalerError):
    """The object or resource kind does not exist (HTTP 404, unknown kind in discovery)."""


class AccessDeniedError(AutoscalerError):
    """The server refused the credentials or the action (HTTP 401/403)."""


class RejectedError(AutoscalerError):
    """The server refused the request as invalid (a permanent 4xx such as 400, 405, 422):
    retrying the same request cannot help."""


class BadQueryError(AutoscalerError):
    """Prometheus rejected the query (HTTP 4xx): retrying the same query cannot help."""


class BadDataError(AutoscalerError):
    """The answer arrived but cannot be used (wrong shape, NaN, Inf, negative, explosion)."""


class InvalidConfigError(AutoscalerError):
    """The configuration is invalid; the message lists every problem with its field path."""


class StateUnavailableError(TransientError):
    """The history store cannot be read now (I/O error, API error, timeout): try again
    later; nothing may be written meanwhile."""


class NotLeaderError(AutoscalerError):
    """This instance no longer holds its lease, by its own monotonic clock: it must not
    write (a store, a scale) until it leads again."""


class StateSetAsideError(AutoscalerError):
    """The stored history could not be decoded; it was moved aside to ``kept_as`` (never
    overwritten) and the caller starts fresh, loudly."""

    def __init__(self, message: str, *, kept_as: str) -> None:
        super().__init__(message)
        self.kept_as = kept_as


class StateNotOursError(AutoscalerError):
    """The state path holds something that is not recognisably a store of ours (another
    file, a link, a device, a file we may not read): refused and left exactly as it is."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"cannot use {path} as the state file: {why}; it is left as it is "
                         "(point stateFile or --state-file at another path)")
        self.path, self.why = path, why


class StateInUseError(AutoscalerError):
    """The history store belongs to another running daemon (its lock is held, or its owner
    field names another): refused, never shared; the message names the other."""


class FencedError(StateInUseError):
    """A bucket's state was stamped by a newer owner (another incarnation, or a later epoch)
    since we read it: the bucket is no longer ours. Nothing was written, and the caller must
    not retry: it drops the bucket and claims it again through the ring's rules (issue 38,
    docs/design/active-active.md §4.5 F2). A kind of ``StateInUseError``, so the history
    keeper neither retries it nor folds it in."""

    def __init__(self, message: str, *, later_epoch: int | None = None) -> None:
        super().__init__(message)
        self.later_epoch = later_epoch
        """The epoch of the stamp that refused ours, when it was a later one."""


E = TypeVar("E", bound=BaseException)


def detached(error: E) -> E:
    """``error`` made a plain value to keep (a failed query's reason, handed on): without its
    traceback and the exceptions it was raised from or during.

    A traceback holds every frame the error passed through with all of its locals, and a
    frame that holds the error too (a variable it was kept in) makes a cycle that only the
    cyclic collector frees, and the daemon runs that seldom (``runtime/heap.py``): each
    failed answer's frames and what they held stayed for ~100 s (issue 40).
    """
    error.__traceback__ = None
    error.__cause__ = None
    error.__context__ = None
    return error
