"""The README's quick start, run as written: in a copy of the checkout, each line of its
"point it at your cluster" block runs verbatim in a shell that has the block's earlier state
(the activated ``.venv``), against the simulated API server (``$KUBECONFIG``) and a real
Prometheus. What only the user can do is done as a user would: ``$EDITOR`` writes their
config (the Prometheus URL, their target). The demo installs offline, from the wheelhouse of
the locked packages (tests/shipping/offline.py)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import Rig, prometheus_with_exporter, rig
from tests.e2e.harness import eventually
from tests.shipping.offline import install_matrix, wheelhouse_or_skip
from tests.sim.prometheus import free_port

__all__ = ["prometheus_with_exporter", "rig"]

README = Path(__file__).parents[2] / "README.md"
ACTIVATE = "source .venv/bin/activate"

CONFIG = """\
[daemon]
syncPeriod = "1s"
listenAddress = "127.0.0.1:{port}"

[prometheus]
url = "{prometheus}"

[[autoscaler]]
namespace = "default"
scaleTargetRef = {{ apiVersion = "apps/v1", kind = "Deployment", name = "web" }}
minReplicas = 2
maxReplicas = 6

[[autoscaler.metrics]]
type = "Pods"
pods = {{ metric = {{ name = "app_load" }}, target = {{ type = "AverageValue", averageValue = "100" }}, query = 'app_load{{${{pod_selector}}}}', window = "1s" }}
"""
"""What the user writes in ``$EDITOR``: their Prometheus and a target with its query."""


def quick_start() -> list[str]:
    """The lines of the README's second quick-start block, comments removed."""
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"\n\n((?: {4}\S.*\n)+)", section)
    assert len(blocks) >= 2, "README: the quick start lost its command blocks"
    return [re.sub(r"\s+# .*$", "", line[4:]) for line in blocks[1].splitlines()]


class Session:
    """The user's terminal: each line runs in bash in the checkout, after the activation if
    the block has done it by then."""

    def __init__(self, checkout: Path, environment: dict[str, str]) -> None:
        self.checkout, self.environment, self.activated = checkout, environment, False

    def script(self, line: str) -> str:
        if line == ACTIVATE:
            self.activated = True
        return f"{ACTIVATE}\n{line}" if self.activated and line != ACTIVATE else line

    def run(self, line: str, *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["bash", "-c", self.script(line)], cwd=self.checkout,
                              env=self.environment, text=True, capture_output=True,
                              timeout=timeout, check=False)
        assert done.returncode == 0, f"{line!r} exited {done.returncode}:\n" \
                                     f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    def start(self, line: str) -> subprocess.Popen[str]:
        """A line that runs until Ctrl-C, in its own process group (the terminal's job)."""
        return subprocess.Popen(["bash", "-c", self.script(line)], cwd=self.checkout,
                                env=self.environment, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)


def ctrl_c(job: subprocess.Popen[str]) -> tuple[int, str]:
    """What Ctrl-C does to the foreground job: SIGINT to its process group."""
    os.killpg(job.pid, signal.SIGINT)
    try:
        output, _ = job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        output, _ = job.communicate(timeout=10)
        raise AssertionError(f"Ctrl-C did not stop it within 30 s:\n{output[-3000:]}") from None
    return job.returncode, output


def replicas(rig: Rig) -> int:
    deployment = rig.api.get("apps/v1", "Deployment", "default", "web")
    assert deployment is not None
    return int(deployment["spec"]["replicas"])


@pytest.mark.timeout(600)
async def test_the_quick_start_runs_as_written(rig: Rig, tmp_path: Path) -> None:
    """From a fresh copy: the demo, the import of the user's HPAs, check, plan --explain, a
    dry run that scales nothing, a run that scales, and status from another terminal."""
    wheelhouse = wheelhouse_or_skip()
    lines = quick_start()
    assert lines[:2] == ["./scripts/demo.sh", ACTIVATE], lines
    assert len(lines) == 10, lines
    checkout = install_matrix.copy_checkout(tmp_path / "autoscaler")
    rig.api.create_deployment("default", "legacy", replicas=1, labels={"app": "legacy"})
    rig.api.create_hpa("default", "legacy", target_name="legacy", max_replicas=5)
    port = free_port()
    editor = tmp_path / "editor"
    editor.write_text(f"#!/bin/sh\ncat > \"$1\" <<'EOF'\n"
                      f"{CONFIG.format(port=port, prometheus=rig.prometheus.url)}EOF\n")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON", "AUTOSCALER_"))}
    environment.update({
        "KUBECONFIG": str(rig.api.write_kubeconfig(tmp_path / "kubeconfig")),
        "EDITOR": str(editor), "HOME": str(tmp_path),
        "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)})
    session = Session(checkout, environment)
    rig.load.demand = 500.0  # five pods' worth: the run should take web from 2 towards 5

    (demo, activate, imported, example, edit, check, plan, dry_run, run, status) = lines
    assert "out/simulation.png" in (await asyncio.to_thread(session.run, demo)).stdout
    assert (checkout / "out" / "simulation.png").stat().st_size > 0
    await asyncio.to_thread(session.run, activate)
    await asyncio.to_thread(session.run, imported)
    assert 'name = "legacy"' in (checkout / "autoscaler.toml").read_text()
    await asyncio.to_thread(session.run, example)  # keeps what import-hpa wrote
    assert 'name = "legacy"' in (checkout / "autoscaler.toml").read_text()
    await asyncio.to_thread(session.run, edit)
    await asyncio.to_thread(rig.prometheus.wait_for, "sum(app_load) == 500")
    await asyncio.to_thread(session.run, check)
    explained = (await asyncio.to_thread(session.run, plan)).stdout
    assert "would rescale 2 -> " in explained, explained

    dry = session.start(dry_run)
    try:
        await asyncio.sleep(4)  # four passes at syncPeriod 1s
        assert replicas(rig) == 2
    finally:
        code, output = ctrl_c(dry)
    assert code == 0, output
    assert replicas(rig) == 2

    job = session.start(run)
    try:
        await eventually(lambda: replicas(rig) > 2, timeout=30, what="a scale-up")
        shown = (await asyncio.to_thread(session.run, status)).stdout
        assert re.search(r"\bdefault\s+web\s+Deployment/web\b", shown), shown
    finally:
        code, output = ctrl_c(job)
    assert code == 0, output
