"""The listener's bounds over real loopback sockets: how long and how many connections a
client can hold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from autoscaler.observability.http import Probes, bound_port, build_app, serve
from autoscaler.observability.metrics import DaemonMetrics

IDLE = 0.5
LIMIT = 4
PARTIAL = b"GET /healthz HTTP/1.1\r\nHost: autoscaler\r\n"
WHOLE = b"GET /healthz HTTP/1.1\r\nHost: autoscaler\r\nConnection: close\r\n\r\n"

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@pytest.fixture
async def port() -> AsyncIterator[int]:
    runner = await serve(build_app(Probes(), DaemonMetrics()), "127.0.0.1:0", limit=LIMIT,
                         idle_timeout=IDLE)
    try:
        yield bound_port(runner)
    finally:
        await runner.cleanup()


async def connect(port: int, sent: bytes = PARTIAL) -> Streams:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(sent)
    await writer.drain()
    return reader, writer


async def closed_after(reader: asyncio.StreamReader, *, within: float) -> float:
    """Seconds until the server closed the connection (its answer read and dropped)."""
    started = time.monotonic()
    async with asyncio.timeout(within):
        while await reader.read(4096):
            pass
    return time.monotonic() - started


async def test_a_partial_request_head_is_closed_after_the_idle_timeout(port: int) -> None:
    """A client that sends part of a request head and nothing more holds its connection
    for the idle timeout, no longer."""
    reader, writer = await connect(port)
    assert IDLE * 0.8 < await closed_after(reader, within=5) < IDLE + 1
    writer.close()


async def test_a_head_dripped_a_byte_at_a_time_is_closed_after_the_idle_timeout(
    port: int,
) -> None:
    """Bytes that do not complete a request do not push the timeout back."""
    _, writer = await connect(port, b"G")
    started = time.monotonic()
    with pytest.raises(ConnectionError):
        await drip(writer, PARTIAL[1:] * 10, every=0.05)
    assert time.monotonic() - started < IDLE + 1
    writer.close()


async def drip(writer: asyncio.StreamWriter, data: bytes, *, every: float) -> None:
    for byte in data:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(every)


async def test_at_the_cap_a_probe_takes_the_place_of_the_oldest_partial_request(
    port: int,
) -> None:
    """With the cap full of partial requests, a whole request is answered at once and the
    oldest partial one is closed to make room."""
    partial = [await connect(port) for _ in range(LIMIT)]
    await asyncio.sleep(0.05)
    reader, _ = await connect(port, WHOLE)
    async with asyncio.timeout(IDLE / 2):
        answer = await reader.read()
    assert answer.startswith(b"HTTP/1.1 200")
    assert await partial[0][0].read() == b""  # closed, before its idle timeout
    for _, writer in partial:
        writer.close()


async def test_at_the_cap_of_requests_in_flight_a_new_connection_waits_its_turn() -> None:
    """When every connection has sent a request, a new one is not accepted (no descriptor)
    until one of them ends; then it is served."""
    release = asyncio.Event()

    async def slow(_: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="done")

    app = web.Application()
    app.router.add_get("/healthz", slow)
    runner = await serve(app, "127.0.0.1:0", limit=LIMIT, idle_timeout=IDLE)
    try:
        port = bound_port(runner)
        busy = [await connect(port, WHOLE) for _ in range(LIMIT)]
        await asyncio.sleep(0.05)
        reader, _ = await connect(port, WHOLE)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await reader.read()
        release.set()
        async with asyncio.timeout(2):
            assert (await reader.read()).startswith(b"HTTP/1.1 200")
        for _, writer in busy:
            writer.close()
    finally:
        await runner.cleanup()
