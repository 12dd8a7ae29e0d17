"""Dynamic sharding end to end: three real daemons in one ring (``[daemon.sharding] mode =
"dynamic"``), each with its own token, against the simulated API server and a real
Prometheus, six targets in six namespaces. The oracle reads the simulated server's log:
every scale write names its writer, and the bucket Leases' history says who held what when.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autoscaler.adapters.prometheus.share import narrowed
from autoscaler.config import parse_config
from autoscaler.runtime import ring
from autoscaler.runtime.clock import TEST_WALL_CLOCK_OFFSET
from autoscaler.runtime.shards import targets_for_shard
from tests.e2e.conftest import Rig
from tests.e2e.harness import DaemonProcess, LoadModel, eventually
from tests.sim.prometheus import CountingProxy, free_port

NAMESPACES = [f"r{i}" for i in range(6)]
ELECTION = """
[daemon.leaderElection]
leaseName = "autoscaler"
leaseNamespace = "default"
"""
RING = ELECTION + """
[daemon.sharding]
mode = "dynamic"
"""
LEADER = ELECTION + "enabled = true\n"
UP_TWO_PODS_PER_20S = """
[autoscaler.behavior.scaleUp]
stabilizationWindowSeconds = 0
policies = [{ type = "Pods", value = 2, periodSeconds = 20 }]
"""


SCOPED_QUERY = "app_load{${pod_selector}}"
FLEET_WIDE_QUERY = "sum by (namespace, pod) (app_load)"
"""A query every target shares as written: it answers for the whole fleet."""


def ring_config(rig: Rig, kubeconfig: Path, *, prometheus: str | None = None,
                query: str = SCOPED_QUERY, mode: str = RING) -> str:
    targets = "".join(f"""
[[autoscaler]]
namespace = "{ns}"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
minReplicas = 1
maxReplicas = 10
{UP_TWO_PODS_PER_20S}
[[autoscaler.metrics]]
type = "Pods"
pods = {{ metric = {{ name = "app_load" }}, target = {{ type = "AverageValue", averageValue = "100" }}, query = '{query}', window = "1s" }}
""" for ns in NAMESPACES)
    return f"""
[daemon]
syncPeriod = "1s"
downscaleStabilization = "0s"
listenAddress = "127.0.0.1:__PORT__"
logFormat = "json"
{mode}
[prometheus]
url = "{prometheus or rig.prometheus.url}"
timeout = "2s"

[kubernetes]
kubeconfig = "{kubeconfig}"
requestTimeout = "3s"
{targets}"""


@dataclass
class Member:
    name: str
    user: str
    process: DaemonProcess

    def status(self) -> dict[str, Any]:
        return self.process.status() or {}

    def owned(self) -> set[str]:
        return set(self.status().get("targets") or {})


def key(namespace: str) -> str:
    return f"{namespace}/Deployment/web"


def replicas(rig: Rig, namespace: str) -> int:
    return int(rig.api.get("apps/v1", "Deployment", namespace, "web")["spec"]["replicas"])


@pytest.fixture
async def loads(rig: Rig) -> AsyncIterator[dict[str, LoadModel]]:
    models = {}
    for namespace in NAMESPACES:
        rig.api.create_deployment(namespace, "web", replicas=2, labels={"app": "web"},
                                  requests={"cpu": "500m"})
        models[namespace] = LoadModel(api=rig.api, exporter=rig.load.exporter,
                                      namespace=namespace, demand=200)  # 2 pods: steady
    tasks = [asyncio.create_task(m.run()) for m in models.values()]
    try:
        yield models
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def start_member(rig: Rig, tmp_path: Path, name: str,
                 env: dict[str, str] | None = None, **config: str) -> Member:
    """``config``: ``ring_config``'s options (``prometheus``, ``query``, ``mode``)."""
    user = f"system:serviceaccount:ring:{name}"
    rig.api.add_token(f"{name}-token", user)
    kubeconfig = rig.api.write_kubeconfig(tmp_path / f"{name}.kubeconfig", token=f"{name}-token")
    path = tmp_path / f"{name}.toml"
    port = free_port()
    path.write_text(ring_config(rig, kubeconfig, **config).replace("__PORT__", str(port)))
    process = DaemonProcess(path, port=port, log=tmp_path / f"{name}.log", env=env)
    process.start()
    return Member(name=name, user=user, process=process)


