"""Waiting for what happens over real HTTP, bounded in time."""

import asyncio
from collections.abc import Callable


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll a condition another party (the server, a watch task) makes true; fail after
    ``timeout``. Polling, because the condition lives in a process we do not own."""
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - nothing to await on: the state is remote
            await asyncio.sleep(0.01)
