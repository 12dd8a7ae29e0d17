"""A Prometheus server's limits: maxResponseBytes, maxSeries, maxSampleAge, followRedirects."""

from __future__ import annotations

import pytest

from autoscaler.config import parse_config
from tests.config.helpers import TARGET, issues_of


def test_defaults() -> None:
    """Left out, the limits keep the 10,000-target answers and the 512Mi budget in mind."""
    server = parse_config(TARGET, source="test.toml").prometheus
    assert (server.max_response_bytes, server.max_series, server.max_sample_age,
            server.follow_redirects) == (16 * 2**20, 100_000, 300.0, "same-origin")


def test_per_server() -> None:
    """Each server has its own limits; sizes read as bytes or quantities ("64Mi")."""
    config = parse_config(TARGET + """
[prometheus]
maxResponseBytes = "64Mi"
maxSeries = 500000
maxSampleAge = "10m"

[prometheus.servers.thanos]
url = "http://thanos:9090"
maxResponseBytes = 1048576
followRedirects = "any"
""", source="test.toml")
    default, thanos = config.prometheus, config.prometheus_servers["thanos"]
    assert (default.max_response_bytes, default.max_series, default.max_sample_age) == (
        64 * 2**20, 500_000, 600.0)
    assert (thanos.max_response_bytes, thanos.max_series, thanos.follow_redirects) == (
        2**20, 100_000, "any")


@pytest.mark.parametrize(("text", "line", "path", "message"), [
    ('[prometheus]\nmaxResponseBytes = "lots"\n', 2, "prometheus.maxResponseBytes",
     'must be a size in bytes such as 16777216 or "16Mi", got "lots"'),
    ("[prometheus]\nmaxResponseBytes = 100\n", 2, "prometheus.maxResponseBytes",
     "must be at least 1024, got 100"),
    ('[prometheus]\nmaxResponseBytes = "1.5"\n', 2, "prometheus.maxResponseBytes",
     "must be a size in bytes"),
    ("[prometheus]\nmaxSeries = 0\n", 2, "prometheus.maxSeries", "must be at least 1, got 0"),
    ('[prometheus]\nmaxSampleAge = "0s"\n', 2, "prometheus.maxSampleAge",
     "must be greater than 0"),
    ('[prometheus.servers.a]\nurl = "http://a"\nfollowRedirects = "always"\n', 3,
     "prometheus.servers.a.followRedirects", '"same-origin"'),
], ids=["bytes-text", "bytes-tiny", "bytes-fraction", "series-zero", "age-zero",
        "redirects-unknown"])
def test_broken_limits(text: str, line: int, path: str, message: str) -> None:
    """A bad limit is rejected with its path, line and what was expected."""
    issues = [i for i in issues_of(TARGET + text) if i.path == path]
    assert issues, path
    assert message in issues[0].message, issues[0].message
    assert issues[0].line == line + TARGET.count("\n")
