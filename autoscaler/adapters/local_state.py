"""The history kept by this process's own means: a state file (under systemd), or memory
(``stateFile`` unset outside a cluster, as upstream keeps it).

Both implement the runtime's ``StateStore``. ``load`` tells three outcomes apart: a
snapshot, ``None`` (proven absent: no file), or an exception: ``StateUnavailableError``
(transient, retry; nothing may be written meanwhile) or ``StateSetAsideError``
(undecodable; the file was moved aside, never overwritten, and the caller starts fresh and
says so loudly). The file is replaced atomically and durably.
"""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from autoscaler.errors import StateSetAsideError, StateUnavailableError
from autoscaler.snapshot import (
    MAX_STORED_BYTES,
    Snapshot,
    StateFormatError,
    decode,
    set_aside_name,
)


class FileStateStore:
    """A state file, replaced atomically and durably: write a temporary file, fsync it,
    rename it over the old one, fsync the directory (the rename itself must survive a
    power loss)."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time,
                 read_only: bool = False) -> None:
        self.path = path
        self._clock = clock
        self._read_only = read_only
        """Never move the file (``plan`` reads the daemon's file): undecodable is an error."""

    @property
    def description(self) -> str:
        return f"state file {self.path}"

    async def load(self) -> Snapshot | None:
        return await asyncio.to_thread(self._load)

    async def save(self, data: bytes) -> None:
        await asyncio.to_thread(self._write, data)

    def _load(self) -> Snapshot | None:
        try:
            return decode(self._read())
        except FileNotFoundError:
            return None
        except (_Unreadable, StateFormatError) as error:
            self._set_aside(str(error))

    def _read(self) -> bytes:
        """The file's bytes, bounded; a non-regular or unreadable file is ``_Unreadable``."""
        try:
            # O_NONBLOCK: a FIFO put in its place must not block the daemon.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise
        except (PermissionError, IsADirectoryError) as error:
            raise _Unreadable(f"cannot read it: {error.strerror}") from None
        except OSError as error:
            raise StateUnavailableError(f"cannot open {self.path}: {error.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _Unreadable("it is not a regular file")
            if info.st_size > MAX_STORED_BYTES:
                raise _Unreadable(f"it is {info.st_size} bytes, over the limit of "
                                  f"{MAX_STORED_BYTES // (1024 * 1024)} MiB")
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read(MAX_STORED_BYTES + 1)
            if len(data) > MAX_STORED_BYTES:  # it grew while we read it
                raise _Unreadable(
                    f"it is over the limit of {MAX_STORED_BYTES // (1024 * 1024)} MiB")
            return data
        except PermissionError as error:
            raise _Unreadable(f"cannot read it: {error.strerror}") from None
        except OSError as error:  # EIO and the like: maybe not for long
            raise StateUnavailableError(f"cannot read {self.path}: {error.strerror}") from None
        finally:
            os.close(fd)

    def _set_aside(self, problem: str) -> NoReturn:
        if self._read_only:
            raise StateUnavailableError(f"{self.description} cannot be decoded: {problem}")
        kept = self.path.with_name(set_aside_name(self.path.name, self._clock()))
        try:
            self.path.rename(kept)
        except OSError as error:
            # Never overwrite what we cannot move: the caller retries and stays read-only.
            raise StateUnavailableError(
                f"{self.description} cannot be decoded ({problem}) and cannot be moved aside "
                f"to {kept}: {error.strerror}") from None
        raise StateSetAsideError(f"{self.description} cannot be decoded: {problem}",
                            kept_as=str(kept))

    def _write(self, data: bytes) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            Path(tmp).replace(self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class _Unreadable(Exception):  # noqa: N818 - private signal: the file is there but unusable
    pass


class MemoryStateStore:
    """No persistence (``stateFile`` unset outside a cluster): upstream's behaviour."""

    description = "memory (not persisted)"

    def __init__(self) -> None:
        self._data: bytes | None = None

    async def load(self) -> Snapshot | None:
        return decode(self._data) if self._data else None

    async def save(self, data: bytes) -> None:
        self._data = data
