"""The files a config involves (the config file itself, and the files it names), and the
one rule for every file a command writes (``replacing``).

The config file must be a regular file of at most ``MAX_CONFIG_BYTES``. It is looked at
with ``stat`` before it is opened, opened with ``O_NONBLOCK`` and checked again with
``fstat`` (it may have been swapped in between), and read with a bounded read: a FIFO, a
device such as ``/dev/zero`` or a huge file is refused at once, never waited on or read
to the end.

The files a config names are checked when it is loaded, so a typo fails ``check``, the
start and a reload instead of every query: ``caFile``, ``bearerTokenFile``,
``basicAuth.passwordFile`` and ``kubeconfig`` must be readable regular files; ``stateFile``
may be missing (the daemon creates it), but a file already there must be a store of ours
(``autoscaler.snapshot.read_store``: the same rule the daemon applies at start, whether the
path comes from here or from ``--state-file``). Paths resolve as the daemon's own reads resolve
them: relative to the working directory, and ``kubeconfig`` as the Kubernetes client reads
it (``~`` expanded, several paths joined with ``:``).

A command writes a file (``--out`` of ``import-hpa``, ``import-keda``, ``simulate``) only
where nothing is yet, or over a file it recognises as its own output by its first bytes
(``Recognise``), replaced atomically; a FIFO, a terminal or ``/dev/null`` is written in
place. Anything else (someone else's file, a link to a file, a directory, another device)
is refused with ``NotOursError`` and left exactly as it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from autoscaler.config.issues import Loc, Problem, quote
from autoscaler.errors import AutoscalerError, StateNotOursError
from autoscaler.snapshot import read_store

MAX_CONFIG_BYTES = 8 * 2**20
"""About 60,000 small targets (10,000 are 1.4 MiB; 84,000 as one inline table each): a ring
of dynamic sharding holds the whole fleet's targets in one config. Anything bigger is not a
config."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}
_CREDENTIALS: tuple[Loc, ...] = (("caFile",), ("bearerTokenFile",), ("basicAuth", "passwordFile"))


class UnusableFileError(Exception):
    """Why a file cannot be used, as a phrase ("No such file or directory", "a FIFO")."""


def read_config_file(path: Path) -> bytes:
    """The file's bytes, or ``UnusableFileError`` if it is not a regular file of a config's size."""
    descriptor = open_regular(path)
    try:
        size = os.fstat(descriptor).st_size
        if size > MAX_CONFIG_BYTES:
            raise UnusableFileError(_too_large(size))
        data = _read_at_most(descriptor, MAX_CONFIG_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_CONFIG_BYTES:  # it grew after fstat
        raise UnusableFileError(_too_large(len(data)))
    return data


def open_regular(path: Path | str) -> int:
    """A read-only descriptor for a regular file; ``UnusableFileError`` for anything else."""
    try:
        _require_regular(os.stat(path).st_mode)
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        raise UnusableFileError(error.strerror or str(error)) from None
    try:
        _require_regular(os.fstat(descriptor).st_mode)
    except UnusableFileError:
        os.close(descriptor)
        raise
    return descriptor


def _require_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "a special file")
        raise UnusableFileError(f"not a regular file: {kind}")


