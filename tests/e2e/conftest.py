"""Fixtures for end-to-end tests: a simulated cluster with a web deployment, its load, and a
real Prometheus scraping the load."""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest

from tests.e2e.harness import LoadModel
from tests.sim.apiserver import SimApiServer
from tests.sim.kube import PodTiming, run_apiserver
from tests.sim.prometheus import MetricsExporter, PrometheusProcess, start_prometheus


@dataclass
class Rig:
    api: SimApiServer
    load: LoadModel
    prometheus: PrometheusProcess


@pytest.fixture
def prometheus_with_exporter() -> Iterator[tuple[MetricsExporter, PrometheusProcess]]:
    with MetricsExporter() as exporter, start_prometheus(
            scrape_targets=[exporter.target], scrape_interval=1.0) as prometheus:
        yield exporter, prometheus


@pytest.fixture
async def rig(
    prometheus_with_exporter: tuple[MetricsExporter, PrometheusProcess],
) -> AsyncIterator[Rig]:
    exporter, prometheus = prometheus_with_exporter
    timing = PodTiming(start_delay=0.2, ready_delay=0.3, termination_delay=0.2)
    stack = contextlib.AsyncExitStack()
    api = await stack.enter_async_context(run_apiserver(timing=timing))
    api.create_deployment("default", "web", replicas=2, labels={"app": "web"},
                          requests={"cpu": "500m"})
    load = LoadModel(api=api, exporter=exporter)
    task = asyncio.create_task(load.run())
    try:
        yield Rig(api=api, load=load, prometheus=prometheus)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        try:
            # A client killed with SIGKILL can leave a watch handler the simulator does not
            # notice; never let that hang the suite, but say so.
            await asyncio.wait_for(stack.aclose(), timeout=15)
        except TimeoutError:
            warnings.warn("the simulated API server took over 15 s to stop", stacklevel=1)
