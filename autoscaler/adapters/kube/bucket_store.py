"""The history of one bucket of the ring, on the ConfigMap ``<ring>-state-<xx>`` (issue 38;
docs/design/active-active.md §4.1, §4.4 claim steps 2-3, §4.5 F2, §4.6): a ``StateStore``
(``runtime/ports.py``), encoded as the single store is (``autoscaler.snapshot``), so one
``runtime.history.HistoryKeeper`` per claimed bucket uses it unchanged.

**The stamp.** A member that won the bucket's Lease at epoch ``e`` reads the state (404: none)
and writes it back unchanged, carrying the version it read, with the annotations
``autoscaler.dev/owner`` (its incarnation) and ``autoscaler.dev/epoch``. From then on no write
of an earlier owner can land: each carries a version older than the stamp. A state already
stamped by a later epoch is never stamped over.

**Every write is a CAS on the version of our last read or write** and is never turned into an
overwrite: on 409 (or 404) the state is read again; if the stamp is still ours (someone edited
a label), the write is sent once more; if not, ``FencedError`` and nothing is written. The
caller's ``may_write()`` (member valid and the bucket Lease, in its view, still ours at ``e``)
is checked synchronously right before each PUT; when it says no, nothing is sent
(``NotLeaderError``). A state whose stored form would exceed ``STATE_LIMIT`` is refused before
it is sent (a ConfigMap holds at most 1 MiB).

**Migration from single-leader mode.** A bucket with no state of its own takes, at its stamp,
the entries of its targets from the single-leader store ``<ring>-state``, which is only read,
never written; the stamp then names the version it came from (``autoscaler.dev/migrated-from``).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient, CoreV1Api

from autoscaler.adapters.kube.api_errors import api_errors
from autoscaler.adapters.kube.buckets import RING_LABEL, ROLE_LABEL
from autoscaler.adapters.kube.configmap_store import (
    MANAGED_BY,
    OWNER_ANNOTATION,
    STATE_KEY,
    set_aside,
    unbase64,
)
from autoscaler.errors import (
    AutoscalerError,
    ConflictError,
    FencedError,
    NotFoundError,
    NotLeaderError,
    RejectedError,
    StateSetAsideError,
    StateUnavailableError,
)
from autoscaler.runtime.ring import Placement, target_bucket
from autoscaler.snapshot import Snapshot, StateFormatError, decode, encode

EPOCH_ANNOTATION = "autoscaler.dev/epoch"
MIGRATED_FROM_ANNOTATION = "autoscaler.dev/migrated-from"
STATE_LIMIT = 900 * 1024
"""Bytes of the state as stored (base64) a bucket's ConfigMap may carry: refused above, with
room under the API server's 1 MiB for the object's metadata."""
STAMP_ATTEMPTS = 3

Stamp = tuple[str, int]
"""(owner incarnation, epoch) as a state's annotations name it."""


def state_name(ring: str, bucket: int) -> str:
    return f"{ring}-state-{bucket:02x}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Legacy:
    """The single-leader store a bucket without state takes its targets' entries from."""

    name: str
    """The ConfigMap, ``<ring>-state``: read, never written."""
    in_bucket: Callable[[str], bool]
    """Whether a target key (``namespace/kind/name``) falls in this bucket."""

    @classmethod
    def of_bucket(cls, name: str, bucket: int, placement: Placement) -> Legacy:
        """The entries of ``bucket``'s targets, by the ring's placement: configured or
        retired alike, since a key alone says where it hashes."""
        def in_bucket(key: str) -> bool:
            namespace = key.partition("/")[0]
            return target_bucket(namespace=namespace, key=key, placement=placement) == bucket
        return cls(name=name, in_bucket=in_bucket)


