"""One process at a time on a state file: an exclusive lock on a lock file of ours beside it.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``<stateFile>.lock``, held for the life of the
process: the kernel drops it when the process dies however it dies (SIGKILL, OOM), so a
crash never leaves a store nobody may take. The state file itself cannot carry the lock: it
is replaced by a rename at every save, and a lock belongs to the file it was taken on. On
NFS, Linux takes ``flock`` as a POSIX lock on the whole file, which the server arbitrates
between hosts (NFSv4, or v3 with lockd); a mount without locking answers ENOLCK, and the
daemon refuses to start rather than run unguarded.

The lock file is ours alone: created whole (written aside, then linked into place, so it is
never seen empty) and starting with ``MARK``; a file at its path that is not (someone else's,
a link, a directory) is refused and left as it is. After the mark, the holder writes who it
is (pid and host), which a refused process names. It is never removed (removing a lock
file while another process opens it would let two hold a lock each, on two files); before
each save the holder checks that the path still holds the very file it locked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import tempfile
from pathlib import Path

from autoscaler.adapters.local_state import make_directory
from autoscaler.errors import StateInUseError, StateNotOursError, StateUnavailableError

MARK = b"autoscaler state lock\n"
_OPEN_FLAGS = os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)


def lock_path(state_file: Path) -> Path:
    return state_file.with_name(f"{state_file.name}.lock")


class StoreLock:
    """The lock on one state file, held from ``take`` until the process ends (or ``close``)."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor: int | None = descriptor
        info = os.fstat(descriptor)
        self._identity = (info.st_dev, info.st_ino)

    @classmethod
    def take(cls, state_file: Path) -> StoreLock:
        """Lock ``state_file`` for this process. ``StateInUseError`` naming the holder if
        another process has it; ``StateNotOursError`` if the lock file's path holds
        something not ours; ``StateUnavailableError`` if the file system cannot lock."""
        path = lock_path(state_file)
        try:
            descriptor = _open(path)
        except OSError as error:  # a directory we may not write: no lock, no start
            raise StateUnavailableError(
                f"cannot create the state file's lock file {path}: {error.strerror}") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(descriptor)
            os.close(descriptor)
            raise StateInUseError(
                f"state file {state_file} is in use by another autoscaler ({holder}; it holds "
                f"the lock on {path}): two daemons never share a store (give each its own "
                "stateFile)") from None
        except OSError as error:
            os.close(descriptor)
            raise StateUnavailableError(
                f"cannot lock {path} ({error.strerror}): without the lock two daemons could "
                "share the state file (on NFS, mount with locking)") from None
        lock = cls(path, descriptor)
        lock._say_holder()
        return lock

    @property
    def held(self) -> bool:
        """The lock is ours and the lock file at its path is the one we locked."""
        if self._descriptor is None:
            return False
        try:
            info = os.lstat(self.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._identity

    def close(self) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)  # releases the lock

    def _say_holder(self) -> None:
        assert self._descriptor is not None
        line = f"pid {os.getpid()} on {socket.gethostname()}\n".encode()
        with contextlib.suppress(OSError):  # who holds it is only said, never relied on
            os.pwrite(self._descriptor, line, len(MARK))
            os.ftruncate(self._descriptor, len(MARK) + len(line))


def _open(path: Path) -> int:
    """The lock file, created whole if missing; refused unless it is ours."""
    make_directory(path.parent)
    _create(path)
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise StateNotOursError(str(path), "it is a symbolic link, not the state file's "
                                    "lock file") from None
        raise StateNotOursError(str(path), f"cannot open it as the state file's lock file "
                                f"({error.strerror})") from None
    try:
        info = os.fstat(descriptor)
        head = os.pread(descriptor, len(MARK), 0) if stat.S_ISREG(info.st_mode) else b""
    except OSError:
        head = b""
    if head != MARK:
        os.close(descriptor)
        raise StateNotOursError(str(path), "it is not the state file's lock file of this "
                                "daemon")
    return descriptor


def _create(path: Path) -> None:
    """Put a lock file of ours at ``path`` unless something is there already."""
    if os.path.lexists(path):
        return
    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        try:
            os.write(fd, MARK)
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # another process was first: use its
            os.link(staged, path)
    finally:
        Path(staged).unlink(missing_ok=True)


def _holder(descriptor: int) -> str:
    try:
        said = os.pread(descriptor, 200, len(MARK)).decode(errors="replace").strip()
    except OSError:
        said = ""
    return said.splitlines()[0] if said else "a process that has not said who it is yet"
