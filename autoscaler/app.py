"""The daemon's composition root and lifecycle (``autoscaler run``, in ``commands/run.py``).

Wires config, adapters (``wiring.py``), reconciler, scheduler, leadership, history, HTTP and
systemd notification together: the running parts are one value (``Running``), built once
the adapters are connected. SIGHUP, or a change of the config file, reloads the config
(``runtime/reload.py``); leadership and the history read that starts each term are
``runtime/leadership.py`` and ``runtime/restore.py``.

SIGTERM/SIGINT stop launching passes, give in-flight passes ``DRAIN_GRACE`` to finish their
writes, save the history (marked clean), release the lease, close the connections and exit,
each step bounded, so the process is gone within ``STOP_BOUND`` seconds whatever the backends
do (well under the 30 s both systemd's ``TimeoutStopSec`` here and the kubelet's default grace
period allow before SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from autoscaler.adapters.kube.configmap_store import ConfigMapStateStore
from autoscaler.adapters.kube.leader import default_identity
from autoscaler.adapters.kube.membership import MembershipThread
from autoscaler.adapters.kube.target_cache import kinds_of
from autoscaler.adapters.local_state import MemoryStateStore
from autoscaler.adapters.store_lock import StoreLock
from autoscaler.config import Config, TargetConfig
from autoscaler.observability.addresses import status_address
from autoscaler.observability.http import HTTP_SHUTDOWN_GRACE, Probes, serve_endpoints
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.observability.sdnotify import Notifier
from autoscaler.observability.status_json import Entries
from autoscaler.runtime.backfill import HistoryBackfill
from autoscaler.runtime.clock import wall_clock
from autoscaler.runtime.heap import settle_heap
from autoscaler.runtime.history import HistoryKeeper
from autoscaler.runtime.leadership import Leadership, campaigns
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.reload import ConfigReloader
from autoscaler.runtime.restore import HistoryRestore
from autoscaler.runtime.ring import Timings
from autoscaler.runtime.ring_member import RingMember, RingParts
from autoscaler.runtime.scheduler import Scheduler
from autoscaler.runtime.shards import targets_for_shard
from autoscaler.runtime.status import target_status
from autoscaler.runtime.supervisor import Supervisor
from autoscaler.runtime.timeline import Timeline
from autoscaler.wiring import (
    Components,
    caches_synced,
    connect,
    lease_elector,
    lease_names,
    ring_parts,
    start_membership,
    state_store,
    wait_synced,
    watch_namespaces,
)

log = structlog.get_logger("autoscaler.app")

DRAIN_GRACE = 10.0
"""Seconds in-flight passes get at a stop to finish their writes; then they are cancelled
(a write cut short stays on record as an intent, resolved at the next start)."""
CANCEL_GRACE = 1.0
"""Seconds cancelled tasks get to unwind (passes past the drain; background tasks)."""
SAVE_GRACE = 5.0
RELEASE_GRACE = 2.0
CLOSE_GRACE = 3.0
THREAD_GRACE = 1.0
"""Seconds worker threads get at exit before the process leaves without them (a read
stuck in a thread on a backend that never answers)."""
STOP_BOUND = (DRAIN_GRACE + CANCEL_GRACE + SAVE_GRACE + RELEASE_GRACE + CANCEL_GRACE
              + HTTP_SHUTDOWN_GRACE + CLOSE_GRACE + THREAD_GRACE)
"""The most a stop takes, from SIGTERM to exit, every step counted: 24 s, inside the
kubelet's and systemd's 30 s."""
HEARTBEAT_STALE = 30.0
SHARE_PODS_PER_READ = 30_000
"""A process acting for a share of the fleet (a ring member, a static shard) reads a pass's
metrics in parts of at most this many pods (``observe.read_parts``): its queries are cut to
each part's namespaces, so a part's answer is that part's. 30,000 keeps the most loaded
replica at 50,000 targets over 5 (52,500 pods) at 2 reads a pass, each answer half as big.
A single process is not cut: its queries answer for the fleet, so a part would read it all."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Running:
    """What runs once the adapters are connected: built in one place (``Daemon._start``)."""

    components: Components
    reconciler: Reconciler
    keeper: HistoryKeeper
    backfill: HistoryBackfill
    scheduler: Scheduler
    restore: HistoryRestore


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Overrides:
    """Command-line settings that win over the config file."""

    kubeconfig: Path | None = None
    context: str | None = None
    state_file: Path | None = None
    dry_run: bool = False
    listen: str | None = None
    shard: int | None = None
    total_shards: int | None = None

    def apply(self, config: Config) -> Config:
        daemon, kube = config.daemon, config.kubernetes
        if self.kubeconfig or self.context:
            kube = dataclasses.replace(
                kube, kubeconfig=self.kubeconfig or kube.kubeconfig,
                context=self.context or kube.context, in_cluster=False)
        daemon = dataclasses.replace(
            daemon,
            dry_run=daemon.dry_run or self.dry_run,
            state_file=self.state_file or daemon.state_file,
            listen_address=self.listen or daemon.listen_address,
        )
        return dataclasses.replace(config, daemon=daemon, kubernetes=kube)