@contextlib.asynccontextmanager
async def members(rig: Rig, tmp_path: Path, names: list[str],
                  **config: str) -> AsyncIterator[dict[str, Member]]:
    """Members started at once; stopped by SIGTERM together at the end, without blocking
    the loop the simulated API server answers on (their hand-overs need it)."""
    running = {name: start_member(rig, tmp_path, name, **config) for name in names}
    try:
        yield running
    finally:
        await asyncio.gather(*(m.process.stop_async() for m in running.values()))


def owners(running: dict[str, Member]) -> dict[str, list[str]]:
    """Target key -> the members whose /status shows it (ideally exactly one each)."""
    found: dict[str, list[str]] = {key(ns): [] for ns in NAMESPACES}
    for member in running.values():
        if member.process.process is not None and member.process.process.poll() is None:
            for target in member.owned():
                found.setdefault(target, []).append(member.name)
    return found


def every_target_has_one_owner(running: dict[str, Member]) -> bool:
    return all(len(names) == 1 for names in owners(running).values())


def cached(rig: Rig, member: Member) -> set[str]:
    """The namespaces ``member``'s last pod LIST or WATCH asked for (its KEP-5866 selector
    names each namespace's hash)."""
    asked = [r for r in rig.api.log.records
             if r.user == member.user and r.verb in ("list", "watch") and r.resource == "pods"]
    selector = max(asked, key=lambda r: r.arrived).query.get("shardSelector", "") \
        if asked else ""
    return {ns for ns in NAMESPACES if f"'0x{ring.fnv1a64(ns):016x}'" in selector}


def scale_writes(rig: Rig, user: str, since: float = 0.0) -> list[Any]:
    """Successful PUTs of /scale (or the Deployment) by ``user`` applied after ``since``
    (the sim's clock)."""
    return [r for r in rig.api.log.records
            if r.user == user and r.verb in ("update", "patch") and r.status < 300
            and (r.resource or "").startswith("deployments")
            and (r.applied or 0.0) >= since]


async def test_three_members_share_the_targets_and_scale_them(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path,
) -> None:
    """Every target gets exactly one owner, each member holds some, and every target
    scales 2 -> 4 under load (the step its policy allows), written by its owner only.

    Their metric's query names no namespace (the whole fleet's answer): each member asks
    Prometheus only for its share of it (seen through a proxy), and reads the same values."""
    with CountingProxy(rig.prometheus.url) as proxy:
        async with members(rig, tmp_path, ["a", "b", "c"], prometheus=proxy.url,
                           query=FLEET_WIDE_QUERY) as running:
            await three_members_share_and_scale(rig, loads, running)
            holder = next(m for m in running.values() if m.owned())
            shown = [m.get("query") for m in holder.status()["targets"][
                min(holder.owned())].get("currentMetrics", ())]
        asked = [q for q in proxy.queries if "app_load" in q]
    cuts = [shared_namespaces(q) for q in asked]
    assert asked
    assert None not in cuts, f"not cut to a share: {asked[:3]}"
    assert any(len(names or ()) < len(NAMESPACES) for names in cuts)
    assert shown == [FLEET_WIDE_QUERY]  # /status shows the query as written


def shared_namespaces(promql: str) -> set[str] | None:
    """The namespaces ``promql`` is the fleet-wide query cut to, or None if it is not a cut."""
    for size in range(1, len(NAMESPACES) + 1):
        for names in itertools.combinations(NAMESPACES, size):
            if promql == narrowed(FLEET_WIDE_QUERY, names):
                return set(names)
    return None


