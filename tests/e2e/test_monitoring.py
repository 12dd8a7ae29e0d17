"""The monitoring kit against running daemons: a real Prometheus scrapes two daemons (one
writing, one in dry-run) that autoscale a workload of the simulated cluster, and every query
of the Grafana dashboard, with its variables substituted, returns data."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from monitoring import generate
from tests.e2e.harness import DaemonProcess, LoadModel, daemon, daemon_config, eventually
from tests.observability.exposition import value
from tests.sim.apiserver import SimApiServer
from tests.sim.kube import PodTiming, run_apiserver
from tests.sim.prometheus import MetricsExporter, PrometheusProcess, free_port, start_prometheus

VARIABLES = {"$namespace": "default", "$target": "web", "$__rate_interval": "30s"}
ALWAYS = 'schedules = [{ name = "always", cron = "* * * * *", duration = "1h", minReplicas = 1 }]'
"""A schedule in force all the time that changes nothing: its series are on the dashboard."""
WEB = {"namespace": "default", "kind": "Deployment", "name": "web"}


@dataclass
class Watched:
    api: SimApiServer
    load: LoadModel
    prometheus: PrometheusProcess
    ports: tuple[int, int]
    """The writing daemon's port, then the dry-run daemon's: both scraped."""


@pytest.fixture
def ports() -> tuple[int, int]:
    return free_port(), free_port()


@pytest.fixture
def scraped(ports: tuple[int, int]) -> Iterator[tuple[MetricsExporter, PrometheusProcess]]:
    with MetricsExporter() as exporter, start_prometheus(
            scrape_targets=[exporter.target, *(f"127.0.0.1:{p}" for p in ports)],
            scrape_interval=1.0) as prometheus:
        yield exporter, prometheus


@pytest.fixture
async def watched(scraped: tuple[MetricsExporter, PrometheusProcess],
                  ports: tuple[int, int]) -> AsyncIterator[Watched]:
    exporter, prometheus = scraped
    timing = PodTiming(start_delay=0.2, ready_delay=0.3, termination_delay=0.2)
    async with run_apiserver(timing=timing) as api:
        api.create_deployment("default", "web", replicas=2, labels={"app": "web"},
                              requests={"cpu": "500m"})
        load = LoadModel(api=api, exporter=exporter)
        task = asyncio.create_task(load.run())
        try:
            yield Watched(api=api, load=load, prometheus=prometheus, ports=ports)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.contextmanager
def daemons(rig: Watched, tmp_path: Path) -> Iterator[tuple[DaemonProcess, DaemonProcess]]:
    def config(port: int, state: str) -> str:
        return daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                             listen_port=port, state_file=tmp_path / state, behavior=ALWAYS)

    writing, dry = rig.ports
    with daemon(config(writing, "state-a"), tmp_path, name="writing", port=writing) as a, \
            daemon(config(dry, "state-b"), tmp_path, name="dry-run", port=dry,
                   extra_args=("--dry-run",)) as b:
        yield a, b


def replicas(rig: Watched) -> int:
    return int(rig.api.get("apps/v1", "Deployment", "default", "web")["spec"]["replicas"])


def substituted(expr: str) -> str:
    for name, chosen in VARIABLES.items():
        expr = expr.replace(name, chosen)
    return expr


def label_values(prometheus: PrometheusProcess, label: str, match: str) -> list[str]:
    """What Grafana's ``label_values(match, label)`` asks Prometheus for."""
    query = urllib.parse.urlencode({"match[]": match})
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/label/{label}/values?{query}",
                                timeout=10) as answer:
        values: list[str] = json.load(answer)["data"]
        return values


def queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every query on the dashboard."""
    return [(panel["title"], target["expr"]) for panel in generate.dashboard()["panels"]
            for target in panel.get("targets", [])]


async def test_every_dashboard_query_returns_data(watched: Watched, tmp_path: Path) -> None:
    """Scraped daemons, the dashboard's variables substituted: no panel query comes back
    empty, and the variables list the scaled workload."""
    rig = watched
    rig.load.demand = 800
    with daemons(rig, tmp_path):
        await eventually(lambda: replicas(rig) == 8, timeout=60, what="8 replicas")
        await asyncio.to_thread(
            rig.prometheus.wait_for, 'autoscaler_scale_events_total{direction="up"} >= 2',
            timeout=30)
        await asyncio.sleep(3)  # a few more scrapes: rates over 30 s have their samples
        empty = [(title, expr) for title, expr in queries()
                 if not rig.prometheus.query(substituted(expr))]
        assert empty == []
        assert "default" in label_values(rig.prometheus, "namespace",
                                         "autoscaler_current_replicas")
        assert "web" in label_values(rig.prometheus, "name",
                                     'autoscaler_current_replicas{namespace=~"default"}')


async def test_dry_run_counts_would_be_scales_apart(watched: Watched, tmp_path: Path) -> None:
    """50 passes of a dry run that would scale 2 -> 4 every pass: no scale event, one
    would-be scale."""
    rig = watched
    rig.load.demand = 800
    text = daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                         listen_port=rig.ports[1], state_file=tmp_path / "state")
    with daemon(text, tmp_path, port=rig.ports[1], extra_args=("--dry-run",)) as dry:
        await eventually(lambda: (value(dry_metrics(dry), "autoscaler_reconciles_total", **WEB,
                                        outcome="ok") or 0) >= 50,
                         timeout=90, what="50 passes")
        exposition = dry.metrics()
    assert replicas(rig) == 2
    assert value(exposition, "autoscaler_desired_replicas", **WEB) == 4
    assert value(exposition, "autoscaler_scale_events_total", **WEB, direction="up") == 0
    assert value(exposition, "autoscaler_would_scale_events_total", **WEB, direction="up") == 1
    assert value(exposition, "autoscaler_dry_run") == 1


def dry_metrics(process: DaemonProcess) -> str:
    """The exposition, or nothing while the daemon is starting."""
    try:
        return process.metrics()
    except OSError:
        return ""


LEADER_ELECTION = """
[daemon.leaderElection]
enabled = true
leaseName = "autoscaler"
leaseNamespace = "default"
leaseDuration = "4s"
renewDeadline = "3s"
retryPeriod = "1s"
"""


def rule(alert: str) -> str:
    """The alert's expression, for the scrape job of this rig ("test")."""
    (expr,) = [r["expr"] for g in yaml.safe_load(generate.RULES.read_text())["groups"]
               for r in g["rules"] if r.get("alert") == alert]
    return str(expr).replace('job="autoscaler"', 'job="test"')


def instances(prometheus: PrometheusProcess, promql: str) -> set[str]:
    return {series["metric"]["instance"] for series in prometheus.query(promql)}


async def test_one_leader_and_only_its_view_of_the_targets(watched: Watched,
                                                           tmp_path: Path) -> None:
    """Two replicas with leader election: one leads, the standby shows no per-target series
    (sums count the targets once), the leader alerts stay quiet; when the leader stops, the
    standby takes over the lease and the series."""
    rig = watched
    rig.load.demand = 200
    first, second = (f"127.0.0.1:{port}" for port in rig.ports)

    def config(port: int) -> str:
        text = daemon_config(prometheus_url=rig.prometheus.url, kubeconfig=rig.api.kubeconfig,
                             listen_port=port, state_file=tmp_path / "unused",
                             extra_daemon=LEADER_ELECTION)
        return text.replace(f'stateFile = "{tmp_path / "unused"}"\n', "")

    leader_of = 'autoscaler_leader{lease="autoscaler"} == 1'
    with daemon(config(rig.ports[0]), tmp_path, name="first", port=rig.ports[0]) as a:
        await eventually(lambda: a.target().get("lastOutcome") == "ok", timeout=30,
                         what="the first instance leading")
        with daemon(config(rig.ports[1]), tmp_path, name="second", port=rig.ports[1]):
            await asyncio.to_thread(rig.prometheus.wait_for, "count(autoscaler_leader) == 2",
                                    timeout=30)
            await asyncio.sleep(2)
            assert instances(rig.prometheus, leader_of) == {first}
            assert instances(rig.prometheus, "autoscaler_current_replicas") == {first}
            assert rig.prometheus.query(rule("AutoscalerNoLeader")) == []
            assert rig.prometheus.query(rule("AutoscalerMultipleLeaders")) == []
            assert await a.stop_async() == 0  # releases the lease
            await asyncio.to_thread(
                rig.prometheus.wait_for, f'autoscaler_current_replicas{{instance="{second}"}}',
                timeout=30)
            # The stopped leader's last samples turn stale at the scrape after its exit, which
            # may come after the standby's first series; the single leader is the end state.
            await eventually(lambda: instances(rig.prometheus, leader_of) == {second},
                             timeout=15, what="the standby as the only leader")
