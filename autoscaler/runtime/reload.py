"""Config reloads: SIGHUP, or a change of the config file, replaces the running config.

A kubelet-mounted ConfigMap swaps a symlink, and nobody sends SIGHUP for it: the file is
polled (``config/watch.py``). A config that does not load, whatever the parser raises,
changes nothing, is logged with its errors and counted, and leaves the next reload free to
work; one that loads but whose applying fails part way is in force as far as it got, and
said and counted as such (``failed``). Settings that need new connections
(``RESTART_ONLY``) keep their running values, and the log says a restart is needed for them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from autoscaler.config import Config, ConfigError, load_config
from autoscaler.config.watch import Change, FileWatch, suspect_changes
from autoscaler.observability.metrics import DaemonMetrics

log = structlog.get_logger("autoscaler.app")  # the daemon's lines, as before the split

CONFIG_POLL_INTERVAL = 2.0
"""Seconds between looks at the config file for a change (its path, inode, size, mtime)."""
RESTART_ONLY = {
    "kubernetes": "the [kubernetes] connection",
    "prometheus_servers": "the Prometheus servers",
    "listen_address": "daemon.listenAddress",
    "state_file": "daemon.stateFile",
    "leader_election": "daemon.leaderElection",
    "sharding": "daemon.sharding",
    "concurrency": "daemon.concurrency",
    # A dry run takes neither the Lease nor the store at start: a reload must not make it a
    # writer without them (nor a writer give them up).
    "dry_run": "daemon.dryRun",
    "log_format": "daemon.logFormat",
    "log_level": "daemon.logLevel",
}
"""Settings a reload cannot apply to a running daemon (name in the config -> how to say it)."""


class ConfigReloader:
    """Holds the running ``config``. ``prepare``: what the command line changes in a config
    just loaded; ``apply``: put a new config to work, returning how many targets it runs."""

    def __init__(self, config: Config, *, path: Path, prepare: Callable[[Config], Config],
                 apply: Callable[[Config], Awaitable[int]], telemetry: DaemonMetrics) -> None:
        self.config = config
        self.path = path
        self.prepare, self.apply, self.telemetry = prepare, apply, telemetry
        self.requested = asyncio.Event()
        """Set by SIGHUP."""
        self._reloading = asyncio.Lock()

    async def on_request(self) -> None:
        while True:
            await self.requested.wait()
            self.requested.clear()
            await self.reload(trigger="SIGHUP")

    async def watch(self) -> None:
        """Reload when the config file changes: an in-cluster daemon's config is a mounted
        ConfigMap that nobody sends SIGHUP for. A symlink swap (the kubelet's) is reloaded
        at once; a file rewritten in place once it has settled, and later still if it
        would take from the targets (``config/watch.py``). A file that is missing for a
        moment (mid-swap) is waited for, not reloaded."""
        watch = FileWatch(self.path)
        while True:
            await asyncio.sleep(CONFIG_POLL_INTERVAL)
            change = await asyncio.to_thread(watch.poll)
            if change is None or not change.ready():
                continue
            if not change.beyond_suspicion() and (taken := await self._suspect(change)):
                log.warning("config file changed in place and would take from the targets: "
                            "held until it has settled longer (it may still be being written)",
                            file=str(self.path), changes=taken,
                            settled_seconds=change.settled * CONFIG_POLL_INTERVAL)
                continue
            watch.loaded(change)
            await self.reload(trigger="file changed", data=change.data)

    async def _suspect(self, change: Change) -> list[str]:
        """What the changed file would take from the running targets; nothing for a file
        that does not load (the reload rejects it, with its errors)."""
        try:
            fresh = await asyncio.to_thread(load_config, self.path, data=change.data)
        except Exception:  # the reload says why
            return []
        return suspect_changes(self.config, self.prepare(fresh))

    async def reload(self, *, trigger: str = "SIGHUP", data: bytes | None = None) -> bool:
        """A config that does not load, for any reason, changes nothing and leaves the next
        reload free to work (one whose applying fails part way: ``_reload``). ``data``: the
        file's bytes, as the watcher read them."""
        async with self._reloading:
            try:
                return await self._reload(trigger, data)
            except Exception as error:  # whatever the loader raises, reloading goes on
                log.error("config reload rejected: keeping the running config",
                          file=str(self.path), trigger=trigger,
                          errors=[f"{self.path}: {type(error).__name__}: {error}"])
                self.telemetry.config_loaded("rejected")
                return False

    async def _reload(self, trigger: str, data: bytes | None) -> bool:
        try:
            fresh = await asyncio.to_thread(load_config, self.path, data=data)
        except ConfigError as error:
            log.error("config reload rejected: keeping the running config",
                      file=str(self.path), trigger=trigger, errors=str(error).splitlines())
            self.telemetry.config_loaded("rejected")
            return False
        fresh = self.prepare(fresh)
        pending = restart_only_changes(self.config, fresh)
        daemon = dataclasses.replace(fresh.daemon, **{
            name: getattr(self.config.daemon, name)
            for name in RESTART_ONLY if hasattr(fresh.daemon, name)})
        self.config = dataclasses.replace(
            fresh, daemon=daemon, kubernetes=self.config.kubernetes,
            prometheus_servers=self.config.prometheus_servers, prometheus=self.config.prometheus)
        try:
            targets = await self.apply(self.config)
        except Exception as error:
            # Valid, and in force as far as it got (the targets, say) before a step failed
            # (a watch): not "rejected", and the running config is the new one.
            log.error("config reload applied in part: the new config is running, but "
                      "applying it failed; SIGHUP (or a change of the file) applies it again",
                      file=str(self.path), trigger=trigger,
                      error=f"{type(error).__name__}: {error}")
            self.telemetry.config_loaded("failed")
            return False
        if pending:
            self.telemetry.config_loaded("restart_required")
            log.warning("config reloaded, but some changes take effect only on restart",
                        file=str(self.path), trigger=trigger, restart_for=pending,
                        targets=targets)
        else:
            self.telemetry.config_loaded("applied")
            log.info("config reloaded", file=str(self.path), trigger=trigger, targets=targets)
        return True


def restart_only_changes(running: Config, fresh: Config) -> list[str]:
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