async def three_members_share_and_scale(rig: Rig, loads: dict[str, LoadModel],
                                        running: dict[str, Member]) -> None:
    """Each target owned by exactly one member, each caching its share; `status` shows
    the ring; every target scaled 2 -> 4 by its owner only."""
    def balanced() -> bool:
        counts = [len(m.owned()) for m in running.values()]
        return every_target_has_one_owner(running) and max(counts) <= 3
    # One member may take every bucket before the others are ready; then it hands over
    # down to the bound (ceil(1.15 * 6 / 3) = 3 targets).
    await eventually(balanced, timeout=40, what="each target owned by exactly one member, "
                     "none holding more than 3")
    # Each member caches its share and its standby, not the fleet: its pods are listed
    # and watched for the namespaces it holds and those it would inherit (each namespace
    # is warm at about two of the three; a standby change waits for the ring to settle).
    await eventually(lambda: all(m.owned() <= {key(ns) for ns in cached(rig, m)}
                                 for m in running.values())
                     and sum(len(cached(rig, m)) for m in running.values())
                     < 3 * len(NAMESPACES),
                     timeout=45, what="each member caching what it holds, not all")
    # `autoscaler status` against a member: its targets, and the ring line under them.
    member = running["a"]
    shown = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "autoscaler", "status", "--url",
                         f"http://127.0.0.1:{member.process.port}"],
        capture_output=True, text=True, timeout=30)
    ring_line = shown.stdout.strip().splitlines()[-1]
    body = member.status()["ring"]
    assert ring_line.startswith(f"Ring member {body['member']}: "
                                f"{len(body['buckets'])} buckets held"), shown.stdout
    assert f"caches {body['cachedNamespaces']} namespaces" in ring_line
    assert all(key.split("/")[0] in shown.stdout for key in member.owned())
    for model in loads.values():
        model.demand = 400
    await eventually(lambda: all(replicas(rig, ns) == 4 for ns in NAMESPACES),
                     timeout=30, what="every target 2 -> 4")
    assert non_owner_writes(rig, running) == []


POLICY_PERIOD = 20.0
POLICY_PODS = 2
FAILOVER_BOUND = 5.0
OBSERVED_SLACK = 0.5
"""Seconds between a decision and the sampled change of its write: the series samples every
0.1 s on the loop that also serves the API server, and under load a write lands late (once,
decisions 20.04 s apart were seen 19.9 s apart)."""
"""The issue's bound from a kill or stop to the first correct pass by another member (the
ring's defaults: lease 3 s, renew deadline 2 s, retry 1 s)."""


@dataclass
class Series:
    """Each target's replica count as the simulated server holds it, sampled every 0.1 s,
    and when it changed (the test's monotonic clock, which is also the server's)."""

    rig: Rig
    changes: dict[str, list[tuple[float, int]]]

    @classmethod
    def watching(cls, rig: Rig) -> Series:
        return cls(rig, {ns: [(time.monotonic(), replicas(rig, ns))] for ns in NAMESPACES})

    async def run(self) -> None:
        while True:
            for ns, seen in self.changes.items():
                now = replicas(self.rig, ns)
                if now != seen[-1][1]:
                    seen.append((time.monotonic(), now))
            await asyncio.sleep(0.1)

    def forbidden(self) -> list[str]:
        """Scale-ups adding more than the policy's pods within one of its periods, less
        ``OBSERVED_SLACK``: a period runs from the decision a write carries, and the write
        lands and is sampled a little later (a step whose history was lost comes at the next
        pass, seconds into the period, and is still caught)."""
        found = []
        for ns, seen in self.changes.items():
            ups = [(t, new - old) for (_, old), (t, new) in itertools.pairwise(seen)
                   if new > old]
            for start, _ in ups:
                added = sum(d for t, d in ups
                            if start <= t < start + POLICY_PERIOD - OBSERVED_SLACK)
                if added > POLICY_PODS:
                    found.append(f"{ns}: +{added} within {POLICY_PERIOD:g}s from {start:.1f}")
        return found

    def step_times(self, ns: str, to: int) -> float | None:
        return next((t for t, count in self.changes[ns] if count == to), None)