class BucketStateStore:
    def __init__(
        self, api_client: ApiClient, *, namespace: str, ring: str, bucket: int,
        may_write: Callable[[], bool], legacy: Legacy | None = None,
        request_timeout: float = 10.0, limit: int = STATE_LIMIT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = CoreV1Api(api_client)
        self.namespace, self.ring, self.bucket = namespace, ring, bucket
        self.name = state_name(ring, bucket)
        self._may_write = may_write
        self._legacy = legacy
        self._timeout = request_timeout
        self._limit = limit
        self._stamp: Stamp | None = None
        """Ours, once written: every later read must still find it."""
        self._resource_version: str | None = None
        self._kept: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {})
        """Labels and annotations of the object as last read or written (others' are kept)."""
        self._last_saved: bytes | None = None
        self._clock = clock
        self._set_aside: tuple[str, StateSetAsideError] | None = None
        self._just_stamped: tuple[Snapshot | None] | None = None
        """What the last stamp read, for the one ``load`` that follows it."""
        """The version whose undecodable state was copied aside, and what that said: a
        read of the same version says it again without another copy."""

    @property
    def description(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    async def stamp(self, owner: str, epoch: int, *,
                    still_claimed: Callable[[], bool]) -> Snapshot | None:
        """Claim step 2-3: read the state and write it back unchanged under our stamp; the
        snapshot it holds (None: none). Written by someone else in between (409): read again
        and stamp again while ``still_claimed()``, else ``FencedError``. A state that cannot
        be decoded is copied aside first, then stamped as it is, then ``StateSetAsideError``:
        the bucket is ours, its history starts afresh (our first write replaces it)."""
        self._stamp, self._just_stamped = None, None
        for _ in range(STAMP_ATTEMPTS):
            found = await self._get(self.name)
            kept_aside: StateSetAsideError | None = None
            if found is None:
                binary, annotations, snapshot = await self._migrated()
                self._kept, self._resource_version = ({}, annotations), None
            else:
                self._refuse_newer(_stamped_by(found), (owner, epoch))
                self._remember(found)
                binary = dict(found.binary_data or {})
                try:
                    raw, snapshot = await self._decoded(found)
                except StateSetAsideError as error:
                    kept_aside, raw, snapshot = error, None, None
            body = self._body((owner, epoch), binary, data=found.data if found else None)
            try:
                written = await self._put(body, doing="stamp")
            except (ConflictError, NotFoundError) as error:
                if not still_claimed():
                    raise FencedError(f"{self.description} was written by someone else while "
                                      f"{owner} stamped it for epoch {epoch}, and that claim "
                                      "is no longer ours: not stamped") from error
                continue
            self._stamp = (owner, epoch)
            self._remember(written)
            if kept_aside is not None:
                self._set_aside = (self._resource_version or "", kept_aside)
                raise kept_aside
            self._last_saved = raw if found is not None else _raw(binary)
            self._just_stamped = (snapshot,)
            return snapshot
        raise StateUnavailableError(f"{self.description} changed under each of "
                                    f"{STAMP_ATTEMPTS} stamps: try again")

    async def load(self) -> Snapshot | None:
        """The stored snapshot, read again; ``FencedError`` if the stamp on it is not ours."""
        stamp = self._stamped()
        if self._just_stamped is not None:
            # The keeper's read right after our stamp: the stamp's answer is that read (any
            # later writer would have had to write over our version: our next write sees it).
            (snapshot,), self._just_stamped = self._just_stamped, None
            return snapshot
        found = await self._get(self.name)
        if found is None:  # deleted by hand since: a next write creates it, if still ours
            self._resource_version = None
            return None
        if _stamped_by(found) != stamp:
            raise self._fenced(_stamped_by(found))
        self._remember(found)
        raw, snapshot = await self._decoded(found)
        self._last_saved = raw
        return snapshot

    async def save(self, data: bytes) -> None:
        """A CAS on our last read or write; never an overwrite (§4.5 F2)."""
        stamp = self._stamped()
        self._just_stamped = None
        if data == self._last_saved:
            return  # nothing changed: no write
        encoded = base64.b64encode(data).decode()
        self._check_size(len(encoded))
        for attempt in range(2):
            try:
                written = await self._put(self._body(stamp, {STATE_KEY: encoded}), doing="write")
            except (ConflictError, NotFoundError) as error:
                found = await self._get(self.name)
                theirs = _stamped_by(found) if found is not None else None
                if theirs != stamp:
                    raise self._fenced(theirs) from error
                self._remember(found)
                if attempt:
                    raise
                continue
            self._remember(written)
            self._last_saved = data
            return

    def _stamped(self) -> Stamp:
        if self._stamp is None:
            raise StateUnavailableError(f"{self.description} is not stamped by this member "
                                        "(its bucket is not claimed): neither read nor written")
        return self._stamp

    def _fenced(self, theirs: Stamp | None) -> FencedError:
        owner, epoch = self._stamped()
        now = "deleted" if theirs is None else f"stamped by {theirs[0]} at epoch {theirs[1]}"
        return FencedError(f"{self.description} was {now} since {owner} stamped it at epoch "
                           f"{epoch}: the bucket is no longer ours, and it is not written")

    def _refuse_newer(self, theirs: Stamp | None, ours: Stamp) -> None:
        """A stamp of a later epoch, or of another owner at ours, is never stamped over."""
        if theirs is not None and (theirs[1] > ours[1] or (theirs[1] == ours[1]
                                                           and theirs[0] != ours[0])):
            raise FencedError(f"{self.description} is stamped by {theirs[0]} at epoch "
                              f"{theirs[1]}, not older than our claim ({ours[0]} at epoch "
                              f"{ours[1]}): not stamped", later_epoch=theirs[1])

    def _check_size(self, size: int) -> None:
        if size > self._limit:
            raise RejectedError(
                f"{self.description}: the state is {size:,} bytes as stored, over the "
                f"{self._limit:,} a bucket's ConfigMap may carry (the API server takes at most "
                "1 MiB): not written; fewer targets per namespace, or placement = \"target\"")

    async def _migrated(self) -> tuple[dict[str, str], dict[str, str], Snapshot | None]:
        """The legacy store's entries of this bucket's targets, as a new state (its binaryData,
        the annotation naming the version read, the snapshot); nothing when there is none."""
        legacy = self._legacy
        found = await self._get(legacy.name) if legacy is not None else None
        if legacy is None or found is None:
            return {}, {}, None
        where = f"ConfigMap {self.namespace}/{legacy.name}"
        _, snapshot = await self._decoded(found, where=where)
        if snapshot is None:
            return {}, {}, None
        if not snapshot.clean and not snapshot.journaled:
            raise StateUnavailableError(
                f"{where} was written by a version before the per-pass journal and not stopped "
                "cleanly: its entries cannot be split without losing that (run this version in "
                "leader mode once, then switch to dynamic mode); it is left as it is")
        mine = Snapshot(targets={key: entry for key, entry in snapshot.targets.items()
                                 if legacy.in_bucket(key)},
                        clean=snapshot.clean, saved_at=snapshot.saved_at, skew=snapshot.skew)
        encoded = base64.b64encode(encode(mine)).decode()
        self._check_size(len(encoded))
        return ({STATE_KEY: encoded},
                {MIGRATED_FROM_ANNOTATION: found.metadata.resource_version}, mine)

    async def _decoded(self, found: Any, *, where: str | None = None) -> tuple[
            bytes | None, Snapshot | None]:
        """The state's bytes and snapshot. Undecodable: our own state is copied aside
        (``StateSetAsideError``; once per version); the legacy store, which is never ours to
        replace, is ``StateUnavailableError`` and left as it is."""
        raw = (found.binary_data or {}).get(STATE_KEY)
        if raw is None:
            return None, None  # created empty by someone else: nothing of ours to lose
        try:
            data = unbase64(raw)
            return data, decode(data)
        except StateFormatError as error:
            if where is not None:
                raise StateUnavailableError(f"{where} cannot be decoded: {error}; it is left "
                                            "as it is") from error
            problem = str(error)
        version = found.metadata.resource_version
        if self._set_aside is not None and self._set_aside[0] == version:
            raise self._set_aside[1]
        try:
            await set_aside(self._api, found, namespace=self.namespace, name=self.name,
                            now=self._clock(), problem=problem, timeout=self._timeout)
        except StateSetAsideError as kept:
            self._set_aside = (version, kept)
            raise

    def _remember(self, found: Any) -> None:
        metadata = found.metadata
        self._resource_version = metadata.resource_version
        self._kept = (dict(metadata.labels or {}), dict(metadata.annotations or {}))

    def _body(self, stamp: Stamp, binary: Mapping[str, str], *,
              data: Mapping[str, str] | None = None) -> dict[str, Any]:
        labels, annotations = self._kept
        metadata: dict[str, Any] = {
            "name": self.name, "namespace": self.namespace,
            "labels": {**labels, **MANAGED_BY, RING_LABEL: self.ring, ROLE_LABEL: "state"},
            "annotations": {**annotations, OWNER_ANNOTATION: stamp[0],
                            EPOCH_ANNOTATION: str(stamp[1])},
        }
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
        if binary:
            body["binaryData"] = dict(binary)
        if data:
            body["data"] = dict(data)
        return body

    async def _get(self, name: str) -> Any:
        """The ConfigMap, or None on 404 (the only proof of absence)."""
        try:
            with api_errors(f"get ConfigMap {self.namespace}/{name}"):
                return await self._api.read_namespaced_config_map(
                    name, self.namespace, _request_timeout=self._timeout)
        except NotFoundError:
            return None
        except AutoscalerError as error:
            raise StateUnavailableError(str(error)) from error

    async def _put(self, body: dict[str, Any], *, doing: str) -> Any:
        """One write carrying our version (none: a create), fenced right before it."""
        if not self._may_write():
            raise NotLeaderError(f"{doing} of {self.description} not sent: the bucket is not "
                                 "ours now (by this member's own clock)")
        with api_errors(f"{doing} {self.description}"):
            if self._resource_version is None:
                return await self._api.create_namespaced_config_map(
                    self.namespace, cast(Any, body), _request_timeout=self._timeout)
            body["metadata"]["resourceVersion"] = self._resource_version
            return await self._api.replace_namespaced_config_map(
                self.name, self.namespace, cast(Any, body), _request_timeout=self._timeout)


def _stamped_by(found: Any) -> Stamp | None:
    annotations = found.metadata.annotations or {}
    owner, epoch = annotations.get(OWNER_ANNOTATION), annotations.get(EPOCH_ANNOTATION, "")
    if not owner or not epoch.isdigit():
        return None
    return owner, int(epoch)


def _raw(binary: Mapping[str, str]) -> bytes | None:
    raw = binary.get(STATE_KEY)
    return None if raw is None else unbase64(raw)
