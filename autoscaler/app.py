"""The daemon's composition root and lifecycle (``autoscaler run``, in ``commands/run.py``).

Wires config, adapters, reconciler, scheduler, leader election, history, HTTP and systemd
notification together. SIGHUP, or a change of the config file (a kubelet-mounted ConfigMap
swaps a symlink; the file is polled), reloads the config: a broken one is rejected with its
errors logged and the running one kept, whatever the parser raises.

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
import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from autoscaler.adapters.kube.configmap_store import (
    ConfigMapStateStore,
    host_owner,
    lease_owner,
)
from autoscaler.adapters.kube.leader import LeaderElector, LeaseConfig, default_identity
from autoscaler.adapters.kube.session import InClusterFiles, pod_namespace, wants_in_cluster
from autoscaler.adapters.local_state import FileStateStore, MemoryStateStore, ReadOnceStore
from autoscaler.adapters.store_lock import StoreLock
from autoscaler.algorithm import EventReason
from autoscaler.config import Config, ConfigError, TargetConfig, load_config
from autoscaler.config.watch import Change, FileWatch, suspect_changes
from autoscaler.errors import StateSetAsideError
from autoscaler.observability.addresses import status_address
from autoscaler.observability.http import HTTP_SHUTDOWN_GRACE, Probes, serve_endpoints
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.observability.sdnotify import Notifier
from autoscaler.runtime.backfill import HistoryBackfill
from autoscaler.runtime.clock import wall_clock
from autoscaler.runtime.heap import settle_heap
from autoscaler.runtime.history import HistoryKeeper, Restored
from autoscaler.runtime.ports import StateStore
from autoscaler.runtime.reconcile import ReconcileOptions
from autoscaler.runtime.scheduler import Scheduler
from autoscaler.runtime.shards import targets_for_shard
from autoscaler.runtime.status import target_status
from autoscaler.runtime.supervisor import Supervisor
from autoscaler.runtime.timeline import Timeline
from autoscaler.wiring import Components, connect, wait_synced, watch_namespaces

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
CONFIG_POLL_INTERVAL = 2.0
"""Seconds between looks at the config file for a change (its path, inode, size, mtime)."""
RESTART_ONLY = {
    "kubernetes": "the [kubernetes] connection",
    "prometheus_servers": "the Prometheus servers",
    "listen_address": "daemon.listenAddress",
    "state_file": "daemon.stateFile",
    "leader_election": "daemon.leaderElection",
    "concurrency": "daemon.concurrency",
    "log_format": "daemon.logFormat",
    "log_level": "daemon.logLevel",
}
"""Settings a reload cannot apply to a running daemon (name in the config -> how to say it)."""


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
        self.config = overrides.apply(config)
        self.config_path = config_path
        self.overrides = overrides
        self.telemetry = DaemonMetrics()
        self.notifier = Notifier()
        self.probes = Probes()
        self.stop = asyncio.Event()
        self.reload_requested = asyncio.Event()
        self.identity = default_identity()
        daemon = self.config.daemon
        self.state_lock = (StoreLock.take(daemon.state_file)
                           if daemon.state_file is not None and not daemon.dry_run else None)
        """One process at a time on a state file (a dry run only reads it): taken first,
        so a second daemon is refused before it starts anything."""
        self.wall = wall_clock()
        self.timeline = Timeline(self.wall)
        """The clock windows, periods and the history run on (``runtime/timeline.py``)."""
        self.server_answered = asyncio.Event()
        self.timeline.server.observed = self.server_answered.set
        self.elector: LeaderElector | None = None
        self._term = 0
        """The leadership term whose history was (or is being) read: writes are fenced on it."""
        self.synced = False
        self.heartbeat = time.monotonic()
        self.supervisor = Supervisor()
        self._reloading = asyncio.Lock()
        self.scheduler_targets: list[TargetConfig] = []
        self.history_read = asyncio.Event()
        """Set once the saved history is read and the forecast history waited for: passes
        may run."""

    # --- lifecycle ----------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        loop.add_signal_handler(signal.SIGHUP, self.reload_requested.set)
        connections = contextlib.AsyncExitStack()
        components = await connections.enter_async_context(
            connect(self.config, telemetry=self.telemetry,
                    on_date=self.timeline.server.observe))
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

    async def _serve(self, components: Components) -> int:
        self.components = components
        self.reconciler = components.reconciler(
            options=self._options(self.config), telemetry=self.telemetry,
            clock=self.timeline.now, wall=self.wall)
        self.keeper = HistoryKeeper(
            self._state_store(components), self.reconciler.states, clock=self.timeline.now,
            skew=self.timeline.skew,
            corrected=self.telemetry.clock_steps.labels(source="history").inc,
            leader=self._holds_lease if self._elected() else None)
        await self._check_store()
        self.backfill = HistoryBackfill(components.history, self.reconciler.state,
                                        may_run=self._may_fill)
        self.scheduler = Scheduler(self._run_pass, may_run=self._may_run)
        self._install_probes()
        self.telemetry.config_loaded(None)
        listen = self.config.daemon.listen_address
        runners = await serve_endpoints(self.probes, self.telemetry, listen,
                                        status_listen=status_address(listen))
        try:
            await self._apply_targets(self.config)
            start = self.supervisor.start
            start("heartbeat", self._heartbeat())
            start("reloads", self._reloads())
            start("config watch", self._watch_config())
            start("passes", self.scheduler.run(self.stop))
            start("forecast history", self.backfill.run())
            start("cache sync", self._sync_pods(), finishes=True)
            start("leadership", self._leadership(),
                  finishes=not self._elected())
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
        log.info("stopping: finishing in-flight writes", grace=DRAIN_GRACE)
        self.supervisor.stopping = True
        self.notifier.stopping()
        if not await self.scheduler.drain(DRAIN_GRACE):
            log.warning("in-flight passes did not finish in time: cancelling them",
                        grace=DRAIN_GRACE)
            await self.scheduler.cancel(timeout=CANCEL_GRACE)
        if self.keeper.restored.is_set() and self._may_write():
            try:
                await asyncio.wait_for(self._save_at_stop(), SAVE_GRACE)
            except Exception as error:  # the last intents written stay; the next start bridges
                log.error("could not save the history at stop", store=self.keeper.store.description,
                          error=str(error) or type(error).__name__)
                self.telemetry.errors.labels(reason="state_save").inc()
        if self.elector is not None:
            try:
                await asyncio.wait_for(self.elector.release(), RELEASE_GRACE)
            except TimeoutError:
                log.warning("releasing the lease took too long; it will expire instead")

    async def _check_store(self) -> None:
        """Refuse, before anything starts, a state ConfigMap another daemon owns (the
        restore checks again; a read that fails now is left to it)."""
        store = self.keeper.store
        if isinstance(store, ConfigMapStateStore):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(store.check(), self.config.kubernetes.request_timeout)

    async def _save_at_stop(self) -> None:
        await self.keeper.persist(clean=True)
        store = self.keeper.store
        if isinstance(store, ConfigMapStateStore) and not self._elected():
            await store.release()  # the next daemon may be another pod

    def _options(self, config: Config) -> ReconcileOptions:
        return ReconcileOptions(
            algorithm=config.daemon.algorithm, dry_run=config.daemon.dry_run,
            concurrency=config.daemon.concurrency, may_write=self._may_write,
            persist=self._persist)

    async def _persist(self) -> None:
        await self.keeper.persist()

    # --- leadership and state -----------------------------------------------------------

    def _may_write(self) -> bool:
        return self.elector is None or self.elector.leads(self._term)

    def _holds_lease(self) -> bool:
        """With leader election: the fence of every history write (no elector yet: no).
        Only in the term whose history this instance read: a term that lapsed or ended
        never resumes, and a new one writes nothing until its history is read again."""
        return self.elector is not None and self.elector.leads(self._term)

    def _may_run(self) -> bool:
        return self._may_fill() and self.history_read.is_set()

    def _may_fill(self) -> bool:
        """Forecast history may be applied: the saved history is read (it would overwrite
        it) and this instance leads."""
        return self._may_write() and self.keeper.restored.is_set()

    def _elected(self) -> bool:
        """Whether this instance campaigns for a Lease: not in a dry run, which writes
        nothing and so must not take the lease (or the store) from the live daemon."""
        return self.config.daemon.leader_election.enabled and not self.config.daemon.dry_run

    def _lease_names(self) -> tuple[str, str]:
        election = self.config.daemon.leader_election
        name = election.lease_name
        if self.overrides.total_shards and self.overrides.total_shards > 1:
            name = f"{name}-shard-{self.overrides.shard}-of-{self.overrides.total_shards}"
        return name, election.lease_namespace or pod_namespace()

    def _state_store(self, components: Components) -> StateStore:
        """The store this daemon owns; a dry run's is the live one read once at start, then
        kept in memory: it takes neither the state file's lock nor the Lease and writes
        nothing, so it can run beside the daemon it shadows."""
        daemon = self.config.daemon
        store: StateStore
        if daemon.state_file is not None:
            store = FileStateStore(daemon.state_file, read_only=daemon.dry_run,
                                   lock=self.state_lock)
        elif daemon.leader_election.enabled or wants_in_cluster(
                self.config.kubernetes, os.environ, InClusterFiles()):
            name, namespace = self._lease_names()
            owner = (lease_owner(namespace, name) if daemon.leader_election.enabled
                     else host_owner(socket.gethostname()))
            store = ConfigMapStateStore(components.api_client, namespace=namespace,
                                        name=f"{name}-state", owner=owner,
                                        read_only=daemon.dry_run)
        else:
            log.warning("no state file and no cluster state: history is lost on restart "
                        "(set daemon.stateFile)")
            return MemoryStateStore()
        return ReadOnceStore(store) if daemon.dry_run else store

    async def _leadership(self) -> None:
        election = self.config.daemon.leader_election
        lease = self._lease_names()[0]
        if not self._elected():
            # A dry run acts for no lease (it writes nothing): not counted as a leader.
            self.telemetry.set_leader(lease, not self.config.daemon.dry_run)
            await self._restore()
            return
        name, namespace = self._lease_names()
        self.elector = LeaderElector(self.components.api_client, LeaseConfig(
            namespace=namespace, name=name, identity=self.identity,
            lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
            retry_period=election.retry_period))
        self.telemetry.set_leader(lease, False)
        self.supervisor.start("lease", self.elector.run())
        restoring: asyncio.Task[Any] | None = None
        wanted = 0
        while True:
            await self.elector.changed.wait()
            self.elector.changed.clear()
            leading, term = self.elector.is_leader, self.elector.term
            self.telemetry.set_leader(lease, leading)
            if leading and term == wanted:
                continue  # the term whose history is read, or being read
            # Lost, or a new term (one that lapsed never resumes): what this instance holds
            # is not the store's any more; a new term reads it again, as a fresh leader.
            if restoring is not None:
                restoring.cancel()
            self.keeper.invalidate()
            self.history_read.clear()
            if not leading:
                wanted = 0
                self.telemetry.forget_targets()  # the new leader's view is the one to read
                continue
            wanted = term
            restoring = self.supervisor.start("history restore", self._take_over(term),
                                              finishes=True)

    async def _take_over(self, term: int) -> None:
        """Lead in ``term``: passes of an earlier term still running end first (they write
        nothing meanwhile: the fences name the term), then the history is read."""
        if not await self.scheduler.drain(DRAIN_GRACE):
            await self.scheduler.cancel(timeout=CANCEL_GRACE)
        self._term = term
        await self._restore()

    async def _restore(self) -> None:
        """Read the history (retrying as long as it takes), then let passes run. The API
        server's clock is waited for first (briefly: any answer tells it), to put the
        stored timestamps on ours."""
        self.history_read.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.server_answered.wait(),
                                   self.config.kubernetes.request_timeout)
        restored = await self.keeper.restore(lambda: [t.key for t in self.scheduler_targets])
        log.info("history restored", store=self.keeper.store.description,
                 targets=restored.targets, removed_targets_kept=restored.retired,
                 clean_stop=restored.clean)
        if restored.set_aside is not None:
            await self._report_set_aside(restored, restored.set_aside)
        # Forecast history from Prometheus for the predicted metrics the store had less
        # than a season of: briefly waited for, so their models are usable on the first pass.
        self.backfill.want(self.scheduler_targets, again=True)
        await self.backfill.settle()
        self.history_read.set()
        self.scheduler.poke()

    async def _report_set_aside(self, restored: Restored, error: StateSetAsideError) -> None:
        """Loudly: a log line, a metric and an Event on every target whose history is gone."""
        message = (f"the saved history could not be decoded ({error}); it was kept as "
                   f"{error.kept_as} and the stabilization windows and scale policies of "
                   "every target start fresh")
        log.error("saved history set aside: starting fresh", store=self.keeper.store.description,
                  kept_as=error.kept_as, error=str(error), targets=restored.targets)
        self.telemetry.errors.labels(reason="state_set_aside").inc()
        limit = asyncio.Semaphore(max(1, self.config.daemon.concurrency))

        async def event(target: TargetConfig) -> None:
            async with limit:
                with contextlib.suppress(Exception):  # an event is never worth more
                    await self.components.events.record(
                        target.namespace, target.scale_target_ref, warning=True,
                        reason=EventReason.HISTORY_UNREADABLE, message=message)

        await asyncio.gather(*(event(t) for t in self.scheduler_targets))

    async def _run_pass(self, targets: Sequence[TargetConfig], deadline: float) -> None:
        await self.reconciler.run_pass(targets, deadline=deadline)

    # --- config -------------------------------------------------------------------------

    async def _apply_targets(self, config: Config) -> None:
        targets = targets_for_shard(config.targets, self.overrides.shard,
                                    self.overrides.total_shards)
        self.scheduler_targets = targets
        removed = self.scheduler.set_targets(targets)
        for key in removed:
            state = self.reconciler.remove(key)
            if state is not None:
                self.keeper.retire(state)
            self.telemetry.forget(key)
        for target in targets:
            if target.key not in self.reconciler.states:
                self.keeper.revive(self.reconciler.state(target.key))
        self.telemetry.targets.set(len(targets))
        self.telemetry.set_periods({t.sync_period for t in targets})
        self.telemetry.set_dry_run(config.daemon.dry_run)
        self.backfill.want(targets)
        await watch_namespaces(self.components, {t.namespace for t in targets})

    async def _reloads(self) -> None:
        while True:
            await self.reload_requested.wait()
            self.reload_requested.clear()
            await self.reload(trigger="SIGHUP")

    async def _watch_config(self) -> None:
        """Reload when the config file changes: an in-cluster daemon's config is a mounted
        ConfigMap that nobody sends SIGHUP for. A symlink swap (the kubelet's) is reloaded
        at once; a file rewritten in place once it has settled, and later still if it
        would take from the targets (``config/watch.py``). A file that is missing for a
        moment (mid-swap) is waited for, not reloaded."""
        watch = FileWatch(self.config_path)
        while True:
            await asyncio.sleep(CONFIG_POLL_INTERVAL)
            change = await asyncio.to_thread(watch.poll)
            if change is None or not change.ready():
                continue
            if not change.beyond_suspicion() and (taken := await self._suspect(change)):
                log.warning("config file changed in place and would take from the targets: "
                            "held until it has settled longer (it may still be being written)",
                            file=str(self.config_path), changes=taken,
                            settled_seconds=change.settled * CONFIG_POLL_INTERVAL)
                continue
            watch.loaded(change)
            await self.reload(trigger="file changed", data=change.data)

    async def _suspect(self, change: Change) -> list[str]:
        """What the changed file would take from the running targets; nothing for a file
        that does not load (the reload rejects it, with its errors)."""
        try:
            fresh = await asyncio.to_thread(load_config, self.config_path, data=change.data)
        except Exception:  # the reload says why
            return []
        return suspect_changes(self.config, self.overrides.apply(fresh))

    async def reload(self, *, trigger: str = "SIGHUP", data: bytes | None = None) -> bool:
        """All or nothing: a config that does not load, for any reason, changes nothing and
        leaves the next reload free to work. ``data``: the file's bytes, as the watcher
        read them."""
        async with self._reloading:
            try:
                return await self._reload(trigger, data)
            except Exception as error:  # whatever the loader raises, reloading goes on
                log.error("config reload rejected: keeping the running config",
                          file=str(self.config_path), trigger=trigger,
                          errors=[f"{self.config_path}: {type(error).__name__}: {error}"])
                self.telemetry.config_loaded("rejected")
                return False

    async def _reload(self, trigger: str, data: bytes | None) -> bool:
        try:
            fresh = await asyncio.to_thread(load_config, self.config_path, data=data)
        except ConfigError as error:
            log.error("config reload rejected: keeping the running config",
                      file=str(self.config_path), trigger=trigger, errors=str(error).splitlines())
            self.telemetry.config_loaded("rejected")
            return False
        fresh = self.overrides.apply(fresh)
        pending = _restart_only_changes(self.config, fresh)
        daemon = dataclasses.replace(fresh.daemon, **{
            name: getattr(self.config.daemon, name)
            for name in RESTART_ONLY if hasattr(fresh.daemon, name)})
        self.config = dataclasses.replace(
            fresh, daemon=daemon, kubernetes=self.config.kubernetes,
            prometheus_servers=self.config.prometheus_servers, prometheus=self.config.prometheus)
        self.reconciler.options = self._options(self.config)
        await self._apply_targets(self.config)
        if pending:
            self.telemetry.config_loaded("restart_required")
            log.warning("config reloaded, but some changes take effect only on restart",
                        file=str(self.config_path), trigger=trigger, restart_for=pending,
                        targets=len(self.scheduler_targets))
        else:
            self.telemetry.config_loaded("applied")
            log.info("config reloaded", file=str(self.config_path), trigger=trigger,
                     targets=len(self.scheduler_targets))
        return True

    # --- probes and watchdog ------------------------------------------------------------

    async def _sync_pods(self) -> None:
        await wait_synced(self.components, {t.namespace for t in self.scheduler_targets})
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
        skew = self.timeline.skew()
        if skew is not None:
            self.telemetry.clock_skew.set((skew[0] + skew[1]) / 2)

    def _dead(self) -> list[str]:
        """Background work that ended when it should not have: the daemon's own tasks and
        the watches behind the caches."""
        dead = [f"{name}: {why}" for name, why in self.supervisor.failures.items()]
        components = getattr(self, "components", None)
        if components is not None:
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
            return True, "leader" if self._may_write() else "standby"

        self.probes.healthy, self.probes.ready, self.probes.status = healthy, ready, self._status

    def _status(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "leader": self._may_write(),
            "dryRun": self.config.daemon.dry_run,
            "shard": self.overrides.shard,
            "totalShards": self.overrides.total_shards,
            "config": str(self.config_path),
            "history": self.keeper.status(),
            "targets": {t.key: target_status(self.reconciler.state(t.key), t,
                                             planned=self.config.daemon.dry_run)
                        for t in self.scheduler_targets},
        }



def _restart_only_changes(running: Config, fresh: Config) -> list[str]:
    """The settings that differ between ``running`` and ``fresh`` but need a restart."""
    changed = []
    for name in ("kubernetes", "prometheus_servers"):
        if getattr(running, name) != getattr(fresh, name):
            changed.append(RESTART_ONLY[name])
    for name, label in RESTART_ONLY.items():
        if hasattr(running.daemon, name) and getattr(running.daemon, name) != getattr(
                fresh.daemon, name):
            changed.append(label)
    return changed