def non_owner_writes(rig: Rig, running: dict[str, Member]) -> list[str]:
    """Successful scale writes whose writer's incarnation did not hold the target's bucket
    Lease at the moment the write was applied (the Lease history says who did)."""
    incarnation_of: dict[str, set[str]] = {}
    for write in rig.api.lease_history:
        if "-member-" in write.name and write.holder:
            incarnation_of.setdefault(write.user or "", set()).add(write.holder)
    found = []
    for member in running.values():
        for request in scale_writes(rig, member.user):
            bucket = ring.bucket_of(request.namespace or "")
            name = f"autoscaler-bucket-{bucket:02x}"
            holders = [w.holder for w in rig.api.lease_history
                       if w.name == name and w.applied <= (request.applied or 0.0)]
            holder = holders[-1] if holders else None
            if holder not in incarnation_of.get(member.user, set()):
                found.append(f"{member.name} wrote {request.namespace} at "
                             f"{request.applied:.2f} while {holder!r} held its bucket")
    return found


async def scaled_to_four(rig: Rig, loads: dict[str, LoadModel],
                         running: dict[str, Member]) -> None:
    await eventually(lambda: every_target_has_one_owner(running)
                     and max(len(m.owned()) for m in running.values()) <= 3,
                     timeout=40, what="a balanced ring")
    await first_step_then_more_load(rig, loads)


async def first_step_then_more_load(rig: Rig, loads: dict[str, LoadModel]) -> None:
    """Every target steps 2 -> 4 (its policy's two pods), then wants 10: 4 -> 6 is allowed
    20 s after 2 -> 4."""
    for model in loads.values():
        model.demand = 400
    await eventually(lambda: all(replicas(rig, ns) == 4 for ns in NAMESPACES),
                     timeout=30, what="every target 2 -> 4")
    for model in loads.values():
        model.demand = 1000


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP", "SIGSTOP-long", "partition",
                                   "SIGKILL-no-standby"])
async def test_a_dead_or_frozen_members_targets_move_in_seconds_and_keep_their_history(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path, fault: str,
) -> None:
    """The member holding the most targets is killed (or frozen past its lease, then let go)
    right after its targets' first step. Its targets have a new owner within 5 s; no target
    takes a second step inside the policy's 20 s period (the history moved with it), each
    takes it as soon as the period allows; and no write ever comes from a member that did
    not hold the target's bucket when the write was applied. "SIGSTOP-long" wakes the
    frozen member only after the new owners took the second step: by its own stale history
    the next step is due, so only its fence (its renewal older than the renew deadline by its
    own clock) keeps it from writing. "partition" cuts it off from the API server instead
    (its requests stall; it keeps running and deciding) until then: whatever it sent would
    land at the heal. "SIGKILL-no-standby": the members run with ``standby = "none"``, so
    each inheritor relists its caches before its first pass over what it gained."""
    series = Series.watching(rig)
    watcher = asyncio.create_task(series.run())
    mode = RING + 'standby = "none"\n' if fault.endswith("-no-standby") else RING
    try:
        async with members(rig, tmp_path, ["a", "b", "c"], mode=mode) as running:
            await scaled_to_four(rig, loads, running)
            victim = max(running.values(), key=lambda m: len(m.owned()))
            moved = victim.owned()
            assert victim.process.process is not None
            struck = time.monotonic()
            if fault == "partition":
                rig.api.partition(victim.user, mode="stall")
            else:
                victim.process.process.send_signal(
                    getattr(signal, fault.removesuffix("-long").removesuffix("-no-standby")))
            survivors = {n: m for n, m in running.items() if m is not victim}

            def taken_over() -> bool:
                found = owners(survivors)
                return all(len(found[k]) == 1 for k in moved)
            await eventually(taken_over, timeout=20, what="the victim's targets taken over")
            failover = time.monotonic() - struck
            assert failover <= FAILOVER_BOUND, f"failover took {failover:.2f}s"
            if fault == "SIGSTOP":
                await asyncio.sleep(2.0)
                victim.process.process.send_signal(signal.SIGCONT)
            await eventually(lambda: all(replicas(rig, ns) == 6 for ns in NAMESPACES),
                             timeout=POLICY_PERIOD + 15, what="every target 4 -> 6")
            await asyncio.sleep(0.3)  # the series samples every 0.1 s
            if fault == "SIGSTOP-long":
                victim.process.process.send_signal(signal.SIGCONT)
                await asyncio.sleep(6.0)  # it wakes, finds itself evicted, rejoins
            if fault == "partition":
                rig.api.heal(victim.user)
                await asyncio.sleep(6.0)  # what it sent lands now; it finds itself evicted
            for ns in NAMESPACES:
                first, second = series.step_times(ns, 4), series.step_times(ns, 6)
                assert first is not None, (ns, series.changes[ns])
                assert second is not None, (ns, series.changes[ns])
                assert second - first <= POLICY_PERIOD + FAILOVER_BOUND + 2.0, (
                    f"{ns}: 4 -> 6 came {second - first:.1f}s after 2 -> 4 (late)")
            assert series.forbidden() == []
            assert non_owner_writes(rig, running) == []
            if not fault.startswith("SIGKILL"):  # woken or healed: it rejoins, the ring settles
                await eventually(lambda: every_target_has_one_owner(running), timeout=20,
                                 what="one owner per target after the frozen member woke")
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


