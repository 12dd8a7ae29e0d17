"""A loopback TCP port in a machine without a network that reaches one on the host.

A machine booted with ``--private-network`` has only its own loopback, so nothing it binds
is seen outside and no port of the host's is taken by it. The host's servers (the simulated
API server, Prometheus) are reached through unix sockets in a directory both see: inside,
``python -m tests.shipping.relay --ready FILE PORT=SOCKET...`` listens on 127.0.0.1:PORT and
carries each connection to SOCKET; on the host, ``forwarding(SOCKET, PORT)`` carries each
connection on SOCKET to 127.0.0.1:PORT. Bytes pass as they are (TLS included), as through a
Service's virtual IP; the address a client dials is the same on both sides.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then pass the EOF on (an HTTP client may half-close)."""
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _join(accepted: Streams, dial: Callable[[], Awaitable[Streams]]) -> None:
    reader, writer = accepted
    try:
        other_reader, other_writer = await dial()
    except OSError:
        writer.close()
        return
    try:
        await asyncio.gather(_pipe(reader, other_writer), _pipe(other_reader, writer))
    finally:
        for end in (writer, other_writer):
            end.close()


@contextlib.asynccontextmanager
async def forwarding(socket: Path, port: int) -> AsyncIterator[None]:
    """While the block runs, each connection to ``socket`` reaches 127.0.0.1:``port``."""
    joins: set[asyncio.Task[None]] = set()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        joins.add(task)
        try:
            await _join((reader, writer), lambda: asyncio.open_connection("127.0.0.1", port))
        finally:
            joins.discard(task)

    server = await asyncio.start_unix_server(accept, path=str(socket))
    os.chmod(socket, 0o666)
    try:
        yield
    finally:
        server.close()
        for task in list(joins):
            task.cancel()
        await asyncio.gather(*joins, return_exceptions=True)
        os.unlink(socket)


async def _listen(pairs: list[tuple[int, str]], ready: Path) -> None:
    servers = []
    for port, socket in pairs:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         socket: str = socket) -> None:
            await _join((reader, writer), lambda: asyncio.open_unix_connection(socket))

        servers.append(await asyncio.start_server(accept, "127.0.0.1", port))
    staged = ready.with_name(ready.name + ".tmp")  # renamed: never read half-written
    staged.write_text("".join(f"127.0.0.1:{port} -> {socket}\n" for port, socket in pairs))
    staged.rename(ready)
    await asyncio.Event().wait()  # until killed with the machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ready", type=Path, required=True,
                        help="written once every port listens")
    parser.add_argument("pairs", nargs="+", metavar="PORT=SOCKET")
    args = parser.parse_args()
    pairs = [(int(port), socket) for port, _, socket in
             (pair.partition("=") for pair in args.pairs)]
    asyncio.run(_listen(pairs, args.ready))


if __name__ == "__main__":
    main()
