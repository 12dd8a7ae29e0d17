"""A real Prometheus with a backfilled demand series, started once for the package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sim.prometheus import PrometheusProcess, backfill, start_prometheus
from tests.simulate.promdata import openmetrics


@pytest.fixture(scope="package")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    data = tmp_path_factory.mktemp("tsdb")
    backfill(data, openmetrics())
    with start_prometheus(data_dir=data) as prom:
        yield prom
