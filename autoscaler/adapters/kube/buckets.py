"""The ring's bucket Leases ``<ring>-bucket-<xx>`` (issue 38; docs/design/active-active.md
§4.1, §4.4): a view of them, and the only two writes a member ever makes to one, a claim and
a release. A bucket Lease is never renewed: it names its holder (an incarnation) and counts
claims in ``leaseTransitions`` (the *epoch*); it is valid while the holder's member Lease is
renewed, which ``membership.py`` judges, not this module.

Exclusivity is the API server's compare-and-swap: a claim is a PUT carrying the
resourceVersion the claimant observed (a POST when it saw none), so of two claimants that
saw the same version exactly one wins; the other gets 409 and learns it lost. A release is a
CAS too, on the version of our own claim. A write that lost reads the Lease again into the
view, so a view behind the server costs one lost write, not one per try.

A ring is made with ``BUCKETS`` buckets and one placement; both are stamped on every bucket
Lease, and a Lease that says otherwise is refused with one line (``InvalidConfigError``),
never written over: replicas configured differently must use another ring name.

Each write is preceded, synchronously, by the caller's ``may_write()`` (its member Lease is
valid, §4.3 M2); when it says no, nothing is sent (``NotLeaderError``).

The view is kept by one LIST then WATCH of the Leases labelled ``autoscaler.dev/ring=<R>,
autoscaler.dev/role=bucket`` (``start``; the house informer: resumed watches, relist on 410),
or refreshed by one LIST (``refresh``). Its sink methods take raw Lease JSON, so a shared
watch of every ring Lease (membership's, §4.3 M3) may feed it instead. A Lease of other ring
settings seen by the watch is kept out of the view and named in ``problem``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import structlog
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api

from autoscaler.adapters.kube.api_errors import api_errors, read_body
from autoscaler.adapters.kube.informer import Informer, RawObject, WatchCounters, WatchOptions
from autoscaler.adapters.kube.leader import micro_time
from autoscaler.errors import ConflictError, InvalidConfigError, NotFoundError, NotLeaderError
from autoscaler.runtime.ring import BUCKETS, BucketLease, Placement

log = structlog.get_logger("autoscaler.ring")

RING_LABEL = "autoscaler.dev/ring"
ROLE_LABEL = "autoscaler.dev/role"
MANAGED_BY = {"app.kubernetes.io/managed-by": "autoscaler"}
BUCKETS_ANNOTATION = "autoscaler.dev/buckets"
PLACEMENT_ANNOTATION = "autoscaler.dev/placement"
VALIDITY_ANNOTATION = "autoscaler.dev/validity"
HANDED_TO_ANNOTATION = "autoscaler.dev/handed-to"
VALIDITY = "while the holder's member Lease is renewed"


def bucket_lease_name(ring: str, bucket: int) -> str:
    return f"{ring}-bucket-{bucket:02x}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedBucket:
    """A bucket Lease as read or as our write left it: what the ring rules need
    (``lease``), its epoch, and the version a CAS write on it carries."""

    bucket: int
    lease: BucketLease
    epoch: int
    """``leaseTransitions``: how many claims the bucket has seen."""
    resource_version: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    acquire_time: str | None = None


class BucketLeases:
    """The bucket Leases of ring ``ring`` in ``namespace``, as this member ``identity``
    sees and writes them."""

    def __init__(
        self, api_client: ApiClient, *, namespace: str, ring: str, identity: str,
        placement: Placement, lease_duration: float, may_write: Callable[[], bool],
        request_timeout: float = 1.0,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        watch_options: WatchOptions | None = None,
    ) -> None:
        self._api = CoordinationV1Api(api_client)
        self.namespace, self.ring, self.identity = namespace, ring, identity
        self.placement: Placement = placement
        self._duration = math.ceil(lease_duration)
        self._may_write = may_write
        self._timeout = request_timeout
        self._now = wall_clock
        self._name = re.compile(rf"^{re.escape(ring)}-bucket-([0-9a-f]{{2}})$")
        self._selector = f"{RING_LABEL}={ring},{ROLE_LABEL}=bucket"
        self._view: dict[int, ObservedBucket] = {}
        self._problems: dict[int, str] = {}
        self.counters = WatchCounters()
        self._informer = Informer(resource="leases", namespace=namespace,
                                  list_call=self._list_call, sink=self,
                                  counters=self.counters,
                                  options=watch_options or WatchOptions())

    @property
    def view(self) -> Mapping[int, ObservedBucket]:
        """The bucket Leases as last seen (listed, watched, or written by us), by bucket."""
        return dict(self._view)

    def get(self, bucket: int) -> ObservedBucket | None:
        """The bucket's Lease as last seen, without copying the view (the fence asks it
        before every write)."""
        return self._view.get(bucket)

    @property
    def problem(self) -> str | None:
        """Why this member must not act on the ring: a bucket Lease of other ring settings
        (the first, by bucket), as one line; None when there is none."""
        return self._problems[min(self._problems)] if self._problems else None

    def held(self, bucket: int) -> int | None:
        """The epoch at which the view shows this member holding ``bucket``, else None. A
        claim whose answer never came (a timeout) but which landed shows here too: only this
        incarnation ever writes its own name, so such a claim is ours like an answered one."""
        seen = self._view.get(bucket)
        return seen.epoch if seen is not None and seen.lease.holder == self.identity else None

    @property
    def synced(self) -> asyncio.Event:
        """Set once the watch's first LIST is in the view."""
        return self._informer.synced

    def start(self) -> None:
        """Keep the view current by LIST then WATCH, until ``stop``."""
        self._informer.start()

    async def stop(self) -> None:
        await self._informer.stop()

    async def refresh(self) -> Mapping[int, ObservedBucket]:
        """One LIST of the ring's bucket Leases, as the new view; ``InvalidConfigError`` if
        one was made with other ring settings."""
        body = await self._raw(
            f"list the bucket Leases of ring {self.ring}",
            lambda: self._list_call(self.namespace, _preload_content=False,
                                    _request_timeout=self._timeout))
        self.replace([c for c in map(self.convert, body.get("items") or ())
                      if c is not None])
        if self.problem is not None:
            raise InvalidConfigError(self.problem)
        return self.view

    async def _raw(self, doing: str, call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
        """The JSON answer of ``call``, a request sent with ``_preload_content=False`` (dicts,
        not the client's models: ``V1Lease`` would drop MicroTime's fraction)."""
        with api_errors(doing):
            body = await read_body(await call())
        return cast(dict[str, Any], json.loads(body))

    def _list_call(self, namespace: str, **query: Any) -> Awaitable[Any]:
        return self._api.list_namespaced_lease(namespace, label_selector=self._selector,
                                               **query)

    # --- the sink: raw Lease JSON from a LIST or a watch ------------------------------

    def convert(self, obj: RawObject) -> tuple[int, ObservedBucket] | None:
        match = self._name.match(str((obj.get("metadata") or {}).get("name", "")))
        return None if match is None else (int(match[1], 16), _observed(int(match[1], 16), obj))

    def replace(self, converted: list[tuple[int, ObservedBucket]]) -> None:
        self._view, self._problems = {}, {}
        for bucket, seen in converted:
            self._see(bucket, seen)

    def upsert(self, obj: RawObject) -> None:
        converted = self.convert(obj)
        if converted is not None:
            self._see(*converted)

    def delete(self, obj: RawObject) -> None:
        converted = self.convert(obj)
        if converted is not None:
            self._view.pop(converted[0], None)
            self._problems.pop(converted[0], None)

    def _see(self, bucket: int, seen: ObservedBucket) -> None:
        problem = self._mismatch(seen)
        if problem is None:
            self._problems.pop(bucket, None)
            self._view[bucket] = seen
            return
        self._view.pop(bucket, None)
        if self._problems.get(bucket) != problem:
            log.error(problem)
        self._problems[bucket] = problem

    # --- writes ----------------------------------------------------------------------

    async def claim(self, bucket: int, observed: ObservedBucket | None, *,
                    after: int = 0) -> int | None:
        """Take ``bucket``: a CAS on ``observed`` (a create when the Lease was absent), naming
        us with the next epoch after both the observed one and ``after`` (the epoch its state
        was last stamped with, when a Lease deleted and made again restarted the count). The
        new epoch, or None when someone else wrote (or created, or deleted) the Lease since
        it was observed."""
        if observed is not None:
            self._check_ring(observed)
        epoch = max(observed.epoch if observed is not None else 0, after) + 1
        now = micro_time(self._now())
        annotations = dict(observed.annotations) if observed is not None else {}
        annotations.pop(HANDED_TO_ANNOTATION, None)
        body = self._body(bucket, observed, holder=self.identity, epoch=epoch, acquire=now,
                          renew=now, annotations=annotations)
        written = await self._write(bucket, observed, body, doing="claim")
        return None if written is None else written.epoch

    async def release(self, bucket: int, epoch: int, handed_to: str) -> bool:
        """Give ``bucket`` up (no holder, ``handed-to`` naming the member it goes to): a CAS
        on our claim of ``epoch`` as last seen. False when the Lease is not ours at that
        epoch in our view (nothing sent) or was written since (409)."""
        observed = self._view.get(bucket)
        if observed is None or observed.lease.holder != self.identity or observed.epoch != epoch:
            return False
        self._check_ring(observed)
        annotations = {**observed.annotations, HANDED_TO_ANNOTATION: handed_to}
        body = self._body(bucket, observed, holder="", epoch=epoch,
                          acquire=observed.acquire_time or micro_time(self._now()),
                          renew=micro_time(self._now()), annotations=annotations)
        return await self._write(bucket, observed, body, doing="release") is not None

    async def _write(self, bucket: int, observed: ObservedBucket | None,
                     body: dict[str, Any], *, doing: str) -> ObservedBucket | None:
        """Send one CAS write, fenced right before it; None when it lost (409, or the Lease
        deleted since it was observed: 404)."""
        name = bucket_lease_name(self.ring, bucket)
        if not self._may_write():
            raise NotLeaderError(f"{doing} of Lease {self.namespace}/{name} not sent: this "
                                 "member is not valid (by its own clock)")
        try:
            with api_errors(f"{doing} Lease {self.namespace}/{name}"):
                if observed is None:
                    written = await self._api.create_namespaced_lease(
                        self.namespace, cast(Any, body), _request_timeout=self._timeout)
                else:
                    written = await self._api.replace_namespaced_lease(
                        name, self.namespace, cast(Any, body), _request_timeout=self._timeout)
        except (ConflictError, NotFoundError):
            await self._read_again(bucket, observed)
            return None
        # What the server stored is what we sent, at the version it answered with.
        body["metadata"]["resourceVersion"] = written.metadata.resource_version
        seen = _observed(bucket, body)
        if self._view.get(bucket, seen).epoch <= seen.epoch:  # the watch may be ahead
            self._view[bucket] = seen
        return seen

    async def _read_again(self, bucket: int, observed: ObservedBucket | None) -> None:
        """After a lost CAS: the Lease as the server has it now, into the view, unless the
        view moved on meanwhile (its watch is alive and will say the rest).

        The 409 (or 404) proves the view is behind the server. A view that stays behind (its
        watch lagging on a struggling server, or resuming) would make every later claim a CAS
        on the same old version, each refused, for as long as the watch stays behind: so the
        loser reads the one Lease instead. A read that fails changes nothing (the view is
        no worse than before)."""
        name = bucket_lease_name(self.ring, bucket)
        try:
            obj: dict[str, Any] | None = await self._raw(
                f"read Lease {self.namespace}/{name}",
                lambda: self._api.read_namespaced_lease(
                    name, self.namespace, _preload_content=False,
                    _request_timeout=self._timeout))
        except NotFoundError:
            obj = None
        except Exception as error:  # unknown yet: the watch, or the next loss, tells
            log.debug("bucket Lease not read after a lost write", lease=name, error=str(error))
            return
        if self._view.get(bucket) is not observed:
            return
        if obj is None:
            self._view.pop(bucket, None)
        else:
            self.upsert(obj)

    def _mismatch(self, observed: ObservedBucket) -> str | None:
        """Why a bucket Lease belongs to a ring made with other settings, or None."""
        theirs = (observed.annotations.get(BUCKETS_ANNOTATION),
                  observed.annotations.get(PLACEMENT_ANNOTATION))
        if theirs == (str(BUCKETS), self.placement):
            return None
        return (f"Lease {self.namespace}/{bucket_lease_name(self.ring, observed.bucket)}: "
                f"ring {self.ring} was made with {theirs[0] or 'unknown'} buckets by "
                f"placement={theirs[1] or 'unknown'}; this replica is configured with "
                f"{BUCKETS} buckets by placement={self.placement}: use another leaseName "
                "(the Lease is left as it is)")

    def _check_ring(self, observed: ObservedBucket) -> None:
        """Refuse to write a bucket Lease made by a ring with other settings."""
        problem = self._mismatch(observed)
        if problem is not None:
            raise InvalidConfigError(problem)

    def _body(self, bucket: int, observed: ObservedBucket | None, *, holder: str, epoch: int,
              acquire: str, renew: str, annotations: Mapping[str, str]) -> dict[str, Any]:
        """The whole Lease (dicts, not V1Lease: the model would drop MicroTime's fraction)."""
        metadata: dict[str, Any] = {
            "name": bucket_lease_name(self.ring, bucket), "namespace": self.namespace,
            "labels": {**(observed.labels if observed is not None else {}), **MANAGED_BY,
                       RING_LABEL: self.ring, ROLE_LABEL: "bucket"},
            "annotations": {**annotations, BUCKETS_ANNOTATION: str(BUCKETS),
                            PLACEMENT_ANNOTATION: self.placement,
                            VALIDITY_ANNOTATION: VALIDITY},
        }
        if observed is not None:
            metadata["resourceVersion"] = observed.resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": self._duration,
                     "acquireTime": acquire, "renewTime": renew, "leaseTransitions": epoch},
        }


def _observed(bucket: int, obj: RawObject) -> ObservedBucket:
    """A bucket Lease's raw JSON as the view keeps it."""
    metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}
    return ObservedBucket(
        bucket=bucket, epoch=int(spec.get("leaseTransitions") or 0),
        resource_version=str(metadata.get("resourceVersion", "")),
        lease=BucketLease(holder=str(spec.get("holderIdentity") or ""),
                          handed_to=annotations.get(HANDED_TO_ANNOTATION, "")),
        labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
        annotations=annotations, acquire_time=spec.get("acquireTime"))
