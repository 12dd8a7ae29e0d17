"""Connection settings: rotated tokens, basic auth, headers, parameters, TLS, no leaked secrets."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from autoscaler.adapters.prometheus import PrometheusSource, RetryPolicy
from autoscaler.algorithm import (
    MetricSourceType,
    MetricUnavailable,
    MetricValues,
    ObjectMetricValue,
)
from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
from tests.sim.prometheus import (
    LoopbackHTTPServer,
    StubRequest,
    StubResponse,
    free_port,
    prometheus_error,
    prometheus_vector,
    self_signed_cert,
)

FAST = RetryPolicy(attempts=2, initial_wait=0.02, max_wait=0.05, jitter=0.01)
def one() -> StubResponse:
    """A sample of 1, stamped now (a response made at import ages past maxSampleAge when the
    suite runs long before this test)."""
    return StubResponse(body=prometheus_vector([({}, 1.0)]))
GOOD = ObjectMetricValue(value=1000)


async def fetch_value(source: PrometheusSource) -> MetricValues:
    request = target("shop/web", namespace="shop", pod_names=["web-0"], metrics=[
        (spec(MetricSourceType.OBJECT, "m"), metric_query("vector(1)"))])
    result = await source.fetch([request], deadline=time.monotonic() + 5)
    return result.values["shop/web"][0]


def requiring(header: Callable[[], str]) -> Callable[[StubRequest], StubResponse]:
    """A handler answering only requests whose Authorization equals ``header()``."""
    def handle(request: StubRequest) -> StubResponse:
        if request.headers.get("Authorization") == header():
            return one()
        return prometheus_error(401, "unauthorized")
    return handle


def rotate_by_rewrite(path: Path, token: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(token + "\n")
    os.utime(path, ns=(before + 10**9, before + 10**9))  # coarse mtime clocks: force a change


def rotate_by_symlink_swap(path: Path, token: str) -> None:
    """What a kubelet does to a projected token: new file, atomic symlink swap."""
    fresh = path.parent / f"data-{time.monotonic_ns()}"
    fresh.write_text(token + "\n")
    link = path.parent / "next"
    link.symlink_to(fresh)
    link.replace(path)


@pytest.mark.parametrize("rotate", [rotate_by_rewrite, rotate_by_symlink_swap],
                         ids=["rewrite", "symlink-swap"])
async def test_bearer_token_is_reread_after_rotation(tmp_path: Path, rotate: Any) -> None:
    """A rotated token file is picked up on the next query, without a restart."""
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    current = {"token": "first"}
    with LoopbackHTTPServer(requiring(lambda: f"Bearer {current['token']}")) as server:
        source = PrometheusSource({"default": prom_server(
            url=server.url, bearer_token_file=token_file)}, retry=FAST)
        assert await fetch_value(source) == GOOD
        current["token"] = "second"  # the server rotated; our file has not yet
        stale = await fetch_value(source)
        rotate(token_file, "second")
        assert await fetch_value(source) == GOOD
        await source.close()
    assert isinstance(stale, MetricUnavailable)
    assert "access denied: HTTP 401" in stale.reason


async def test_missing_token_file_is_a_reason(tmp_path: Path) -> None:
    """An unreadable token file makes the metric unavailable and names the file."""
    missing = tmp_path / "absent"
    with LoopbackHTTPServer(lambda _: one()) as server:
        source = PrometheusSource({"default": prom_server(
            url=server.url, bearer_token_file=missing)}, retry=FAST)
        value = await fetch_value(source)
        await source.close()
    assert isinstance(value, MetricUnavailable)
    assert f"cannot read {missing}" in value.reason


async def test_basic_auth_password_from_file(tmp_path: Path) -> None:
    """Basic auth sends the username and the password file's content."""
    (tmp_path / "pw").write_text("pa55word\n")
    expected = "Basic " + base64.b64encode(b"scaler:pa55word").decode()
    with LoopbackHTTPServer(requiring(lambda: expected)) as server:
        source = PrometheusSource({"default": prom_server(
            url=server.url, basic_auth_username="scaler",
            basic_auth_password_file=tmp_path / "pw")}, retry=FAST)
        assert await fetch_value(source) == GOOD
        await source.close()


async def test_headers_and_query_params_reach_the_server() -> None:
    """Custom headers and extra parameters (Thanos dedup, a tenant) go with every query."""
    answer = StubResponse(body=prometheus_vector([({}, 1.0)], at=1700000000.25))
    with LoopbackHTTPServer(lambda _: answer) as server:
        source = PrometheusSource({"default": prom_server(
            url=server.url, headers={"X-Scope-OrgID": "tenant-a"},
            query_params={"dedup": "true", "partial_response": "false"})},
            retry=FAST, clock=lambda: 1700000000.25)
        assert await fetch_value(source) == GOOD
        await source.close()
    seen = server.requests[0]
    assert seen.headers["X-Scope-OrgID"] == "tenant-a"
    assert seen.params == {"query": ["vector(1)"], "dedup": ["true"],
                           "partial_response": ["false"], "time": ["1700000000.250"]}


@pytest.mark.parametrize(("use_ca", "skip_verify", "ok"), [
    (True, False, True), (False, False, False), (False, True, True)],
    ids=["ca-file", "verify-by-default", "insecure-skip-verify"])
async def test_tls(tmp_path: Path, use_ca: bool, skip_verify: bool, ok: bool) -> None:
    """HTTPS is verified by default; a CA file or an explicit opt-out lets it through."""
    cert, key = self_signed_cert(tmp_path)
    with LoopbackHTTPServer(lambda _: one(), tls=(cert, key)) as server:
        source = PrometheusSource({"default": prom_server(
            url=server.url, ca_file=cert if use_ca else None,
            insecure_skip_verify=skip_verify)}, retry=FAST)
        value = await fetch_value(source)
        await source.close()
    if ok:
        assert value == GOOD
    else:
        assert isinstance(value, MetricUnavailable)
        assert "TLS verification of https://127.0.0.1" in value.reason


async def test_secrets_never_reach_logs_reasons_or_reprs(tmp_path: Path) -> None:
    """Tokens, passwords and URL userinfo appear in no log event, reason or repr."""
    secrets = ("tok-s3cr3t", "pw-s3cr3t", "url-s3cr3t")
    (tmp_path / "token").write_text(secrets[0])
    (tmp_path / "pw").write_text(secrets[1])
    dead = f"http://user:{secrets[2]}@127.0.0.1:{free_port()}"
    with LoopbackHTTPServer(lambda _: prometheus_error(401, "no")) as server:
        servers = {
            "default": prom_server(url=server.url, bearer_token_file=tmp_path / "token"),
            "dead": prom_server(name="dead", url=dead, basic_auth_username="u",
                                basic_auth_password_file=tmp_path / "pw"),
        }
        source = PrometheusSource(servers, retry=FAST)
        requests = [target(f"t/{name}", namespace="shop", pod_names=["web-0"], server=name,
                           metrics=[(spec(MetricSourceType.OBJECT, "m"), metric_query("up"))])
                    for name in servers]
        with structlog.testing.capture_logs() as logs:
            result = await source.fetch(requests, deadline=time.monotonic() + 5)
        await source.close()
    text = repr(logs) + repr(result) + repr(source)
    assert len(logs) >= 2
    assert all(isinstance(v, MetricUnavailable) for row in result.values.values() for v in row)
    assert not [s for s in secrets if s in text]
