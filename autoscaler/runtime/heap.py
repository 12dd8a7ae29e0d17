"""The cyclic garbage collector: paused around reconcile passes, tuned once the caches
hold their first full LIST; large blocks handed back to the kernel as they are freed, and the
C heap's free pages after each pass.

A pass keeps what it builds alive until it ends (both answers indexed by pod, every target's
samples and decision), and every young collection during it walks all of that only to find
it alive; at its end reference counting frees nearly all of it. So no cyclic collection runs
while a pass does; the collections owed resume after it, over what is left. Measured by
bench/daemon_scale.py at 1,000 targets, 7 alternating run pairs: fetching the metrics -11 ms
median, ~7 ms less CPU a pass (~5 %).
"""

from __future__ import annotations

import ctypes
import gc
import platform
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _CollectorPause:
    """Passes may overlap: the collector resumes when the last one ends, if it was on."""

    def __init__(self) -> None:
        self.depth = 0
        self.resume = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self.depth == 0:
            self.resume = gc.isenabled()
            gc.disable()
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0:
                if self.resume:
                    gc.enable()
                free_pages.hand_back()


collector_paused = _CollectorPause()
"""``with collector_paused(): ...`` around a pass."""


def settle_heap() -> None:
    """Once the caches hold their first full LIST: move everything alive now (modules, the
    caches) out of the collector's reach and make young collections rarer.

    A pass allocates a few hundred thousand short-lived objects at 10,000 targets (JSON
    answers, samples, decisions); with the default thresholds each of its ~hundreds of
    collections also walks the long-lived caches. Measured by bench/daemon_scale.py at 1,000
    targets: a pass takes ~40 % less time. Garbage is still collected, only in larger steps.
    """
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    return_large_blocks()
    free_pages.start()


_M_MMAP_THRESHOLD = -3
LARGE_BLOCK = 1 << 20
"""Bytes from which a block is mapped on its own and unmapped when freed."""


def _glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc and its symbols can be searched; else None."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def return_large_blocks() -> None:
    """Blocks of ``LARGE_BLOCK`` or more (an answer's bytes, its text) are mapped and
    unmapped on their own (glibc: a fixed ``M_MMAP_THRESHOLD``).

    glibc raises that threshold to the size of each large block freed, up to 32 MiB: after
    the first answer near maxResponseBytes, the next ones came from the Prometheus worker
    threads' arenas, which kept their freed tops. With 16 MB answers of garbage on three
    targets the daemon stayed 97 MB above its RSS at rest; 1 MB with the threshold fixed
    (issue 40). Other C libraries: nothing to do.
    """
    libc = _glibc()
    if libc is None:
        return
    try:
        libc.mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK)
    except AttributeError:  # no symbol table to search: keep the defaults
        return


class _FreePages:
    """glibc's ``malloc_trim(0)`` once the last pass in flight ends, in a thread of its own.

    glibc hands memory back to the kernel only from the top of each heap, and a pass frees
    most of what it built in the middle of them (blocks of 512 bytes to 1 MiB: the large
    dicts and lists of an answer indexed by pod, watch events, /metrics and /status pieces).
    At 10,000 targets a replica kept 49-57 MB of such free memory (glibc's ``mallinfo2``);
    ``malloc_trim(0)`` gave back 35-47 MB of RSS. It walks the free blocks (~10 ms on a
    130 MB heap, ~30 ms when it returns 100 MB); ctypes lets go of the GIL, so a thread runs
    it beside the loop. A daemon thread: the exit never waits for it (``commands/run.py``
    warns of any other thread left at exit). One at a time; none before the caches settle;
    other C libraries: nothing to do (as for ``return_large_blocks``).
    """

    def __init__(self) -> None:
        self._trim: Callable[[int], int] | None = None
        self._running: threading.Thread | None = None
        self.handed_back = 0
        """Trims started: the tests read it."""

    def start(self) -> None:
        libc = _glibc()
        if libc is None or self._trim is not None:
            return
        try:
            self._trim = libc.malloc_trim
        except AttributeError:
            return

    def hand_back(self) -> None:
        if self._trim is None or (self._running is not None and self._running.is_alive()):
            return
        self.handed_back += 1
        self._running = threading.Thread(target=self._trim, args=(0,), name="free-pages",
                                         daemon=True)
        self._running.start()


free_pages = _FreePages()
"""Started by ``settle_heap``; ``collector_paused`` hands pages back after each pass."""