def _read_at_most(descriptor: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(descriptor, min(remaining, 2**20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _too_large(size: int) -> str:
    return (f"too large for a config: {size / 2**20:.1f} MiB "
            f"(at most {MAX_CONFIG_BYTES // 2**20} MiB)")


def named_file_problems(document: dict[str, Any]) -> Iterator[Problem]:
    """A problem for each file the (raw) document names that the daemon could not use."""
    prometheus = document.get("prometheus")
    servers = prometheus.get("servers") if isinstance(prometheus, dict) else None
    server_locs: list[Loc] = [("prometheus",)] + [
        ("prometheus", "servers", name) for name in (servers if isinstance(servers, dict) else ())]
    for server in server_locs:
        for key in _CREDENTIALS:
            loc = (*server, *key)
            text = _path_at(document, loc)
            if text is not None:
                yield from _unreadable(loc, text)
    kubeconfig = _path_at(document, ("kubernetes", "kubeconfig"))
    for part in (kubeconfig or "").split(os.pathsep):
        if part:  # the client's rule, as for $KUBECONFIG
            yield from _unreadable(("kubernetes", "kubeconfig"), os.path.expanduser(part))
    state = _path_at(document, ("daemon", "stateFile"))
    if state is not None:
        yield from _not_state(("daemon", "stateFile"), state)


def _path_at(document: dict[str, Any], loc: Loc) -> str | None:
    """The path at ``loc`` if it is a non-empty string (other values are the schema's)."""
    value: Any = document
    for part in loc:
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value.strip() else None


def _unreadable(loc: Loc, path: str) -> Iterator[Problem]:
    problem = unreadable(path)
    if problem is not None:
        yield Problem(loc=loc, message=f"cannot read {quote(path)}: {problem}")


def unreadable(path: str) -> str | None:
    """Why ``path`` is not a readable regular file (``None``: it is)."""
    try:
        os.close(open_regular(path))
    except UnusableFileError as problem:
        return str(problem)
    return None


def _not_state(loc: Loc, path: str) -> Iterator[Problem]:
    """A state file may be missing; one that exists must be a store of ours."""
    try:
        read_store(Path(path), whole=False)
    except StateNotOursError as error:
        yield Problem(loc=loc, message=f"cannot use {quote(path)} as the state file: "
                      f"{error.why}; it is left as it is: point stateFile elsewhere")
    except AutoscalerError:
        pass  # cannot be read now (an I/O error): the daemon retries; not the config's fault


# --- files the commands write ----------------------------------------------------------------

Recognise = Callable[[bytes], bool]
"""Whether a file's first ``HEAD_BYTES`` are the output of the command about to replace it."""
HEAD_BYTES = 4096


class NotOursError(OSError):
    """The path holds something the command did not write: it is left as it is."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(errno.EEXIST, f"{why}; it is left as it is (remove it, or choose "
                         "another path)", str(path))


@contextlib.contextmanager
def replacing(path: Path, *, ours: Recognise, binary: bool = False) -> Iterator[IO[Any]]:
    """A handle whose contents take the place of ``path`` when the block ends, if ``path``
    is nothing yet or a file ``ours`` recognises (checked before and again right before the
    rename); a stream (a FIFO, a terminal, ``/dev/null``) is written in place. Else
    ``NotOursError`` before anything is written. A failed block leaves the old file."""
    mode = "wb" if binary else "w"
    text: dict[str, Any] = {} if binary else {"encoding": "utf-8", "newline": ""}
    before = _replaceable(path, ours)
    if before is _STREAM:
        with open(path, mode, **text) as stream:  # a device: written in place
            yield stream
        return
    keep_mode = before.st_mode & 0o777 if before is not None else 0o666 & ~_umask()
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, mode, **text) as handle:
            yield handle
        os.chmod(temporary, keep_mode)
        now = _replaceable(path, ours)
        if now is _STREAM or _identity(now) != _identity(before):
            raise NotOursError(path, "it changed while it was being written")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def check_replaceable(path: Path, *, ours: Recognise) -> None:
    """``NotOursError`` now (before any work) if ``replacing`` would refuse ``path``."""
    _replaceable(path, ours)


_STREAM = os.stat_result((0,) * 10)
"""``_replaceable``'s answer for a path to write in place."""


def _replaceable(path: Path, ours: Recognise) -> os.stat_result | None:
    """What is at ``path`` if the command may take its place (``None``: nothing), or
    ``_STREAM``; ``NotOursError`` for anything else."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            if _is_stream(os.stat(path)):  # /dev/stdout and the like
                return _STREAM
        except OSError:
            pass
        raise NotOursError(path, "it is a symbolic link, and the commands write through no "
                           "link (give the file's own path)")
    if _is_stream(info):
        return _STREAM
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(info.st_mode):
        raise NotOursError(path, f"it is {_KINDS.get(stat.S_IFMT(info.st_mode), 'a special file')}")
    descriptor = os.open(path, _OPEN_FLAGS | os.O_NOFOLLOW)
    try:
        head = _read_at_most(descriptor, HEAD_BYTES)
    finally:
        os.close(descriptor)
    if not ours(head):
        raise NotOursError(path, "it is not a file this command wrote")
    return info


def _is_stream(info: os.stat_result) -> bool:
    """A FIFO, a terminal or /dev/null: written in place, never replaced."""
    if stat.S_ISFIFO(info.st_mode):
        return True
    if not stat.S_ISCHR(info.st_mode):
        return False
    return os.major(info.st_rdev) in _TERMINAL_MAJORS or info.st_rdev == _null_device()


_TERMINAL_MAJORS = frozenset({4, 5, 136, 137, 138, 139, 140, 141, 142, 143})
"""Linux's character-device majors of terminals: tty, the console, pseudo-terminals."""


def _null_device() -> int:
    try:
        return os.stat("/dev/null").st_rdev
    except OSError:
        return -1


def _identity(info: os.stat_result | None) -> tuple[int, int] | None:
    return None if info is None else (info.st_dev, info.st_ino)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