class Daemon:
    def __init__(self, config: Config, *, config_path: Path, overrides: Overrides) -> None:
        config = overrides.apply(config)
        self.config_path = config_path
        self.overrides = overrides
        self.telemetry = DaemonMetrics()
        self.notifier = Notifier()
        self.probes = Probes()
        self.stop = asyncio.Event()
        self.identity = default_identity()
        daemon = config.daemon
        self.state_lock = (StoreLock.take(daemon.state_file)
                           if daemon.state_file is not None and not daemon.dry_run else None)
        """One process at a time on a state file (a dry run only reads it): taken first,
        so a second daemon is refused before it starts anything."""
        self.wall = wall_clock()
        self.timeline = Timeline(self.wall)
        """The clock windows, periods and the history run on (``runtime/timeline.py``)."""
        self.server_answered = asyncio.Event()
        self.timeline.server.observed = self.server_answered.set
        self.synced = False
        self.heartbeat = time.monotonic()
        self.supervisor = Supervisor()
        self.scheduler_targets: list[TargetConfig] = []
        self.reloads = ConfigReloader(config, path=config_path, prepare=overrides.apply,
                                      apply=self._apply_config, telemetry=self.telemetry)
        """Holds the running config (``config``) and replaces it at a reload."""
        self.leadership = Leadership(
            elected=campaigns(config),
            dry_run=daemon.dry_run, telemetry=self.telemetry, supervisor=self.supervisor)
        self._running: Running | None = None
        """The running parts, once the adapters are connected (``_start``)."""
        self.dynamic = daemon.sharding.mode == "dynamic" and not daemon.dry_run
        """A member of a ring of dynamic sharding (``runtime/ring_member.py``): it acts for
        the buckets of targets it holds, each with its own history. A dry run writes
        nothing and holds nothing: it plans every target, as in leader mode."""
        self.ring: RingMember | None = None
        self._membership: MembershipThread | None = None

    @property
    def config(self) -> Config:
        return self.reloads.config

    @property
    def reads_a_share(self) -> bool:
        """This process acts for a share of the fleet: its queries are cut to the share."""
        return self.dynamic or self.overrides.total_shards is not None

    @property
    def running(self) -> Running:
        if self._running is None:
            raise RuntimeError("the daemon's adapters are not connected yet")
        return self._running

    # --- lifecycle ----------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        loop.add_signal_handler(signal.SIGHUP, self.reloads.requested.set)
        connections = contextlib.AsyncExitStack()
        components = await connections.enter_async_context(
            connect(self.config, telemetry=self.telemetry,
                    on_date=self.timeline.server.observe,
                    share=self.reads_a_share))
        try:
            return await self._serve(components)
        finally:
            if self.state_lock is not None:
                self.state_lock.close()
            try:
                await asyncio.wait_for(connections.aclose(), CLOSE_GRACE)
            except TimeoutError:
                log.warning("closing connections took too long; leaving them",
                            grace=CLOSE_GRACE)

    def _start(self, components: Components) -> Running:
        """The running parts, each built once, over the connected adapters."""
        reconciler = components.reconciler(
            options=self._options(self.config), telemetry=self.telemetry,
            clock=self.timeline.now, wall=self.wall)
        keeper = HistoryKeeper(
            # A ring member keeps its history per bucket (``_ring_parts``), not here.
            MemoryStateStore() if self.dynamic else
            state_store(self.config, client=components.api_client, lock=self.state_lock,
                        lease=self._lease),
            reconciler.states, clock=self.timeline.now, skew=self.timeline.skew,
            corrected=self.telemetry.clock_steps.labels(source="history").inc,
            leader=self.leadership.holds_lease if self.leadership.elected else None)
        backfill = HistoryBackfill(components.history, reconciler.state,
                                   may_run=self._may_fill)
        scheduler = Scheduler(self._run_pass, may_run=self._may_run,
                              candidates=self._candidates)
        if self.dynamic:
            self.ring = RingMember(
                parts=self._ring_parts(components, reconciler), timings=Timings.of(
                    self.config.daemon.sharding),
                placement=self.config.daemon.sharding.placement,
                standby=self.config.daemon.sharding.standby == "warm",
                targets=lambda: self.scheduler_targets, ready=lambda: self.synced,
                run_now=scheduler.run_now, gained=self._gained, lost=self._lost,
                idle=scheduler.idle,
                warm=lambda namespaces: watch_namespaces(components, set(namespaces)),
                cached=lambda namespaces, timeout: caches_synced(
                    components, namespaces, timeout),
                monotonic=time.monotonic,
                telemetry=self.telemetry, ring_name=self._lease()[0])
        restore = HistoryRestore(
            keeper=keeper, backfill=backfill, scheduler=scheduler,
            history_read=self.leadership.history_read, server_answered=self.server_answered,
            server_wait=self.config.kubernetes.request_timeout,
            targets=lambda: self.scheduler_targets, events=components.events,
            concurrency=self.config.daemon.concurrency, telemetry=self.telemetry)
        return Running(components=components, reconciler=reconciler, keeper=keeper,
                       backfill=backfill, scheduler=scheduler, restore=restore)

    def _ring_parts(self, components: Components, reconciler: Reconciler) -> RingParts:
        assert self._membership is not None  # joined in _serve, before _start
        return ring_parts(
            self.config, client=components.api_client, lease=self._lease(),
            membership=self._membership,
            keeper=lambda store, scope, fence: HistoryKeeper(
                store, reconciler.states, clock=self.timeline.now, skew=self.timeline.skew,
                corrected=self.telemetry.clock_steps.labels(source="history").inc,
                leader=fence, scope=scope))

    async def _serve(self, components: Components) -> int:
        if self.dynamic:
            self._membership = await asyncio.to_thread(
                start_membership, self.config, lease=self._lease(),
                wall_offset=self.clock_skew)
        running = self._running = self._start(components)
        await self._check_store()
        self._install_probes()
        self.telemetry.config_loaded(None)
        listen = self.config.daemon.listen_address
        runners = await serve_endpoints(self.probes, self.telemetry, listen,
                                        status_listen=status_address(listen))
        try:
            await self._apply_targets(self.config)
            start = self.supervisor.start
            start("heartbeat", self._heartbeat())
            start("reloads", self.reloads.on_request())
            start("config watch", self.reloads.watch())
            start("passes", running.scheduler.run(self.stop))
            start("forecast history", running.backfill.run())
            start("cache sync", self._sync_pods(), finishes=True)
            if self.ring is not None:
                start("ring", self.ring.run())
            else:
                start("leadership", self._lead(), finishes=not self.leadership.elected)
            self.notifier.ready(f"{len(self.scheduler_targets)} targets")
            await self.stop.wait()
            await self._shut_down()
        finally:
            await self.supervisor.cancel_all(timeout=CANCEL_GRACE)
            for runner in runners:
                await runner.cleanup()
        log.info("stopped")
        return 0

    async def _shut_down(self) -> None:
        """Each step bounded (see ``STOP_BOUND``): writes, history, lease."""
        running = self.running
        log.info("stopping: finishing in-flight writes", grace=DRAIN_GRACE)
        self.supervisor.stopping = True
        self.notifier.stopping()
        if not await running.scheduler.drain(DRAIN_GRACE):
            log.warning("in-flight passes did not finish in time: cancelling them",
                        grace=DRAIN_GRACE)
            await running.scheduler.cancel(timeout=CANCEL_GRACE)
        if self.ring is not None:
            await self._leave_ring(self.ring)
            return
        if running.keeper.restored.is_set() and self.leadership.leads():
            try:
                await asyncio.wait_for(self._save_at_stop(), SAVE_GRACE)
            except Exception as error:  # the last intents written stay; the next start bridges
                log.error("could not save the history at stop",
                          store=running.keeper.store.description,
                          error=str(error) or type(error).__name__)
                self.telemetry.errors.labels(reason="state_save").inc()
        if self.leadership.elector is not None:
            try:
                await asyncio.wait_for(self.leadership.elector.release(), RELEASE_GRACE)
            except TimeoutError:
                log.warning("releasing the lease took too long; it will expire instead")

    async def _leave_ring(self, member: RingMember) -> None:
        """Hand every bucket over (its history written clean first), then leave the ring
        (our member Lease released), each bounded: peers need not wait a lease duration."""
        await member.leave()
        await member.parts.leases.stop()  # type: ignore[attr-defined]
        if self._membership is not None:
            await asyncio.to_thread(self._membership.stop, RELEASE_GRACE)

    async def _check_store(self) -> None:
        """Refuse, before anything starts, a state ConfigMap another daemon owns (the
        restore checks again; a read that fails now is left to it)."""
        store = self.running.keeper.store
        if isinstance(store, ConfigMapStateStore) and self.ring is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(store.check(), self.config.kubernetes.request_timeout)

    async def _save_at_stop(self) -> None:
        keeper = self.running.keeper
        await keeper.persist(clean=True)
        # As the config is now (a reload may have switched dry-run), as it always was.
        if isinstance(keeper.store, ConfigMapStateStore) and not campaigns(self.config):
            await keeper.store.release()  # the next daemon may be another pod

    def _options(self, config: Config) -> ReconcileOptions:
        return ReconcileOptions(
            algorithm=config.daemon.algorithm, dry_run=config.daemon.dry_run,
            concurrency=config.daemon.concurrency,
            may_write=self.ring.may_write if self.ring is not None else self.leadership.may_write,
            persist=self._persist,
            pods_per_read=SHARE_PODS_PER_READ if self.reads_a_share else None)

    async def _persist(self) -> None:
        if self.ring is not None:
            await self.ring.persist()
        else:
            await self.running.keeper.persist()

    # --- leadership ---------------------------------------------------------------------

    def _lease(self) -> tuple[str, str]:
        return lease_names(self.config, shard=self.overrides.shard,
                           total_shards=self.overrides.total_shards)

    async def _lead(self) -> None:
        running, lease = self.running, self._lease()
        await self.leadership.follow(
            lease=lease[0],
            elector=lambda: lease_elector(running.components.api_client, self.config,
                                          lease=lease, identity=self.identity),
            keeper=running.keeper, end_passes=self._end_passes, restore=running.restore.run)

    async def _end_passes(self) -> None:
        """Passes still running end first, cancelled past ``DRAIN_GRACE``."""
        if not await self.running.scheduler.drain(DRAIN_GRACE):
            await self.running.scheduler.cancel(timeout=CANCEL_GRACE)

    def _may_run(self, key: str) -> bool:
        """The scheduler's gate of target ``key``."""
        if self.ring is not None:
            return self.ring.may_run(key)
        return self._may_fill(key) and self.leadership.history_read.is_set()

    def _candidates(self) -> frozenset[str] | None:
        """The targets the scheduler's gate may allow: a ring member's buckets' (None: all)."""
        return None if self.ring is None else self.ring.candidates()

    def _may_fill(self, key: str) -> bool:
        """Forecast history of target ``key`` may be applied: the saved history is read (it
        would overwrite it) and this instance may write the target."""
        if self.ring is not None:
            return self.ring.may_run(key)
        return self.leadership.may_write(key) and self.running.keeper.restored.is_set()

    async def _run_pass(self, targets: Sequence[TargetConfig], deadline: float) -> None:
        await self.running.reconciler.run_pass(targets, deadline=deadline)
        if self.ring is not None:
            self.ring.passed([t.key for t in targets])

    # --- config -------------------------------------------------------------------------

    async def _apply_targets(self, config: Config) -> int:
        """Run ``config``'s targets (this shard's); how many there are."""
        running = self.running
        targets = targets_for_shard(config.targets, self.overrides.shard,
                                    self.overrides.total_shards)
        self.scheduler_targets = targets
        removed = running.scheduler.set_targets(targets)
        for key in removed:
            keeper = self._keeper_of(key)
            state = running.reconciler.remove(key)
            if state is not None and keeper is not None:
                keeper.retire(state)
            self.telemetry.forget(key)
        for target in targets:
            keeper = self._keeper_of(target.key)
            if target.key not in running.reconciler.states and keeper is not None:
                keeper.revive(running.reconciler.state(target.key))
        self.telemetry.targets.set(len(targets))
        self.telemetry.set_periods({t.sync_period for t in targets})
        self.telemetry.set_dry_run(config.daemon.dry_run)
        running.backfill.want(targets)
        await running.components.target_cache.set_kinds(
            kinds_of(t.scale_target_ref for t in config.targets))
        if self.ring is None:  # a ring member's upkeep narrows its caches to its share
            await watch_namespaces(running.components, {t.namespace for t in targets})
        return len(targets)

    def _gained(self, keys: Sequence[str]) -> None:
        """A ring member gained these targets, their history read: their forecast history is
        looked at anew (the store may have had less than a season of it)."""
        wanted = set(keys)
        backfill = self.running.backfill
        backfill.want([t for t in self.scheduler_targets if t.key in wanted], again=True)
        backfill.poke()

    def _lost(self, keys: Sequence[str]) -> None:
        """A ring member no longer holds these targets (lost, handed over, a claim that
        failed): their states go, with the last decision and samples each keeps. A pass
        still running over them works on detached states and writes nothing."""
        reconciler = self.running.reconciler
        for key in keys:
            reconciler.remove(key)

    def _keeper_of(self, key: str) -> HistoryKeeper | None:
        """The history keeper that holds target ``key``'s history (a ring member: the one of
        its bucket, if held; a target of a bucket we do not hold gets its history when its
        bucket is claimed)."""
        return self.ring.keeper_of(key) if self.ring is not None else self.running.keeper

    async def _apply_config(self, config: Config) -> int:
        """A reloaded config to work (``runtime/reload.py``)."""
        self.running.reconciler.options = self._options(config)
        return await self._apply_targets(config)

    # --- probes and watchdog ------------------------------------------------------------

    async def _sync_pods(self) -> None:
        components = self.running.components
        if self.ring is None:
            await wait_synced(components, {t.namespace for t in self.scheduler_targets})
        else:  # its share, once the ring's views say what it is (it can change meanwhile)
            while True:
                namespaces = self.ring.warm_namespaces
                if namespaces is not None and await caches_synced(components, namespaces, 1.0):
                    break
                await asyncio.sleep(0.1)
        settle_heap()
        self.synced = True

    async def _heartbeat(self) -> None:
        interval = self.notifier.watchdog_interval()
        while True:
            self.heartbeat = time.monotonic()
            self._watch_clock()
            if interval is not None and not self._dead():
                self.notifier.watchdog()  # no pings once a task died: systemd restarts us
            await asyncio.sleep(min(interval or 1.0, 1.0))

    def _watch_clock(self) -> None:
        """Say a step of the machine's clock (windows and periods ignore it), and keep the
        measured skew against the API server's clock on /metrics."""
        step = self.timeline.wall_step()
        if step is not None:
            log.warning("the machine's clock stepped: stabilization windows and policy "
                        "periods run on the monotonic clock and ignore it; this process's "
                        "times stay on the clock it started with", step_seconds=round(step, 3))
            self.telemetry.clock_steps.labels(source="machine").inc()
        skew = self.clock_skew()
        if skew is not None:
            self.telemetry.clock_skew.set(skew)

    def clock_skew(self) -> float | None:
        """Our timeline minus the API server's clock, seconds (the middle of what its
        ``Date`` headers allow), when it has answered. The ring's member Lease carries it
        (read from the membership's thread: one tuple, read whole)."""
        skew = self.timeline.skew()
        return None if skew is None else (skew[0] + skew[1]) / 2

    def _dead(self) -> list[str]:
        """Background work that ended when it should not have: the daemon's own tasks and
        the watches behind the caches."""
        dead = [f"{name}: {why}" for name, why in self.supervisor.failures.items()]
        if self._membership is not None and (failure := self._membership.failure()):
            dead.append(failure)
        if self._running is not None:
            components = self._running.components
            dead += [*components.pods.failures(), *components.target_cache.failures(),
                     *components.owners.failures()]
        return dead

    def _install_probes(self) -> None:
        def healthy() -> tuple[bool, str]:
            dead = self._dead()
            if dead:
                return False, "background task died: " + "; ".join(dead)
            stale = time.monotonic() - self.heartbeat
            return (stale < HEARTBEAT_STALE, "ok" if stale < HEARTBEAT_STALE
                    else f"event loop stalled for {stale:.0f}s")

        def ready() -> tuple[bool, str]:
            if not self.synced:
                return False, "pod and workload caches not synced yet"
            if self.ring is not None:
                held = self.ring.status()["buckets"]
                return True, f"ring member holding {len(held)} buckets"  # type: ignore[arg-type]
            return True, "leader" if self.leadership.leads() else "standby"

        self.probes.healthy, self.probes.ready, self.probes.status = healthy, ready, self._status

    def _status(self) -> dict[str, Any]:
        running, member = self.running, self.ring
        shown = self.scheduler_targets if member is None else [
            t for t in self.scheduler_targets if member.may_write(t.key)]
        # Each target's status is built as it is written (``Entries``): the targets shown
        # are those of this instant, each as it stands when its turn comes.
        by_key, planned = {t.key: t for t in shown}, self.config.daemon.dry_run
        status: dict[str, Any] = {
            "identity": self.identity if member is None else member.me,
            "leader": self.leadership.leads() if member is None else member.leads(),
            "dryRun": self.config.daemon.dry_run,
            "shard": self.overrides.shard,
            "totalShards": self.overrides.total_shards,
            "config": str(self.config_path),
            "history": running.keeper.status() if member is None else None,
            "targets": Entries([t.key for t in shown], lambda key: target_status(
                running.reconciler.viewed(key), by_key[key], planned=planned)),
        }
        if member is not None:
            status["ring"] = member.status()
        return status
