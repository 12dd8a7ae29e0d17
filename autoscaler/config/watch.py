"""When a config file that changed may be reloaded: whole, settled, and not a suspect cut.

A kubelet-mounted ConfigMap changes by a symlink swap to a new directory: the file the path
resolves to is complete when it appears, and is reloaded at the first poll that sees it. A
file rewritten in place (an editor, ``cat >``, a config-management tool) can be seen half
written, and many prefixes of a valid file are valid TOML that means something else: an
empty file has no targets, ``maxReplicas = 1`` may be the start of ``maxReplicas = 10``, a
target cut before its ``[[autoscaler.metrics]]`` scales on the default CPU metric. So:

- a change that is not a swap is reloaded once its bytes, size and mtime have stayed the
  same across ``SETTLE_POLLS`` polls (the writer has paused that long);
- one that would drop a target, lower a target's maxReplicas or take away one of its
  metrics (``suspect_changes``) waits until ``SUSPECT_POLLS`` (a writer that paused mid-file
  for seconds, as the issue saw, is done by then), and the daemon says so.

SIGHUP reloads at once: whoever sends it has finished writing.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from autoscaler.config.files import UnusableFileError, read_config_file
from autoscaler.config.validated import Config

Stamp = tuple[str, int, int, int, int]
"""(the path the file resolves to, device, inode, size, mtime in ns)."""

SETTLE_POLLS = 1
SUSPECT_POLLS = 3


def stamp(path: Path) -> Stamp | None:
    """What changes when the file (or the symlink chain to it) is replaced or rewritten;
    None while it is missing (mid-swap)."""
    try:
        info = path.stat()
        return os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns
    except OSError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """The file as it is now, since it changed."""

    data: bytes
    stamp: Stamp
    swapped: bool
    """The path resolves to another file than the one last loaded (a symlink swap)."""
    settled: int
    """Polls across which the bytes and the stamp stayed the same (0: just changed)."""

    def ready(self) -> bool:
        """Whole: swapped in, or unchanged for ``SETTLE_POLLS`` polls."""
        return self.swapped or self.settled >= SETTLE_POLLS

    def beyond_suspicion(self) -> bool:
        return self.swapped or self.settled >= SUSPECT_POLLS


class FileWatch:
    """Polled: what the config file at ``path`` is since it last changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loaded = stamp(path)
        self._pending: tuple[Stamp, bytes] | None = None
        self._settled = 0

    def poll(self) -> Change | None:
        """The file since it changed, or None while it is as last loaded, missing, or
        changing under the read."""
        now = stamp(self.path)
        if now is None or now == self._loaded:
            self._pending = None
            return None
        try:
            data = read_config_file(self.path)
        except UnusableFileError:
            return None  # mid-swap, or not a config at all: the next poll sees
        if stamp(self.path) != now:
            return None
        key = (now, hashlib.sha256(data).digest())
        self._settled = self._settled + 1 if key == self._pending else 0
        self._pending = key
        swapped = self._loaded is None or now[0] != self._loaded[0]
        return Change(data=data, stamp=now, swapped=swapped, settled=self._settled)

    def loaded(self, change: Change) -> None:
        """``change`` was reloaded (applied or rejected): only the next change counts."""
        self._loaded, self._pending, self._settled = change.stamp, None, 0


def suspect_changes(running: Config, fresh: Config) -> list[str]:
    """What ``fresh`` takes away from the targets of ``running``, as a half-written file
    would: a target dropped, a lower maxReplicas, a metric gone."""
    found: list[str] = []
    kept = {target.key: target for target in fresh.targets}
    for target in running.targets:
        new = kept.get(target.key)
        if new is None:
            found.append(f"{target.key}: dropped")
            continue
        if new.spec.max_replicas < target.spec.max_replicas:
            found.append(f"{target.key}: maxReplicas {target.spec.max_replicas} -> "
                         f"{new.spec.max_replicas}")
        lost = [metric.name for metric in target.spec.metrics
                if metric not in new.spec.metrics]
        if lost:
            found.append(f"{target.key}: loses metric {', '.join(lost)}")
    return found