async def test_a_write_the_api_server_held_past_its_senders_lease_never_lands_after_it(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path,
) -> None:
    """The API server holds a member's PUT of one target, 2 -> 4 (the step is on record in
    the target's history), and the member is frozen past its lease; meanwhile the load falls
    back, so the target's new owner would stay at 2. Finding the object unchanged since that
    intent, the new owner sends 2 -> 4 itself: the step happens once, by its owner, and
    counts. The held request, served after, is a 409: nothing lands from a member that no
    longer holds the target (design §4.5, F3). Then the target goes back to 2 as soon as
    its rules allow (the next pass: no down-scale window here)."""
    namespace = NAMESPACES[0]
    async with members(rig, tmp_path, ["a", "b", "c"]) as running:
        await eventually(lambda: every_target_has_one_owner(running)
                         and max(len(m.owned()) for m in running.values()) <= 3,
                         timeout=40, what="a balanced ring")
        sender = next(m for m in running.values() if key(namespace) in m.owned())
        assert sender.process.process is not None
        held = rig.api.hold_next(
            verb="update", user=sender.user,
            path_prefix=f"/apis/apps/v1/namespaces/{namespace}/deployments/web/scale")
        loads[namespace].demand = 400
        await eventually(lambda: held.arrived == 1, timeout=15,
                         what="the owner's PUT 2 -> 4 held by the API server")
        sender.process.process.send_signal(signal.SIGSTOP)
        loads[namespace].demand = 200
        try:
            others = {n: m for n, m in running.items() if m is not sender}
            await eventually(lambda: len(owners(others)[key(namespace)]) == 1, timeout=20,
                             what="the target taken over")
            heir = others[owners(others)[key(namespace)][0]]

            def heirs_writes() -> list[Any]:
                return [r for r in scale_writes(rig, heir.user) if r.namespace == namespace]
            await eventually(lambda: bool(heirs_writes()), timeout=15,
                             what="the new owner's write to the target")
            held.release()

            def answered() -> list[Any]:
                return [r for r in rig.api.log.records if r.user == sender.user
                        and r.verb == "update" and r.resource == "deployments/scale"
                        and r.namespace == namespace and r.answered is not None]
            await eventually(lambda: bool(answered()), timeout=10,
                             what="the held request served")
            assert [r.status for r in answered()] == [409]
            assert non_owner_writes(rig, running) == []
            # The new owner's first write was the step on record, sent again (its own
            # decision, the load having fallen, was to stay at 2), and it counts it.
            lines = [json.loads(line) for line in heir.process.log_path.read_text(
                errors="replace").splitlines() if line.startswith("{")]
            assert {(line.get("event"), line.get("target")) for line in lines} >= {
                ("sending again a scale write that may still be on its way", key(namespace))}
            await eventually(lambda: replicas(rig, namespace) == 2, timeout=10,
                             what="the target back at 2 (its load)")
        finally:
            sender.process.process.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
