"""The daemon's install: its size on disk and its memory when idle, from a fresh virtualenv.

    .venv/bin/python bench/install_footprint.py                  # the image's install, ~1 min
    .venv/bin/python bench/install_footprint.py --unlocked OTHER_CHECKOUT   # before the lock

By default it builds a virtualenv in a temporary directory as the Dockerfile does: the lock's
daemon set (``scripts/install.sh VENV daemon``) with the pure-Python core, then pip,
setuptools removed (the Dockerfile's list: they build, they do not run).
``--unlocked DIR`` builds it as the Dockerfile did before the lock (``pip install DIR``:
whatever PyPI serves today, pip and setuptools kept); ``--venv DIR``
measures an existing virtualenv. It prints the size of the installed site-packages (file
bytes, as an image layer holds them; MB = 10^6 bytes) and its largest packages.

Then it runs ``python -m autoscaler run`` from that virtualenv (from a temporary directory,
so the installed package runs, not this checkout) against the simulated API server and a
real Prometheus scraping a steady load on one Deployment of two pods (at its target: no
scaling, passes every 15 s), waits until ``/readyz`` answers and a pass has decided, idles
for ``--idle`` seconds and prints the median ``VmRSS`` over that time and ``VmHWM`` (the
peak) from ``/proc/PID/status``. Last, it runs ``simulate`` from the same install, which
says in one line how to get the plot when matplotlib is not there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.harness import LoadModel
from tests.procfs import memory_kib
from tests.sim.kube import PodTiming, run_apiserver
from tests.sim.prometheus import MetricsExporter, free_port, start_prometheus

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000
EXAMPLE = ROOT / "config" / "examples" / "simulate"


def build(venv: Path, unlocked: Path | None) -> None:
    """The virtualenv the Dockerfile builds (now, or with ``unlocked`` before the lock)."""
    if unlocked is not None:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", str(unlocked)], check=True)
        return
    # As the Dockerfile builds it: the pure-Python core, then what only builds leaves.
    subprocess.run([ROOT / "scripts" / "install.sh", venv, "daemon"], check=True,
                   env={key: value for key, value in os.environ.items()
                        if key != "AUTOSCALER_COMPILE"})
    (build_only,) = re.findall(r"pip uninstall -q -y ([^\n]+)",
                               (ROOT / "Dockerfile").read_text())
    subprocess.run([venv / "bin" / "python", "-m", "pip", "uninstall", "-q", "-y",
                    *build_only.split()], check=True)


def site_packages(venv: Path) -> Path:
    (found,) = (venv / "lib").glob("python3.*/site-packages")
    return found


def sizes(packages: Path) -> Counter[str]:
    """Bytes per top-level entry (a package, its .libs, its .dist-info)."""
    total: Counter[str] = Counter()
    for path in packages.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total[path.relative_to(packages).parts[0]] += path.stat().st_size
    return total


def report_size(venv: Path, top: int) -> None:
    per_entry = sizes(site_packages(venv))
    print(f"site-packages: {sum(per_entry.values()) / MB:.1f} MB")
    for name, size in per_entry.most_common(top):
        print(f"  {size / MB:7.1f} MB  {name}")


CONFIG = """
[daemon]
listenAddress = "127.0.0.1:{port}"
stateFile = "{state}"
logFormat = "json"

[prometheus]
url = "{prometheus}"

[kubernetes]
kubeconfig = "{kubeconfig}"

[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
minReplicas = 1
maxReplicas = 10

[[autoscaler.metrics]]
type = "Pods"
pods.metric = {{ name = "app_load" }}
pods.target = {{ type = "AverageValue", averageValue = "100" }}
pods.query = 'app_load{{${{pod_selector}}}}'
"""


def get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bytes(response.read())
    except OSError:
        return None


def decided(port: int) -> bool:
    body = get(f"http://127.0.0.1:{port}/status")
    targets = json.loads(body).get("targets", {}) if body else {}
    return targets.get("default/Deployment/web", {}).get("desiredReplicas") is not None


async def wait_for(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.5)


async def idle_rss(venv: Path, work: Path, idle: float) -> None:
    timing = PodTiming(start_delay=0.2, ready_delay=0.3, termination_delay=0.2)
    with MetricsExporter() as exporter, start_prometheus(
            scrape_targets=[exporter.target], scrape_interval=1.0) as prometheus:
        async with run_apiserver(timing=timing) as api:
            api.create_deployment("default", "web", replicas=2, labels={"app": "web"},
                                  requests={"cpu": "500m"})
            load = LoadModel(api=api, exporter=exporter, demand=200)  # 100 a pod: at target
            feeding = asyncio.create_task(load.run())
            port = free_port()
            config = work / "autoscaler.toml"
            config.write_text(CONFIG.format(port=port, state=work / "state",
                                            prometheus=prometheus.url,
                                            kubeconfig=api.kubeconfig))
            with (work / "daemon.log").open("wb") as log:
                daemon = await asyncio.create_subprocess_exec(
                    venv / "bin" / "python", "-m", "autoscaler", "run", "--config", config,
                    cwd=work, stdout=log, stderr=subprocess.STDOUT)
            try:
                await wait_for(lambda: get(f"http://127.0.0.1:{port}/readyz") is not None,
                               timeout=60, what="/readyz")
                await wait_for(lambda: decided(port), timeout=60, what="a decision")
                ready_rss = memory_kib(daemon.pid) * 1024
                samples = []
                for _ in range(int(idle)):
                    await asyncio.sleep(1)
                    samples.append(memory_kib(daemon.pid) * 1024)
                peak = memory_kib(daemon.pid, "VmHWM") * 1024
            finally:
                daemon.send_signal(signal.SIGTERM)
                try:  # waited for on this loop: the simulated API server runs on it
                    await asyncio.wait_for(daemon.wait(), timeout=30)
                except TimeoutError:
                    daemon.kill()
                    await daemon.wait()
                feeding.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await feeding
    print(f"daemon RSS: {ready_rss / MB:.1f} MB when ready, {statistics.median(samples) / MB:.1f}"
          f" MB idle (median of {len(samples)} s), peak {peak / MB:.1f} MB")


def simulate_note(venv: Path, work: Path) -> None:
    result = subprocess.run(
        [venv / "bin" / "autoscaler", "simulate", "--config", EXAMPLE / "web.toml",
         "--workload", EXAMPLE / "workload.toml", "--trace", EXAMPLE / "day.csv",
         "--out", work / "out"],
        capture_output=True, text=True, timeout=300, cwd=work, check=False)
    written = sorted(p.name for p in (work / "out").glob("*"))
    print(f"simulate: exit {result.returncode}, wrote {', '.join(written)}")
    for line in result.stderr.splitlines():
        print(f"  stderr: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--unlocked", type=Path, metavar="DIR",
                        help="pip install DIR (a checkout from before the lock)")
    source.add_argument("--venv", type=Path, metavar="DIR", help="measure this virtualenv")
    parser.add_argument("--idle", type=float, default=30, help="seconds idle (default 30)")
    parser.add_argument("--top", type=int, default=12, help="largest packages shown")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="install-footprint-"))
    try:
        venv = args.venv or work / "venv"
        if args.venv is None:
            build(venv, args.unlocked)
        report_size(venv, args.top)
        asyncio.run(idle_rss(venv, work, args.idle))
        simulate_note(venv, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
