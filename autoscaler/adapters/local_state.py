"""The history kept by this process's own means: a state file (under systemd), or memory
(``stateFile`` unset outside a cluster, as upstream keeps it); and a dry run's view of the
live daemon's store (``ReadOnceStore``).

Both implement the runtime's ``StateStore``. ``load`` tells the outcomes apart: a snapshot,
``None`` (proven absent: no file), or an exception: ``StateUnavailableError`` (transient,
retry; nothing may be written meanwhile), ``StateSetAsideError`` (a store of ours that
cannot be decoded; the file was moved aside, never overwritten, and the caller starts fresh
and says so loudly) or ``StateNotOursError`` (not a store of ours: left as it is).

The file store is one process's at a time: the daemon locks it (``adapters/store_lock.py``)
and every save checks the lock is still its own. It touches only its own files
(``autoscaler.snapshot.read_store`` says which they are): it never follows a link, never
sets aside or replaces a file that is not ours, and checks again right before each replace
that the file there is the one it read or wrote last (else that it is ours). Its directory
is created mode 0700, its file 0600; the file is replaced atomically and durably. ``check``
applies the rule before the daemon starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from autoscaler.errors import StateSetAsideError, StateUnavailableError
from autoscaler.snapshot import Snapshot, StateFormatError, decode, read_store, set_aside_name

if TYPE_CHECKING:
    from autoscaler.adapters.store_lock import StoreLock
    from autoscaler.runtime.ports import StateStore


class FileStateStore:
    """A state file, replaced atomically and durably: write a temporary file, fsync it,
    rename it over the old one, fsync the directory (the rename itself must survive a
    power loss)."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time,
                 read_only: bool = False, lock: StoreLock | None = None) -> None:
        self.path = path
        self._clock = clock
        self._read_only = read_only
        """Never move the file (``plan`` reads the daemon's file): undecodable is an error."""
        self._lock = lock
        """The daemon's lock on this file (``adapters/store_lock.py``): no save without it."""
        self._own: tuple[int, int] | None = None
        """The file this store last read or wrote (device, inode): replacing it needs no
        second look."""

    @property
    def description(self) -> str:
        return f"state file {self.path}"

    def check(self) -> None:
        """``StateNotOursError`` if the path holds something that is not a store of ours
        (before anything starts); a store of ours, damaged or not, passes."""
        read_store(self.path, whole=False)

    async def load(self) -> Snapshot | None:
        return await asyncio.to_thread(self._load)

    async def save(self, data: bytes) -> None:
        await asyncio.to_thread(self._write, data)

    def _load(self) -> Snapshot | None:
        try:
            stored = read_store(self.path)
        except StateFormatError as error:  # ours, but over the size limit
            self._set_aside(str(error))
        if stored is None:
            return None
        self._own = stored.identity
        try:
            return decode(stored.data)
        except StateFormatError as error:
            self._set_aside(str(error))

    def _set_aside(self, problem: str) -> NoReturn:
        """Keep an undecodable store of ours under another name (a new one: never over a
        file already there)."""
        if self._read_only:
            raise StateUnavailableError(f"{self.description} cannot be decoded: {problem}")
        kept = self.path.with_name(set_aside_name(self.path.name, self._clock()))
        try:
            os.link(self.path, kept, follow_symlinks=False)
            self.path.unlink()
        except OSError as error:
            # Never overwrite what we cannot move: the caller retries and stays read-only.
            raise StateUnavailableError(
                f"{self.description} cannot be decoded ({problem}) and cannot be moved aside "
                f"to {kept}: {error.strerror}") from None
        self._own = None
        raise StateSetAsideError(f"{self.description} cannot be decoded: {problem}",
                                 kept_as=str(kept))

    def _write(self, data: bytes) -> None:
        if self._read_only:
            raise StateUnavailableError(f"{self.description} is only read here")
        if self._lock is not None and not self._lock.held:
            raise StateUnavailableError(
                f"{self.description}: the lock file {self._lock.path} was removed or replaced "
                "since this process locked it, so another may be using the file: not writing")
        directory = self.path.parent
        make_directory(directory)
        self._may_replace()
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                info = os.fstat(handle.fileno())
            Path(tmp).replace(self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._own = (info.st_dev, info.st_ino)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _may_replace(self) -> None:
        """Raise unless what is at the path now is nothing, the file this store read or
        wrote last, or a store of ours (``StateNotOursError``: someone put a file there)."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return
        if (info.st_dev, info.st_ino) != self._own:
            read_store(self.path, whole=False)


def make_directory(directory: Path) -> None:
    """Create ``directory`` and any missing parent, each mode 0700 (the history is ours
    alone); an existing one is left as it is."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        if directory.parent == directory:
            break
        directory = directory.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by someone else
            path.mkdir(mode=0o700)


class MemoryStateStore:
    """No persistence (``stateFile`` unset outside a cluster): upstream's behaviour."""

    description = "memory (not persisted)"

    def __init__(self) -> None:
        self._data: bytes | None = None

    async def load(self) -> Snapshot | None:
        return decode(self._data) if self._data else None

    async def save(self, data: bytes) -> None:
        self._data = data


class ReadOnceStore:
    """A dry run's store: the live daemon's store read once (never set aside, never
    written), then the dry run's own history in memory only."""

    def __init__(self, live: StateStore) -> None:
        self._live: StateStore | None = live
        self._memory = MemoryStateStore()
        self.description = f"{live.description}, read once (a dry run keeps its history in memory)"

    async def load(self) -> Snapshot | None:
        live, self._live = self._live, None
        if live is None:
            return await self._memory.load()
        try:
            return await live.load()
        except BaseException:
            self._live = live  # not read yet: the next try reads it again
            raise

    async def save(self, data: bytes) -> None:
        await self._memory.save(data)
