"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics where they
are safe, and stricter where a Lease edited by hand would otherwise give two leaders.

Leadership is a *term*: it starts with a write of the Lease that names us, and lasts while
each renewal succeeds. ``is_leader`` holds for ``renew_deadline`` from the moment the last
successful renewal was *sent* (a slow answer does not stretch it: the others time the lease
from when they saw it change, which is after we sent it), so it ends before the lease can
expire for the others. What ends a term at once, before any further write:

- a read that finds the Lease written by someone else: another holder, no holder, or our
  own identity at a resourceVersion we did not write (a hand edit, ``kubectl label``);
- the Lease gone (404), or a renewal answered 409 or 404.

A candidate takes the Lease only when it is free: released (no holder and the 1 s duration
a release writes), or unchanged for its duration (at least ours) as measured on *our*
monotonic clock since we saw it change, whoever it names (a hand edit that names us is a
change like any other); a Lease that is missing is created at once only if none was ever
seen, else once it has stayed missing that long. A deposed holder stops at its next read,
and the others wait a whole lease duration, so two replicas never lead at once.

A term that lapsed (no renewal for ``renew_deadline``: a slow API server, a process frozen
past its lease) never resumes: the next successful write starts a new one (``term``), and
``changed`` is set, so the daemon re-reads the history as a fresh leader does instead of
acting on what it knew before. On shutdown the leader releases the lease so a standby takes
over at once.

