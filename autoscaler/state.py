"""The per-target history that stabilization windows and policies depend on, kept across restarts.

Upstream keeps recommendations and scale events in controller memory and loses them when
kube-controller-manager restarts, so the next pass may scale down early. We serialize them
(``encode``/``decode``) and keep them in a ``StateStore``: a file under systemd, a ConfigMap
in the cluster (``autoscaler.adapters.kube.state``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from autoscaler.algorithm import History, Recommendation, ScaleEvent

FORMAT_VERSION = 1


class StateStore(Protocol):
    async def load(self) -> dict[str, History]: ...

    async def save(self, histories: Mapping[str, History]) -> None: ...


def encode(histories: Mapping[str, History]) -> bytes:
    """Compact, gzip-compressed JSON: 10,000 targets must fit a 1 MiB ConfigMap."""
    body = {
        "version": FORMAT_VERSION,
        "targets": {key: _history_to_json(h) for key, h in sorted(histories.items())},
    }
    return gzip.compress(json.dumps(body, separators=(",", ":")).encode(), mtime=0)


def decode(data: bytes) -> dict[str, History]:
    """The inverse of ``encode``; raises ``ValueError`` on anything it does not recognise."""
    try:
        body = json.loads(gzip.decompress(data))
    except (OSError, EOFError, json.JSONDecodeError) as error:
        raise ValueError(f"state is not gzip-compressed JSON: {error}") from error
    if not isinstance(body, dict) or body.get("version") != FORMAT_VERSION:
        raise ValueError(f"state has an unknown format (expected version {FORMAT_VERSION})")
    targets = body.get("targets")
    if not isinstance(targets, dict):
        raise ValueError("state has no 'targets' object")
    return {str(key): _history_from_json(value) for key, value in targets.items()}


def _history_to_json(history: History) -> dict[str, Any]:
    return {
        "r": [[r.replicas, r.timestamp] for r in history.recommendations],
        "u": [[e.change, e.timestamp, e.outdated] for e in history.scale_up_events],
        "d": [[e.change, e.timestamp, e.outdated] for e in history.scale_down_events],
    }


def _history_from_json(value: Any) -> History:
    try:
        return History(
            recommendations=tuple(
                Recommendation(replicas=int(r), timestamp=float(t)) for r, t in value["r"]
            ),
            scale_up_events=tuple(_event(e) for e in value["u"]),
            scale_down_events=tuple(_event(e) for e in value["d"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"state has a malformed history: {error!r}") from error


def _event(raw: Any) -> ScaleEvent:
    change, timestamp, outdated = raw
    return ScaleEvent(change=int(change), timestamp=float(timestamp), outdated=bool(outdated))


class FileStateStore:
    """A state file, replaced atomically (write to a temporary file, fsync, rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def load(self) -> dict[str, History]:
        try:
            data = await asyncio.to_thread(self.path.read_bytes)
        except FileNotFoundError:
            return {}
        return decode(data)

    async def save(self, histories: Mapping[str, History]) -> None:
        data = encode(histories)
        await asyncio.to_thread(self._write, data)

    def _write(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            Path(tmp).replace(self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class MemoryStateStore:
    """No persistence (``stateFile`` unset outside a cluster): upstream's behaviour."""

    def __init__(self) -> None:
        self._data: bytes | None = None

    async def load(self) -> dict[str, History]:
        return decode(self._data) if self._data else {}

    async def save(self, histories: Mapping[str, History]) -> None:
        self._data = encode(histories)
