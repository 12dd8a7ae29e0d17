"""A flood of connections that never finish a request, end to end: the real daemon at a low
descriptor limit, a real Prometheus, the simulated API server. The listener's fortune is its
own: scaling, its state file and /healthz go on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import socket
import threading
import time
import urllib.request
from pathlib import Path

from tests.e2e.conftest import Rig
from tests.e2e.harness import daemon, daemon_config, eventually
from tests.e2e.test_daemon import replicas

NOFILE = 256
"""The daemon's descriptor limit here (soft and hard); the flood holds more than that."""
FLOOD = 400
PARTIAL = b"GET /healthz HTTP/1.1\r\nHost: autoscaler\r\n"  # never the blank line


class Flood:
    """``size`` connections to ``port``, each sending a partial request head; any the
    daemon closes is opened again, until ``stop``."""

    def __init__(self, port: int, size: int) -> None:
        self.port, self.size = port, size
        self.opened = 0
        self.held = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _open(self, selector: selectors.BaseSelector) -> None:
        with contextlib.suppress(OSError):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=1)
            sock.sendall(PARTIAL)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            self.opened += 1

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            try:
                while not self._stop.is_set():
                    while len(selector.get_map()) < self.size and not self._stop.is_set():
                        self._open(selector)
                    self.held = len(selector.get_map())
                    for key, _ in selector.select(timeout=0.1):  # closed (or answered)
                        selector.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
                    time.sleep(0.005)  # a flood still, without taking a core from the daemon
            finally:
                for key in list(selector.get_map().values()):
                    key.fileobj.close()  # type: ignore[union-attr]


def healthz_seconds(port: int) -> float:
    """Seconds /healthz took to answer 200 on a new connection (inf: no answer in 5 s)."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return time.monotonic() - started if answer.status == 200 else float("inf")
    except OSError:
        return float("inf")


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_a_flood_of_partial_requests_neither_stops_scaling_nor_the_probes(
    rig: Rig, tmp_path: Path,
) -> None:
    """At 256 descriptors, 400 connections that never finish a request head, reopened as
    soon as they are closed: a scale-up (with its state write first) happens in the time it
    takes without the flood, /healthz answers on a new connection within a second, and the
    daemon never nears its limit. (Before issue 40: every pass failed, "Too many open
    files", and /healthz hung.)"""
    rig.load.demand = 200  # 2 pods at their target: hold
    text = daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port="__PORT__", state_file=tmp_path / "state")  # type: ignore[arg-type]
    prlimit = ("prlimit", f"--nofile={NOFILE}:{NOFILE}", "--")
    with daemon(text, tmp_path, prefix=prlimit) as proc:
        assert proc.process is not None
        await eventually(lambda: proc.target().get("lastOutcome") == "ok", timeout=30,
                         what="a first pass")
        at_rest = descriptors(proc.process.pid)
        with Flood(proc.port, FLOOD) as flood:
            await asyncio.sleep(3)
            peak = descriptors(proc.process.pid)
            probes = [healthz_seconds(proc.port)]
            rig.load.demand = 600
            asked = time.monotonic()
            while replicas(rig) != 6 and time.monotonic() < asked + 30:
                await asyncio.sleep(0.5)
                peak = max(peak, descriptors(proc.process.pid))
                probes.append(await asyncio.to_thread(healthz_seconds, proc.port))
            scaled_after = time.monotonic() - asked
            opened = flood.opened
        released = time.monotonic()
        for _ in range(200):
            if descriptors(proc.process.pid) <= at_rest + 2:
                break
            await asyncio.sleep(0.05)
        recovered = time.monotonic() - released
        print(f"flood: {opened} connections opened, daemon's descriptors at most {peak}; "
              f"2 -> {replicas(rig)} after {scaled_after:.1f}s; /healthz at most "
              f"{max(probes):.3f}s over {len(probes)} probes; descriptors back to "
              f"{at_rest} (+2) {recovered:.2f}s after the flood")
        assert opened > FLOOD, "the daemon never closed a partial request"
        assert replicas(rig) == 6, "no scale-up under the flood"
        assert max(probes) < 1.0
        assert peak < NOFILE * 3 // 4
        assert recovered < 2
        assert "Too many open files" not in proc.log_path.read_text()