async def test_a_ring_waits_for_the_single_leader_it_replaces_and_takes_its_history(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path, stop: str,
) -> None:
    """A rolling update from leader mode to a ring of the same name: the leader steps every
    target 2 -> 4; a ring member started meanwhile claims no bucket and writes nothing while
    the leader's Lease is held and renewed; once the leader stops (SIGTERM: it releases its
    Lease; SIGKILL: its Lease stands unchanged for its 15 s) the member takes every target
    with the leader's history (its single-leader store, read once per bucket): 4 -> 6 comes
    no sooner than the policy's 20 s after the leader's 2 -> 4, and no later than the
    wait allows."""
    series = Series.watching(rig)
    watcher = asyncio.create_task(series.run())
    leader = start_member(rig, tmp_path, "leader", mode=LEADER)
    try:
        await first_step_then_more_load(rig, loads)  # by the leader
        async with members(rig, tmp_path, ["a"]) as running:
            member = running["a"]
            held_by = (rig.api.get("coordination.k8s.io/v1", "Lease", "default",
                                   "autoscaler") or {})["spec"]["holderIdentity"]
            await eventually(lambda: (member.status().get("ring") or {}).get("singleLeader")
                             == held_by, timeout=15, what="the member sees the leader")
            await asyncio.sleep(2.0)
            await leader.process.stop_async(getattr(signal, stop))
            last = [w for w in rig.api.lease_history if w.name == "autoscaler"][-1]
            assert (last.holder == "") is (stop == "SIGTERM")  # released, or left held
            free_at = last.applied + (15.0 if stop == "SIGKILL" else 0.0)
            await eventually(lambda: every_target_has_one_owner(running),
                             timeout=free_at - time.monotonic() + 10,
                             what="the member takes every target")
            claims = [w.applied for w in rig.api.lease_history
                      if "-bucket-" in w.name and w.holder]
            assert min(claims) >= free_at, f"claimed {free_at - min(claims):.1f}s early"
            assert [r for r in scale_writes(rig, member.user) if (r.applied or 0.0) < free_at
                    ] == []
            await eventually(lambda: all(replicas(rig, ns) == 6 for ns in NAMESPACES),
                             timeout=POLICY_PERIOD + 15, what="every target 4 -> 6")
            await asyncio.sleep(0.3)  # the series samples every 0.1 s
        for ns in NAMESPACES:
            first, second = series.step_times(ns, 4), series.step_times(ns, 6)
            assert first is not None, (ns, series.changes[ns])
            assert second is not None, (ns, series.changes[ns])
            due = max(first + POLICY_PERIOD, min(claims))
            assert second <= due + FAILOVER_BOUND, f"{ns}: 4 -> 6 came {second - due:.1f}s late"
        assert series.forbidden() == []
        assert non_owner_writes(rig, running) == []
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await leader.process.stop_async()


async def test_a_bucket_lease_deleted_by_hand_is_claimed_again_past_its_epoch(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path,
) -> None:
    """`kubectl delete lease` of a held bucket, twice: each time the bucket has an owner again
    within seconds, at an epoch past the one it had (a Lease made again counts from 1, and the
    bucket's state refuses a stamp older than its own), and no write comes from a member that
    did not hold it."""
    async with members(rig, tmp_path, ["a", "b"]) as running:
        await eventually(lambda: every_target_has_one_owner(running), timeout=40,
                         what="two members hold the targets")
        bucket = ring.target_bucket(namespace=NAMESPACES[0], key=key(NAMESPACES[0]),
                                    placement="namespace")
        name = f"autoscaler-bucket-{bucket:02x}"

        def epoch() -> int:
            lease = rig.api.get("coordination.k8s.io/v1", "Lease", "default", name)
            held = lease is not None and lease["spec"].get("holderIdentity")
            return int(lease["spec"].get("leaseTransitions", 0)) if held else 0

        for _ in range(2):
            before = epoch()
            assert before >= 1
            rig.api.delete("coordination.k8s.io/v1", "Lease", "default", name)
            await eventually(lambda: epoch() > before  # noqa: B023 - waited for here
                             and every_target_has_one_owner(running), timeout=15,
                             what=f"bucket {bucket:02x} held again past epoch {before}")
        assert non_owner_writes(rig, running) == []


