"""The files a config involves: the config file itself, and the files it names.

The config file must be a regular file of at most ``MAX_CONFIG_BYTES``. It is looked at
with ``stat`` before it is opened, opened with ``O_NONBLOCK`` and checked again with
``fstat`` (it may have been swapped in between), and read with a bounded read: a FIFO, a
device such as ``/dev/zero`` or a huge file is refused at once, never waited on or read
to the end.

The files a config names are checked when it is loaded, so a typo fails ``check``, the
start and a reload instead of every query: ``caFile``, ``bearerTokenFile``,
``basicAuth.passwordFile`` and ``kubeconfig`` must be readable regular files; ``stateFile``
may be missing (the daemon creates it), but a file already there must be a state file
(gzip data), since the daemon replaces it. Paths resolve as the daemon's own reads resolve
them: relative to the working directory, and ``kubeconfig`` as the Kubernetes client reads
it (``~`` expanded, several paths joined with ``:``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autoscaler.config.issues import Loc, Problem, quote

MAX_CONFIG_BYTES = 4 * 2**20
"""About 30,000 small targets (10,000 are 1.4 MiB): anything bigger is not a config."""

GZIP_MAGIC = b"\x1f\x8b"
"""How every state file starts (``autoscaler.snapshot.encode`` writes gzip-compressed JSON)."""

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
    try:
        os.close(open_regular(path))
    except UnusableFileError as problem:
        yield Problem(loc=loc, message=f"cannot read {quote(path)}: {problem}")


def _not_state(loc: Loc, path: str) -> Iterator[Problem]:
    """A state file may be missing; one that exists must start like a state file."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return  # the daemon creates it (and its directory) on its first save
    except OSError:
        pass  # open_regular says why
    try:
        head = _head(path)
    except UnusableFileError as problem:
        yield Problem(loc=loc, message=f"cannot use {quote(path)} as the state file: {problem}")
        return
    if head != GZIP_MAGIC:
        what = "it is empty" if not head else "not gzip data"
        yield Problem(loc=loc, message=f"{quote(path)} is not a state file ({what}) and the "
                      "daemon would overwrite it: point stateFile elsewhere")


def _head(path: str) -> bytes:
    descriptor = open_regular(path)
    try:
        return os.read(descriptor, len(GZIP_MAGIC))
    except OSError as error:
        raise UnusableFileError(error.strerror or str(error)) from None
    finally:
        os.close(descriptor)
