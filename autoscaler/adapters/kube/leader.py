"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

A candidate takes the lease when it is free, released, or has not been renewed for
``lease_duration`` as measured on *our* monotonic clock since we last saw it change (so
clock skew between replicas cannot make two leaders). The leader renews every
``retry_period``; ``is_leader`` turns false as soon as no renewal has succeeded for
``renew_deadline``, before the lease can expire for the others, so two replicas never both
write. On shutdown the leader releases the lease so a standby takes over at once.

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
        self._observed: tuple[str, str] | None = None  # (resourceVersion, holder)
        self._observed_at = 0.0
        self._last_renewal: float | None = None
        self._campaign: asyncio.Task[Any] | None = None
        self._resigned = False
        self.changed = asyncio.Event()
        """Set whenever leadership is gained or lost (the daemon waits on it)."""

    @property
    def is_leader(self) -> bool:
        last = self._last_renewal
        return last is not None and self._monotonic() - last < self.config.renew_deadline

    async def run(self) -> None:
        """Campaign and renew until cancelled or released; never raises (errors are logged and
        retried)."""
        self._campaign = asyncio.current_task()
        was_leader = False
        while not self._resigned:
            try:
                acquired = await self._try_acquire_or_renew()
            except Exception as error:  # a fault must never stop the elector
                log.warning("lease call failed", error=str(error), lease=self.config.name)
                acquired = False
            if acquired:
                self._last_renewal = self._monotonic()
            leading = self.is_leader
            if leading != was_leader:
                log.info("leadership changed", leader=leading, identity=self.config.identity)
                was_leader = leading
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
        if self._last_renewal is None:
            return
        self._last_renewal = None
        self.changed.set()
        with contextlib.suppress(Exception):
            lease = await self._read()
            if lease is None or lease.spec.holder_identity != self.config.identity:
                return
            now = micro_time(self._now())
            body = self._body(
                lease.metadata.resource_version, holder="", acquire=now, renew=now,
                duration=1, transitions=lease.spec.lease_transitions or 0,
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

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now = micro_time(self._now())
        lease = await self._read()
        if lease is None:
            body = self._body(None, holder=cfg.identity, acquire=now, renew=now,
                              duration=int(cfg.lease_duration), transitions=0)
            return await self._write(create=True, body=body)
        spec = lease.spec
        holder = spec.holder_identity or ""
        observed = (lease.metadata.resource_version, holder)
        if observed != self._observed:
            self._observed, self._observed_at = observed, self._monotonic()
        duration = spec.lease_duration_seconds or cfg.lease_duration
        expired = self._observed_at + duration <= self._monotonic()
        if holder and holder != cfg.identity and not expired:
            return False
        ours = holder == cfg.identity
        acquire = micro_time(spec.acquire_time) if ours and spec.acquire_time else now
        transitions = (spec.lease_transitions or 0) + (0 if ours else 1)
        body = self._body(lease.metadata.resource_version, holder=cfg.identity, acquire=acquire,
                          renew=now, duration=int(cfg.lease_duration), transitions=transitions)
        return await self._write(create=False, body=body)

    async def _write(self, *, create: bool, body: dict[str, Any]) -> bool:
        cfg = self.config
        try:
            if create:
                await self._api.create_namespaced_lease(
                    cfg.namespace, cast(Any, body), _request_timeout=cfg.request_timeout)
            else:
                await self._api.replace_namespaced_lease(
                    cfg.name, cfg.namespace, cast(Any, body), _request_timeout=cfg.request_timeout)
        except ApiException as error:
            if error.status == 409:  # someone else wrote first: not ours this round
                return False
            raise
        return True

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
