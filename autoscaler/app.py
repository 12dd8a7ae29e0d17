"""``autoscaler run``: the daemon's composition root and lifecycle.

Wires config, adapters, reconciler, scheduler, leader election, state, HTTP and systemd
notification together. SIGTERM/SIGINT stop launching passes, let in-flight writes finish,
save the history, release the lease and exit; SIGHUP reloads the config (a broken config is
rejected with its errors logged and the running one kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from autoscaler.adapters.kube.leader import LeaderElector, LeaseConfig, default_identity
from autoscaler.adapters.kube.session import InClusterFiles, wants_in_cluster
from autoscaler.adapters.kube.state import ConfigMapStateStore
from autoscaler.config import Config, ConfigError, TargetConfig, load_config
from autoscaler.observability.http import Probes, build_app, serve
from autoscaler.observability.logs import configure_logging
from autoscaler.observability.metrics import DaemonMetrics
from autoscaler.observability.sdnotify import Notifier
from autoscaler.runtime.reconcile import ReconcileOptions, Reconciler
from autoscaler.runtime.scheduler import Scheduler
from autoscaler.state import FileStateStore, MemoryStateStore, StateStore
from autoscaler.wiring import (
    Components,
    connect,
    pod_namespace,
    settle_heap,
    targets_for_shard,
    wait_synced,
    watch_namespaces,
)

log = structlog.get_logger("autoscaler.app")

SHUTDOWN_GRACE = 20.0
STATE_SAVE_INTERVAL = 5.0
HEARTBEAT_STALE = 30.0


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
        self.elector: LeaderElector | None = None
        self.restored = asyncio.Event()
        self.synced = False
        self.heartbeat = time.monotonic()
        self._last_save = 0.0
        self._tasks: list[asyncio.Task[Any]] = []
        self.scheduler_targets: list[TargetConfig] = []

    # --- lifecycle ----------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        loop.add_signal_handler(signal.SIGHUP, self.reload_requested.set)
        async with connect(self.config) as components:
            return await self._serve(components)

    async def _serve(self, components: Components) -> int:
        self.components = components
        self.reconciler = Reconciler(
            scales=components.scales, pods=components.pods, metrics=components.metrics,
            events=components.events, owners=components.owners,
            options=self._options(self.config), telemetry=self.telemetry)
        self.store = self._state_store(components)
        self.scheduler = Scheduler(self._run_pass, may_run=self._may_run)
        self._install_probes()
        address = self.config.daemon.listen_address
        runner = await serve(build_app(self.probes, self.telemetry), address)
        log.info("listening", address=address)
        try:
            await self._apply_targets(self.config)
            self._start(self._heartbeat(), self._reloads(), self.scheduler.run(self.stop),
                        self._sync_pods(), self._leadership())
            self.notifier.ready(f"{len(self.scheduler_targets)} targets")
            await self.stop.wait()
            log.info("stopping: finishing in-flight writes")
            self.notifier.stopping()
            if not await self.scheduler.drain(SHUTDOWN_GRACE):
                log.warning("in-flight passes did not finish in time", grace=SHUTDOWN_GRACE)
            await self._save_state(force=True)
            if self.elector is not None:
                await self.elector.release()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await runner.cleanup()
        log.info("stopped")
        return 0

    def _start(self, *coroutines: Any) -> None:
        self._tasks += [asyncio.get_running_loop().create_task(c) for c in coroutines]

    def _options(self, config: Config) -> ReconcileOptions:
        return ReconcileOptions(
            algorithm=config.daemon.algorithm, dry_run=config.daemon.dry_run,
            concurrency=config.daemon.concurrency, may_write=self._may_write)

    # --- leadership and state -----------------------------------------------------------

    def _may_write(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def _may_run(self) -> bool:
        return self._may_write() and self.restored.is_set()

    def _lease_names(self) -> tuple[str, str]:
        election = self.config.daemon.leader_election
        name = election.lease_name
        if self.overrides.total_shards and self.overrides.total_shards > 1:
            name = f"{name}-shard-{self.overrides.shard}-of-{self.overrides.total_shards}"
        return name, election.lease_namespace or pod_namespace()

    def _state_store(self, components: Components) -> StateStore:
        daemon = self.config.daemon
        if daemon.state_file is not None:
            return FileStateStore(daemon.state_file)
        in_cluster = wants_in_cluster(self.config.kubernetes, os.environ, InClusterFiles())
        if daemon.leader_election.enabled or in_cluster:
            name, namespace = self._lease_names()
            return ConfigMapStateStore(components.api_client, namespace=namespace,
                                       name=f"{name}-state")
        log.warning("no state file and no cluster state: history is lost on restart "
                    "(set daemon.stateFile)")
        return MemoryStateStore()

    async def _leadership(self) -> None:
        election = self.config.daemon.leader_election
        if not election.enabled:
            self.telemetry.leader.set(1)
            await self._restore_state()
            self.scheduler.poke()
            return
        name, namespace = self._lease_names()
        self.elector = LeaderElector(self.components.api_client, LeaseConfig(
            namespace=namespace, name=name, identity=self.identity,
            lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
            retry_period=election.retry_period))
        self._start(self.elector.run())
        while True:
            await self.elector.changed.wait()
            self.elector.changed.clear()
            leading = self.elector.is_leader
            self.telemetry.leader.set(1 if leading else 0)
            if leading:
                # Take over the previous leader's windows before acting.
                await self._restore_state()
                self.scheduler.poke()
            else:
                self.restored.clear()

    async def _restore_state(self) -> None:
        try:
            saved = await self.store.load()
        except Exception as error:  # unreadable state: start fresh, as upstream always does
            log.error("could not load saved history; starting fresh", error=str(error))
            saved = {}
        keys = {t.key for t in self.scheduler_targets}
        for key, history in saved.items():
            if key in keys:
                self.reconciler.state(key).history = history
        log.info("history restored", targets=len(keys & saved.keys()))
        self.restored.set()

    async def _save_state(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not self._may_write() or (not force and now - self._last_save < STATE_SAVE_INTERVAL):
            return
        self._last_save = now
        histories = {k: s.history for k, s in self.reconciler.states.items() if s.history.seeded}
        try:
            await self.store.save(histories)
        except Exception as error:  # the next save will try again
            log.warning("could not save history", error=str(error))
            self.telemetry.errors.labels(reason="state_save").inc()

    async def _run_pass(self, targets: Sequence[TargetConfig], deadline: float) -> None:
        await self.reconciler.run_pass(targets, deadline=deadline)
        await self._save_state()

    # --- config -------------------------------------------------------------------------

    async def _apply_targets(self, config: Config) -> None:
        targets = targets_for_shard(config.targets, self.overrides.shard,
                                    self.overrides.total_shards)
        self.scheduler_targets = targets
        removed = self.scheduler.set_targets(targets)
        for key in removed:
            self.reconciler.states.pop(key, None)
            self.telemetry.forget(key)
        self.telemetry.targets.set(len(targets))
        await watch_namespaces(self.components, {t.namespace for t in targets})

    async def _reloads(self) -> None:
        while True:
            await self.reload_requested.wait()
            self.reload_requested.clear()
            await self.reload()

    async def reload(self) -> bool:
        try:
            fresh = await asyncio.to_thread(load_config, self.config_path)
        except (ConfigError, OSError) as error:
            log.error("config reload rejected: keeping the running config",
                      errors=str(error).splitlines())
            self.telemetry.config_reloads.labels(result="rejected").inc()
            return False
        fresh = self.overrides.apply(fresh)
        for part in ("kubernetes", "prometheus_servers"):
            if getattr(fresh, part) != getattr(self.config, part):
                log.warning("connection settings changed: they take effect on restart", part=part)
        self.config = dataclasses.replace(
            fresh, kubernetes=self.config.kubernetes,
            prometheus_servers=self.config.prometheus_servers, prometheus=self.config.prometheus)
        self.reconciler.options = self._options(self.config)
        await self._apply_targets(self.config)
        self.telemetry.config_reloads.labels(result="applied").inc()
        log.info("config reloaded", targets=len(self.scheduler_targets))
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
            if interval is not None:
                self.notifier.watchdog()
            await asyncio.sleep(min(interval or 1.0, 1.0))

    def _install_probes(self) -> None:
        def healthy() -> tuple[bool, str]:
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
            "targets": {t.key: self.reconciler.state(t.key).to_json()
                        for t in self.scheduler_targets},
        }


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="autoscaler run", description="Run the daemon.")
    parser.add_argument("--config", "-c", type=Path, required=True)
    parser.add_argument("--kubeconfig", type=Path, help="overrides kubernetes.kubeconfig")
    parser.add_argument("--context", help="overrides kubernetes.context")
    parser.add_argument("--state-file", type=Path, help="overrides daemon.stateFile")
    parser.add_argument("--listen", help="overrides daemon.listenAddress (host:port)")
    parser.add_argument("--dry-run", action="store_true", help="decide and report, never write")
    parser.add_argument("--shard", type=int, help="this replica's shard (0-based)")
    parser.add_argument("--total-shards", type=int, help="number of shards")
    args = parser.parse_args(argv)
    if (args.shard is None) != (args.total_shards is None):
        parser.error("--shard and --total-shards go together")
    if args.total_shards is not None and not 0 <= args.shard < args.total_shards:
        parser.error("--shard must be between 0 and --total-shards - 1")
    return args


def command(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"autoscaler: invalid config, not starting:\n{error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"autoscaler: cannot read {args.config}: {error}", file=sys.stderr)
        return 1
    configure_logging(log_format=config.daemon.log_format, level=config.daemon.log_level)
    overrides = Overrides(
        kubeconfig=args.kubeconfig, context=args.context, state_file=args.state_file,
        dry_run=args.dry_run, listen=args.listen, shard=args.shard,
        total_shards=args.total_shards)
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(Daemon(config, config_path=args.config, overrides=overrides).run())
    return 0