async def test_a_member_that_joins_takes_a_share_and_one_that_leaves_hands_its_targets_over(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path,
) -> None:
    """Two members hold the six targets 4/2; a third joins and receives the spill over the new
    bound by hand-over (moving no more than a fair share, 2 targets, plus the bound's slack;
    at least one, to the newcomer: the least loaded with room); then one member is
    stopped with SIGTERM: its targets are handed over at once (a new owner within a second,
    not a lease duration), with their history, and nothing is written by a non-owner."""
    series = Series.watching(rig)
    watcher = asyncio.create_task(series.run())
    try:
        async with members(rig, tmp_path, ["a"]) as running:
            # a alone takes all six; b joining takes the spill over the bound (ceil(1.15 x 6
            # / 2) = 4): 4/2. (Two members started together may split 3/3, within the bound
            # for three: a joiner would then rightly take nothing.)
            await eventually(lambda: len(running["a"].owned()) == len(NAMESPACES), timeout=40,
                             what="the first member holds every target")
            running["b"] = start_member(rig, tmp_path, "b")
            await eventually(lambda: every_target_has_one_owner(running)
                             and len(running["b"].owned()) == 2, timeout=40,
                             what="two members hold the targets, 4/2")
            before = {name: m.owned() for name, m in running.items()}
            running["c"] = start_member(rig, tmp_path, "c")
            await eventually(lambda: every_target_has_one_owner(running)
                             and bool(running["c"].owned()), timeout=40,
                             what="the newcomer holds a share")
            await asyncio.sleep(3.0)  # the ring settles (hand-overs a few at a time)
            # Each member's /status is read in turn, not at one instant: a hand-over still
            # under way between two reads would show a target with none or two.
            await eventually(lambda: every_target_has_one_owner(running), timeout=10,
                             what="one owner for every target once settled")
            after = {name: m.owned() for name, m in running.items()}
            moved = sum(len(before[n] - after[n]) for n in before)
            assert 1 <= moved <= 3, (before, after)
            assert len(after["c"]) >= 1, after
            assert max(len(t) for t in after.values()) <= 3, after
            leaving = max(running.values(), key=lambda m: len(m.owned()))
            handed = leaving.owned()
            assert leaving.process.process is not None
            stopped = time.monotonic()
            leaving.process.process.send_signal(signal.SIGTERM)
            rest = {n: m for n, m in running.items() if m is not leaving}
            await eventually(lambda: all(len(owners(rest)[k]) == 1 for k in handed),
                             timeout=10, interval=0.05, what="the leaver's targets taken over")
            took = time.monotonic() - stopped
            assert await leaving.process.stop_async() == 0
            assert took < 3.0, f"a graceful hand-over took {took:.2f}s"
            assert series.forbidden() == []
            assert non_owner_writes(rig, running) == []
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


CLOCK_BEHIND = -40.0
"""Seconds member a's wall clock is behind the API server's (and b's) in the skew test:
more than the policy's period, so its history read unshifted would allow the next step at
once."""


def member_lease_offsets(rig: Rig) -> dict[str, int]:
    """Each live member Lease's holder -> its ``autoscaler.dev/wall-offset-ms``."""
    leases = rig.api.rest.list(rig.api.resource("coordination.k8s.io/v1", "Lease"), "default")
    return {lease["spec"]["holderIdentity"]: int(annotations["autoscaler.dev/wall-offset-ms"])
            for lease in leases if "-member-" in lease["metadata"]["name"]
            and lease["spec"].get("holderIdentity")
            and "autoscaler.dev/wall-offset-ms" in (
                annotations := lease["metadata"].get("annotations") or {})}


