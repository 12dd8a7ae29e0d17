"""End-to-end rig: the daemon as a user starts it, a real Prometheus, the simulated cluster.

``LoadModel`` plays the workload: a total demand (requests/s) is spread evenly over the
Ready pods of a deployment in the simulated API server and exported per pod as
``app_load{namespace, pod}`` for Prometheus to scrape, so scaling changes the per-pod load
as it would in a real service. ``DaemonProcess`` runs ``python -m autoscaler run`` as a
subprocess with a generated config, reads ``/status`` and stops it with SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.sim.apiserver import SimApiServer
from tests.sim.prometheus import MetricsExporter, free_port


def is_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@dataclass
class LoadModel:
    api: SimApiServer
    exporter: MetricsExporter
    namespace: str = "default"
    selector: str = "app=web"
    demand: float = 0.0
    noise: Callable[[], float] = field(default=lambda: 0.0)
    _exported: set[str] = field(default_factory=set)

    def ready_pods(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.api.pods(self.namespace, self.selector)
                if is_ready(p)]

    def update(self) -> None:
        ready = self.ready_pods()
        per_pod = self.demand / len(ready) if ready else 0.0
        for name in ready:
            value = max(0.0, per_pod * (1 + self.noise()))
            self.exporter.set_gauge("app_load", {"namespace": self.namespace, "pod": name}, value)
        for gone in self._exported - set(ready):
            self.exporter.remove("app_load", {"namespace": self.namespace, "pod": gone})
        self._exported = set(ready)

    async def run(self, interval: float = 0.25) -> None:
        while True:
            self.update()
            await asyncio.sleep(interval)


def daemon_config(
    *, prometheus_url: str, kubeconfig: Path, listen_port: int, state_file: Path,
    target_per_pod: int = 100, max_replicas: int = 10, min_replicas: int = 1,
    downscale: str = "6s", behavior: str = "", extra_daemon: str = "",
) -> str:
    return f"""
[daemon]
syncPeriod = "1s"
downscaleStabilization = "{downscale}"
listenAddress = "127.0.0.1:{listen_port}"
stateFile = "{state_file}"
logFormat = "json"
logLevel = "info"
{extra_daemon}

[prometheus]
url = "{prometheus_url}"
timeout = "2s"

[kubernetes]
kubeconfig = "{kubeconfig}"
requestTimeout = "3s"

[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
minReplicas = {min_replicas}
maxReplicas = {max_replicas}
{behavior}

[[autoscaler.metrics]]
type = "Pods"
pods = {{ metric = {{ name = "app_load" }}, target = {{ type = "AverageValue", averageValue = "{target_per_pod}" }}, query = 'app_load{{${{pod_selector}}}}', window = "1s" }}
"""


class DaemonProcess:
    """``python -m autoscaler run`` in a subprocess; logs go to a file the test can read."""

    def __init__(self, config: Path, *, port: int, log: Path, extra_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()):
        """``prefix``: a command that execs the daemon (``prlimit --nofile=256 --``)."""
        self.config, self.port, self.log_path = config, port, log
        self.extra_args, self.prefix = extra_args, prefix
        self.extra_env = env or {}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        handle = self.log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("NOTIFY_SOCKET", None)
        env.update(self.extra_env)
        self.process = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "autoscaler", "run", "--config",
             str(self.config),
             *self.extra_args],
            stdout=handle, stderr=subprocess.STDOUT, env=env)

    def status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/status", timeout=2) as response:
                body: dict[str, Any] = json.load(response)
                return body
        except OSError:
            return None

    def metrics(self) -> str:
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/metrics", timeout=2) as response:
            return str(response.read().decode())

    def target(self, key: str = "default/Deployment/web") -> dict[str, Any]:
        body = self.status() or {}
        found: dict[str, Any] = body.get("targets", {}).get(key, {})
        return found

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 25.0) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
            return None

    async def stop_async(self, sig: int = signal.SIGTERM, timeout: float = 25.0) -> int | None:
        """``stop`` without blocking the event loop: the simulated API server runs on the
        test's loop, and a daemon that talks to it while stopping (saving its history to a
        ConfigMap, releasing its Lease) must get its answers."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(sig)
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
            return None
        return self.process.returncode

    def logs(self) -> list[dict[str, Any]]:
        entries = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                entries.append(json.loads(line))
        return entries


@contextlib.contextmanager
def daemon(config_text: str, workdir: Path, *, name: str = "daemon",
           extra_args: tuple[str, ...] = (), port: int | None = None,
           env: dict[str, str] | None = None,
           prefix: tuple[str, ...] = ()) -> Iterator[DaemonProcess]:
    port = port or free_port()
    config = workdir / f"{name}.toml"
    config.write_text(config_text.replace("__PORT__", str(port)))
    process = DaemonProcess(config, port=port, log=workdir / f"{name}.log",
                            extra_args=extra_args, env=env, prefix=prefix)
    process.start()
    try:
        yield process
    finally:
        process.stop()


async def eventually(check: Callable[[], bool], *, timeout: float, interval: float = 0.2,
                     what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
