"""A bearer token kept in a file that rotates, kept current the way client-go keeps it.

A kubeconfig user's ``tokenFile`` and the in-cluster service-account token are rewritten while
the daemon runs (kubelet refreshes projected tokens; an agent or an operator replaces a file).
kubernetes-asyncio reads a kubeconfig's ``tokenFile`` once, so every request fails with 401
after a rotation until a restart, and re-reads the in-cluster token only once a minute.
client-go re-reads such a file periodically and drops its cached token on a 401; ``TokenFile``
does both for the session: ``current()`` stats the file at most once per ``CHECK_PERIOD`` and
reads it again when it changed, ``reread()`` reads it at once (the session's answer to a 401).

Guarantees: the token is stripped of surrounding whitespace (as client-go: a file written with
``echo`` ends in a newline, which would otherwise break the HTTP header); a read that fails or
finds an empty file keeps the last good token (client-go: the last successfully read value
wins) and is logged once, not on every request; the token itself is never logged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from kubernetes_asyncio.client import Configuration

log = structlog.get_logger("autoscaler.kube.token")

CHECK_PERIOD = 1.0
"""Seconds between two looks at the file. A stat a second costs nothing, and a new token is
written well before the old one stops working (kubelet refreshes at 80 % of its lifetime)."""

_Signature = tuple[int, int, int, int, int]


class TokenFile:
    """The current token of one file; ``apply`` is a configuration's ``refresh_api_key_hook``."""

    def __init__(self, path: Path, *, check_period: float = CHECK_PERIOD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Reads the file now: ``OSError`` or ``ValueError`` (empty, not text) if it cannot."""
        self.path = path
        self._check_period, self._clock = check_period, clock
        self._signature = _signature(path)  # before the read: a change in between is seen later
        self._token = _read(path)
        self._checked = clock()
        self._failing = False

    def current(self) -> str:
        """The token, read again first if the file changed since it was last looked at."""
        now = self._clock()
        if now - self._checked >= self._check_period:
            self._checked = now
            try:
                changed = _signature(self.path) != self._signature
            except OSError as error:
                self._keep(error)
            else:
                if changed:
                    self._load()
        return self._token

    def reread(self) -> str:
        """The token as the file holds it now (the last good one if it cannot be read)."""
        self._checked = self._clock()
        self._load()
        return self._token

    def apply(self, configuration: Configuration) -> None:
        """Put the current token where kubernetes-asyncio takes it from for each request."""
        configuration.api_key["BearerToken"] = bearer(self.current())

    def _load(self) -> None:
        try:
            signature = _signature(self.path)
            token = _read(self.path)
        except (OSError, ValueError) as error:
            self._keep(error)
            return
        if self._failing:
            log.info("bearer token file readable again", path=str(self.path))
        self._signature, self._token, self._failing = signature, token, False

    def _keep(self, error: Exception) -> None:
        if not self._failing:  # once per failure streak: a request rate of warnings helps nobody
            log.warning("cannot read the bearer token file; keeping the last token read",
                        path=str(self.path), error=str(error))
        self._failing = True


def bearer(token: str) -> str:
    """The ``Authorization`` header's value for ``token``."""
    return f"Bearer {token}"


def _signature(path: Path) -> _Signature:
    """What changes when the file is rewritten in place or replaced (kubelet swaps a symlink;
    ``stat`` follows it to the new file)."""
    info = os.stat(path)
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _read(path: Path) -> str:
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"{path} is empty")
    return token