async def test_history_moves_between_members_whose_clocks_differ(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path,
) -> None:
    """Member a's wall clock is 40 s behind the API server's; b's is right. a, alone, takes
    every target's step 2 -> 4; b joins and takes a share by hand-over, then a is killed and b
    inherits the rest. a's history, stamped on its clock, is moved onto b's (each Lease's
    ``Date`` says how far each clock is off): no 4 -> 6 inside the 20 s period of a's step
    (read unshifted, the step would look 40 s old and the next allowed at once), and each
    comes as soon as the period allows. Each member Lease carries its clock's offset."""
    series = Series.watching(rig)
    watcher = asyncio.create_task(series.run())
    clock = tmp_path / "a.clock"
    clock.write_text(f"{CLOCK_BEHIND}\n")
    running: dict[str, Member] = {}
    try:
        running["a"] = start_member(rig, tmp_path, "a", env={TEST_WALL_CLOCK_OFFSET: str(clock)})
        await eventually(lambda: len(running["a"].owned()) == len(NAMESPACES), timeout=40,
                         what="a holds every target")
        await first_step_then_more_load(rig, loads)  # written by a
        running["b"] = start_member(rig, tmp_path, "b")
        await eventually(lambda: every_target_has_one_owner(running)
                         and bool(running["b"].owned()), timeout=20,
                         what="b holds a share, handed over by a")
        a, b = (running[n].status()["ring"]["member"] for n in ("a", "b"))
        await eventually(lambda: {a, b} <= set(member_lease_offsets(rig)), timeout=5,
                         what="both member Leases carry their clock's offset")
        offsets = member_lease_offsets(rig)
        assert abs(offsets[a] - CLOCK_BEHIND * 1000) <= 1500, offsets
        assert abs(offsets[b]) <= 1500, offsets
        assert running["a"].process.process is not None
        running["a"].process.process.send_signal(signal.SIGKILL)
        await eventually(lambda: len(running["b"].owned()) == len(NAMESPACES), timeout=10,
                         what="b holds every target")
        await eventually(lambda: all(replicas(rig, ns) == 6 for ns in NAMESPACES),
                         timeout=POLICY_PERIOD + 15, what="every target 4 -> 6")
        await asyncio.sleep(0.3)  # the series samples every 0.1 s
        assert series.forbidden() == []
        for ns in NAMESPACES:
            first, second = series.step_times(ns, 4), series.step_times(ns, 6)
            assert first is not None, (ns, series.changes[ns])
            assert second is not None, (ns, series.changes[ns])
            # b moves a's times by what the Date headers allow, to the side that holds the
            # period longer: up to ~2 s, plus a pass.
            assert second - first <= POLICY_PERIOD + 3.0, (
                f"{ns}: 4 -> 6 came {second - first:.1f}s after 2 -> 4 (late)")
        assert non_owner_writes(rig, running) == []
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await asyncio.gather(*(m.process.stop_async() for m in running.values()))


async def test_a_static_shard_asks_for_its_share_of_a_fleet_wide_query(
    rig: Rig, loads: dict[str, LoadModel], tmp_path: Path,
) -> None:
    """`--shard 0 --total-shards 2` over the six targets (leader mode, no ring): its
    fleet-wide query is cut to the namespaces of its own targets (seen through a proxy), and
    it decides them from it."""
    ours = {t.namespace for t in targets_for_shard(
        [t for ns in NAMESPACES for t in parse_config(f"""
[[autoscaler]]
namespace = "{ns}"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
maxReplicas = 10
""").targets], 0, 2)}
    assert 0 < len(ours) < len(NAMESPACES)
    with CountingProxy(rig.prometheus.url) as proxy:
        path, port = tmp_path / "shard.toml", free_port()
        text = ring_config(rig, rig.api.kubeconfig, prometheus=proxy.url,
                           query=FLEET_WIDE_QUERY).replace(RING, "")
        path.write_text(text.replace("__PORT__", str(port)))
        shard = DaemonProcess(path, port=port, log=tmp_path / "shard.log",
                              extra_args=("--shard", "0", "--total-shards", "2"))
        shard.start()
        try:
            await eventually(lambda: {k.split("/")[0] for k, body in (
                (shard.status() or {}).get("targets") or {}).items()
                if body.get("lastOutcome") == "ok"} == ours, timeout=40,
                what="the shard's targets decided")
        finally:
            await shard.stop_async()
        asked = [shared_namespaces(q) for q in proxy.queries if "app_load" in q]
    assert asked
    assert all(names == ours for names in asked), asked[:3]