Written here rather than using kubernetes-asyncio's bundled elector, which orphans its task on
cancel, never releases, never re-campaigns and stamps local time as UTC (libraries.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import structlog
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.config import LeaderElectionSettings

log = structlog.get_logger("autoscaler.leader")


def micro_time(moment: datetime) -> str:
    """MicroTime: exactly six fractional digits and a zone; a real API server rejects others."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


_TIMINGS = LeaderElectionSettings()
"""The timings' defaults are the config's (``daemon.leaderElection``): one place."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = _TIMINGS.lease_duration
    renew_deadline: float = _TIMINGS.renew_deadline
    retry_period: float = _TIMINGS.retry_period
    request_timeout: float = 5.0


RELEASED_DURATION = 1
"""The ``leaseDurationSeconds`` a release writes (client-go's too): with no holder, the mark
of a Lease given up by its holder, which a candidate may take at once."""


class LeaderElector:
    def __init__(
        self,
        api_client: ApiClient,
        config: LeaseConfig,
        *,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = CoordinationV1Api(api_client)
        self.config = config
        self._now = wall_clock
        self._monotonic = monotonic
        self._observed: tuple[str | None, str] | None = None
        """The Lease as last seen, (resourceVersion or None when missing, holder); None
        before the first read."""
        self._observed_at = 0.0
        self._written: str | None = None
        """The resourceVersion our last successful write of the Lease gave it."""
        self._unanswered: str | None = None
        """The renewTime of a write of ours whose answer never came (it may have landed)."""
        self._valid_until: float | None = None
        self._campaign: asyncio.Task[Any] | None = None
        self._resigned = False
        self.term = 0
        """Counts the terms this instance has led: a lapsed or ended term never resumes."""
        self.changed = asyncio.Event()
        """Set whenever leadership is gained or lost, or a new term starts (the daemon
        waits on it)."""

    @property
    def is_leader(self) -> bool:
        until = self._valid_until
        return until is not None and self._monotonic() < until

    def leads(self, term: int) -> bool:
        """Whether this instance leads now, in ``term`` (not in a later one)."""
        return self.term == term and self.is_leader

    async def run(self) -> None:
        """Campaign and renew until cancelled or released; never raises (errors are logged and
        retried)."""
        self._campaign = asyncio.current_task()
        reported = (False, 0)
        while not self._resigned:
            try:
                await self._round()
            except Exception as error:  # a fault must never stop the elector
                log.warning("lease call failed", error=str(error), lease=self.config.name)
            now = (self.is_leader, self.term)
            if now != reported:
                log.info("leadership changed", leader=now[0], term=now[1],
                         identity=self.config.identity)
                reported = now
                self.changed.set()
            await asyncio.sleep(self.config.retry_period)

    async def release(self) -> None:
        """Stop campaigning and give the lease up (holder cleared, 1 s duration) if we hold it.

        The campaign is stopped first: a renewal still in flight could otherwise land after the
        release, or the next round re-take the freed lease, and the standby would wait a whole
        lease duration."""
        self._resigned = True
        campaign, self._campaign = self._campaign, None
        if campaign is not None and campaign is not asyncio.current_task():
            campaign.cancel()
            await asyncio.wait({campaign})  # not `await campaign`: its CancelledError isn't ours
        if self._written is None and self._unanswered is None:
            return
        self._valid_until = None
        self.changed.set()
        with contextlib.suppress(Exception):
            lease = await self._read()
            if lease is None or not self._ours(lease):
                return  # someone else's by now: not ours to release
            now = micro_time(self._now())
            body = self._body(
                lease.metadata.resource_version, holder="", acquire=now, renew=now,
                duration=RELEASED_DURATION, transitions=lease.spec.lease_transitions or 0,
            )
            await self._api.replace_namespaced_lease(
                self.config.name, self.config.namespace, cast(Any, body),
                _request_timeout=self.config.request_timeout,
            )
            log.info("lease released", lease=self.config.name)

    async def _read(self) -> Any:
        try:
            return await self._api.read_namespaced_lease(
                self.config.name, self.config.namespace,
                _request_timeout=self.config.request_timeout,
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    async def _round(self) -> None:
        """Read the Lease; renew it if it is ours, else end our term and take it if free."""
        cfg = self.config
        lease = await self._read()
        if lease is not None and self._ours(lease):
            spec = lease.spec
            self._written, self._unanswered = lease.metadata.resource_version, None
            acquire = micro_time(spec.acquire_time) if spec.acquire_time else None
            await self._write(lease, acquire=acquire, transitions=spec.lease_transitions or 0)
            return
        first = self._observed is None
        holder = (lease.spec.holder_identity or "") if lease is not None else ""
        self._see(lease.metadata.resource_version if lease is not None else None, holder)
        self._end("the Lease was deleted" if lease is None else
                  f"the Lease was written by someone else (holder {holder or 'none'!r})")
        if lease is None:
            if first or self._stood(cfg.lease_duration):
                await self._write(None, acquire=None, transitions=0)
            return
        spec = lease.spec
        released = not holder and spec.lease_duration_seconds == RELEASED_DURATION
        if released or self._stood(max(spec.lease_duration_seconds or 0, cfg.lease_duration)):
            await self._write(lease, acquire=None, transitions=(spec.lease_transitions or 0) + 1)

    def _ours(self, lease: Any) -> bool:
        """The Lease as our own last write left it: it names us, at the resourceVersion that
        write gave it (or it is the write whose answer we never got)."""
        spec = lease.spec
        if (spec.holder_identity or "") != self.config.identity:
            return False
        if lease.metadata.resource_version == self._written:
            return True
        return self._unanswered is not None and spec.renew_time is not None \
            and micro_time(spec.renew_time) == self._unanswered

    def _see(self, resource_version: str | None, holder: str) -> None:
        observed = (resource_version, holder)
        if observed != self._observed:
            self._observed, self._observed_at = observed, self._monotonic()

    def _stood(self, duration: float) -> bool:
        """The Lease as last seen has not changed for ``duration`` by our clock."""
        return self._observed_at + duration <= self._monotonic()

    def _end(self, why: str) -> None:
        """Someone else wrote the Lease: our term ends now, whatever our clock says."""
        if self._valid_until is None:
            return
        self._valid_until = None
        if self._written is not None:
            log.warning(f"leadership ended: {why}", lease=self.config.name,
                        identity=self.config.identity)
        self._written = self._unanswered = None
        self.changed.set()

    async def _write(self, lease: Any, *, acquire: str | None, transitions: int) -> None:
        """Create or replace the Lease naming us. Valid from the moment it is sent, and only
        if it succeeds; a 409 or 404 means someone else wrote or deleted it since our read."""
        cfg = self.config
        now = micro_time(self._now())
        version = lease.metadata.resource_version if lease is not None else None
        body = self._body(version, holder=cfg.identity, acquire=acquire or now, renew=now,
                          duration=int(cfg.lease_duration), transitions=transitions)
        sent = self._monotonic()
        self._unanswered = now
        try:
            if lease is None:
                written = await self._api.create_namespaced_lease(
                    cfg.namespace, cast(Any, body), _request_timeout=cfg.request_timeout)
            else:
                written = await self._api.replace_namespaced_lease(
                    cfg.name, cfg.namespace, cast(Any, body), _request_timeout=cfg.request_timeout)
        except ApiException as error:
            if error.status in {404, 409}:  # not applied: someone else was first
                self._unanswered = None
                self._end("the Lease was written or deleted by someone else")
                return
            raise
        self._written, self._unanswered = written.metadata.resource_version, None
        if self._valid_until is None or sent >= self._valid_until:
            self.term += 1  # a lapsed term never resumes: the daemon reads the history again
        self._valid_until = sent + cfg.renew_deadline

    def _body(  # dicts, not V1Lease: the model would drop the MicroTime fraction at .000000
        self, resource_version: str | None, *, holder: str, acquire: str, renew: str,
              duration: int, transitions: int) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": duration,
                "acquireTime": acquire,
                "renewTime": renew,
                "leaseTransitions": transitions,
            },
        }
