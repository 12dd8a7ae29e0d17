"""Hostile and absurd answers: bounded in memory and time, a reason for each, no traceback."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import structlog

from autoscaler.adapters.prometheus import PrometheusSource, RetryPolicy, TargetRequest, transport
from autoscaler.algorithm import (
    MetricSourceType,
    MetricUnavailable,
    MetricValues,
    ObjectMetricValue,
    PodMetricValues,
)
from tests.adapters.prometheus.hostile import (
    Answer,
    HostileServer,
    gzip_bomb,
    huge_vector,
    vector,
)
from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
from tests.sim.prometheus import LoopbackHTTPServer, StubRequest, StubResponse, self_signed_cert

NOW = 1_800_000_000.0
"""The injected clock: the instant every pass here asks for."""
ONCE = RetryPolicy(attempts=1)
"""One attempt, so a time bound is one timeout's, not several."""
TIMEOUT = 1.0
MARGIN = 0.75
"""What a loaded 2-core machine may add to a bound; far below a drip's minutes."""
MB = 1 << 20
ROOT = Path(__file__).resolve().parents[3]

OBJECT, PODS = MetricSourceType.OBJECT, MetricSourceType.PODS


def one_value(at: float = NOW, value: str = "1") -> bytes:
    return vector([({}, value)], at=at)


def tiny_series(count: int) -> bytes:
    """``count`` series of a few bytes each: many series in few bytes."""
    one = b'{"metric":{},"value":[%d,"1"]},' % NOW
    return (b'{"status":"success","data":{"resultType":"vector","result":['
            + one * (count - 1) + one[:-1] + b"]}}")


def object_request(key: str = "shop/web") -> TargetRequest:
    return target(key, namespace="shop", pod_names=["web-0"],
                  metrics=[(spec(OBJECT, "m"), metric_query(query="vector(1)"))])


async def fetch(url: str, request: TargetRequest | None = None, **settings: Any) -> tuple[
        MetricValues, float, list[dict[str, Any]]]:
    """One pass against ``url``: the first metric's value, the seconds it took, the logs."""
    request = request or object_request()
    source = PrometheusSource({"default": prom_server(url=url, **{"timeout": TIMEOUT,
                                                                 **settings})},
                              retry=ONCE, clock=lambda: NOW)
    with structlog.testing.capture_logs() as logs:
        started = time.monotonic()
        result = await source.fetch([request], deadline=time.monotonic() + 10)
        elapsed = time.monotonic() - started
        await source.close()
    return result.values[request.key][0], elapsed, logs


def answering(answer: Answer) -> Callable[[StubRequest], Answer]:
    return lambda _: answer


# id, the answer, the reason's text
CORPUS = [
    ("huge-body", Answer(body=huge_vector(200 * MB, at=NOW)),
     "bad data: answer larger than maxResponseBytes = 16,777,216 of Prometheus server "
     "'default' (more than 16,777,216 bytes arrived)"),
    ("huge-content-length", Answer(headers={"Content-Length": str(10**12)}, body=lambda: [b"{"]),
     "bad data: answer larger than maxResponseBytes = 16,777,216 of Prometheus server "
     "'default' (Content-Length 1,000,000,000,000)"),
    ("gzip-bomb", Answer(headers={"Content-Encoding": "gzip"}, body=gzip_bomb(1024 * MB)),
     "bad data: answer larger than maxResponseBytes = 16,777,216 of Prometheus server "
     "'default' (more than 16,777,216 bytes once inflated from "),
    ("many-series", Answer(body=tiny_series(100_001)),
     "bad data: answer holds 100,001 series, more than maxSeries = 100,000 of Prometheus "
     "server 'default'"),
    ("empty-arrays", Answer(body=b'{"status":"success","data":{"resultType":"vector",'
                                 b'"result":[{"metric":{},"value":[' + b"[]," * 400_000
                                 + b'"1"]}]}}'),
     "bad data: answer holds 133,334 series, more than maxSeries = 100,000"),
    ("stale-sample", Answer(body=one_value(at=NOW - 3600)),
     "bad data: sample is 3600s old, older than maxSampleAge (300s)"),
    ("future-sample", Answer(body=one_value(at=NOW + 3600)),
     "bad data: sample is stamped 3600s in the future, more than the 60s of clock skew "
     "allowed"),
    ("nan-timestamp", Answer(body=b'{"status":"success","data":{"resultType":"vector",'
                                  b'"result":[{"metric":{},"value":["NaN","1"]}]}}'),
     "bad data: sample timestamp is NaN"),
    ("dripping-body", Answer(body=one_value() + b" " * 10_000, chunk=1, drip=0.02),
     "Prometheus unavailable: {url} timed out after 1.00s (answer too slow)"),
    ("dripping-headers", Answer(body=one_value(), drip=0.02, drip_head=True),
     "Prometheus unavailable: {url} timed out after 1.00s (answer too slow)"),
    ("not-gzip", Answer(headers={"Content-Encoding": "br"}, body=b"\x00" * 10),
     "bad data: {url} answered with Content-Encoding 'br'; only gzip was asked for"),
    ("broken-gzip", Answer(headers={"Content-Encoding": "gzip"}, body=b"\x1f\x8b" + b"x" * 50),
     "bad data: {url} sent a broken gzip body"),
]


@pytest.mark.parametrize(("answer", "reason"), [c[1:] for c in CORPUS],
                         ids=[c[0] for c in CORPUS])
async def test_hostile_answer(answer: Answer, reason: str) -> None:
    """Each hostile answer makes the metric invalid with its reason, within one timeout plus
    a margin, and is logged without a traceback."""
    with HostileServer(answering(answer)) as server:
        value, elapsed, logs = await fetch(server.url)
    assert isinstance(value, MetricUnavailable)
    assert value.reason.startswith(reason.format(url=server.url)), value.reason
    assert elapsed < TIMEOUT + MARGIN
    assert not [entry for entry in logs if "exc_info" in entry or entry["log_level"] in (
        "error", "critical", "exception")]


# --- bytes: the body is bounded while it arrives --------------------------------------------

_CHILD = textwrap.dedent("""
    import asyncio, json, sys, time
    from autoscaler.adapters.prometheus import PrometheusSource, RetryPolicy
    from tests.adapters.prometheus.support import metric_query, prom_server, spec, target
    from autoscaler.algorithm import MetricSourceType

    def kib(field):
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec.
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])

    request = target("shop/web", namespace="shop", pod_names=["web-0"], metrics=[
        (spec(MetricSourceType.OBJECT, "m"), metric_query(query="vector(1)"))])
    source = PrometheusSource({"default": prom_server(url=sys.argv[1], timeout=60)},
                              retry=RetryPolicy(attempts=1))
    before = kib("VmRSS")
    started = time.monotonic()
    result = asyncio.run(source.fetch([request], deadline=time.monotonic() + 90))
    print(json.dumps({"before": before, "peak": kib("VmHWM"),
                      "seconds": time.monotonic() - started,
                      "value": repr(result.values["shop/web"][0])}))
""")
HEADROOM = 100 * MB
"""What one answer may add to the daemon's peak: the 512Mi limit less the 284 MB peak of the
10,000-target benchmark leaves ~250 MB; 100 MB keeps room for a second answer at once."""


HUGE = huge_vector(200 * MB, at=NOW)


@pytest.mark.parametrize("answer", [
    Answer(body=HUGE),
    Answer(headers={"Content-Length": str(sum(map(len, HUGE())))}, body=HUGE),
    Answer(headers={"Content-Encoding": "gzip"}, body=gzip_bomb(200 * MB)),
], ids=["chunked", "content-length", "gzip"])
def test_200mb_answer_stays_within_the_memory_budget(answer: Answer) -> None:
    """A 200 MB answer costs a fetching process less than the daemon's memory headroom."""
    with HostileServer(answering(answer)) as server:
        done = subprocess.run([sys.executable, "-c", _CHILD, server.url], capture_output=True,
                              text=True, timeout=100, check=True, cwd=ROOT)
    figures = json.loads(done.stdout.splitlines()[-1])
    grown = (figures["peak"] - figures["before"]) * 1024
    print(f"200 MB answer: RSS {figures['before'] / 1024:.0f} -> {figures['peak'] / 1024:.0f} "
          f"MB, {figures['seconds']:.2f}s: {figures['value']}")
    assert "maxResponseBytes" in figures["value"]
    assert grown < HEADROOM, f"the fetch added {grown / MB:.0f} MB"


def frames_of(module: object) -> list[FrameType]:
    """Frames of ``module``'s functions that are still alive (kept by some traceback)."""
    path = getattr(module, "__file__", None)
    return [o for o in gc.get_objects()
            if isinstance(o, FrameType) and o.f_code.co_filename == path]


@pytest.mark.parametrize("answer", [
    Answer(body=HUGE),
    Answer(body=b'{"status":"success","data":' + b"x" * (4 * MB)),
    Answer(body=tiny_series(6000)),
    # Read a series at a time (written as Prometheus writes), then refused part way.
    Answer(body=tiny_series(500)[:-3] + b"," + b"x" * (4 * MB)),
    Answer(body=tiny_series(500)[:-3] + b',{"metric":{},"value":"1"}' + b"]}}"),
], ids=["cut-at-the-limit", "not-json", "over-the-query-series", "not-json-past-series",
        "a-bad-series-past-series"])
async def test_a_failed_answer_leaves_nothing_for_the_cyclic_collector(answer: Answer) -> None:
    """With the collector off (as during a pass, and nearly so once tuned), a refused answer
    is freed by reference counting: no frame of the transport outlives the query, so none
    keeps its bytes (issue 40: 16 MB a pass kept until the next collection, ~100 s)."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        with HostileServer(answering(answer)) as server:
            value, _, _ = await fetch(server.url, request=target(
                "shop/web", namespace="shop", pod_names=["web-0"],
                metrics=[(spec(PODS, "m"), metric_query(query="m"))]))
        assert isinstance(value, MetricUnavailable)
        assert frames_of(transport) == []
    finally:
        if enabled:
            gc.enable()


async def test_an_answer_as_large_as_10000_targets_passes() -> None:
    """The answer 10,000 targets of 5 pods share (50,000 series, ~6 MB) fits the defaults."""
    pods = [[f"app-{t:05d}-7d4b9c8f6d-{p:05d}" for p in range(5)] for t in range(10_000)]
    body = vector([({"namespace": "bench-000", "pod": pod}, "0.1") for row in pods
                   for pod in row], at=NOW)
    assert len(body) > 5 * MB
    requests = [target(f"bench-000/app-{t:05d}", namespace="bench-000", pod_names=row,
                       metrics=[(spec(PODS, "rps"), metric_query(query="rps"))])
                for t, row in enumerate(pods)]
    with HostileServer(answering(Answer(body=body))) as server:
        source = PrometheusSource({"default": prom_server(url=server.url)}, retry=ONCE,
                                  clock=lambda: NOW)
        result = await source.fetch(requests, deadline=time.monotonic() + 30)
        await source.close()
    assert all(isinstance(row[0], PodMetricValues) and len(row[0].samples) == 5
               for row in result.values.values())


@pytest.mark.parametrize(("settings", "reason"), [
    ({"max_response_bytes": 4096}, "maxResponseBytes = 4,096 of Prometheus server 'default'"),
    ({"max_series": 10}, "holds 11 series, more than maxSeries = 10 of Prometheus server"),
], ids=["max-response-bytes", "max-series"])
async def test_limits_are_per_server(settings: dict[str, int], reason: str) -> None:
    """A server's own maxResponseBytes and maxSeries apply to its answers."""
    with HostileServer(answering(Answer(body=tiny_series(11) + b" " * 5000))) as server:
        value, _, _ = await fetch(server.url, **settings)
    assert isinstance(value, MetricUnavailable)
    assert reason in value.reason


# --- stale and future samples ---------------------------------------------------------------


@pytest.mark.parametrize(("stamped", "kept"), [
    (NOW - 3600, False), (NOW - 299, True), (NOW + 59, True), (NOW + 3600, False)],
    ids=["hour-old", "within-max-age", "within-skew", "hour-ahead"])
async def test_a_stale_pod_sample_is_a_missing_pod(stamped: float, kept: bool) -> None:
    """A per-pod sample too old or too new leaves that pod out (missing, never a value)."""
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"namespace": "shop", "pod": "web-0"}, "value": [NOW, "4"]},
        {"metric": {"namespace": "shop", "pod": "web-1"}, "value": [stamped, "0"]}]}}).encode()
    request = target("shop/web", namespace="shop", pod_names=["web-0", "web-1"],
                     metrics=[(spec(PODS, "rps"), metric_query(query="rps"))])
    with HostileServer(answering(Answer(body=body))) as server:
        value, _, _ = await fetch(server.url, request)
    assert isinstance(value, PodMetricValues)
    assert set(value.samples) == ({"web-0", "web-1"} if kept else {"web-0"})


async def test_max_sample_age_is_per_server() -> None:
    """maxSampleAge of the server decides: a 10-minute-old sample passes at 15m."""
    with HostileServer(answering(Answer(body=one_value(at=NOW - 600)))) as server:
        value, _, _ = await fetch(server.url, max_sample_age=900.0)
    assert value == ObjectMetricValue(value=1000)


# --- redirects ------------------------------------------------------------------------------


def redirecting(to: list[str]) -> Callable[[StubRequest], Answer]:
    """Answers with a 302 to ``to[0]`` (read per request: a server's URL is known only once
    it listens), except at ``/elsewhere``, where it answers."""
    def answer(request: StubRequest) -> Answer:
        if request.path == "/elsewhere/api/v1/query":
            return Answer(body=one_value())
        query = "&".join(f"{k}={v[0]}" for k, v in request.params.items())
        return Answer(status=302, headers={"Location": f"{to[0]}/api/v1/query?{query}"})
    return answer


SECRET_HEADERS = {"X-Scope-OrgID": "tenant-a"}


@pytest.mark.parametrize(("policy", "cross_origin", "followed"), [
    ("same-origin", True, False), ("same-origin", False, True), ("never", False, False),
    ("any", True, True)], ids=["default-cross-origin", "default-same-origin",
                               "never-same-origin", "any-cross-origin"])
async def test_redirects_follow_the_policy_and_secrets_stay_home(
    tmp_path: Path, policy: str, cross_origin: bool, followed: bool
) -> None:
    """Redirects are followed as followRedirects says; the tenant header and the bearer
    token never reach another origin."""
    (tmp_path / "token").write_text("s3cr3t")
    hop: list[str] = []
    with (HostileServer(answering(Answer(body=one_value()))) as other,
          HostileServer(redirecting(hop)) as home):
        hop.append(other.url if cross_origin else home.url + "/elsewhere")
        value, _, _ = await fetch(home.url, follow_redirects=policy, headers=SECRET_HEADERS,
                                  bearer_token_file=tmp_path / "token")
    if not followed:
        assert isinstance(value, MetricUnavailable)
        assert f'not followed (followRedirects = "{policy}" for Prometheus server ' \
               "'default')" in value.reason
        assert not other.requests
        assert len(home.requests) == 1
        return
    assert value == ObjectMetricValue(value=1000)
    second = (other.requests if cross_origin else home.requests[1:])[0]
    kept = not cross_origin
    assert ("X-Scope-OrgID" in second.headers) is kept
    assert ("Authorization" in second.headers) is kept
    assert second.params["query"] == ["vector(1)"]


async def test_default_policy_refuses_a_cross_origin_redirect_unfollowed() -> None:
    """By default a 302 to another origin is not followed: the other server sees nothing."""
    with HostileServer(answering(Answer(body=one_value()))) as other, \
            HostileServer(redirecting([other.url])) as home:
        value, _, _ = await fetch(home.url, headers=SECRET_HEADERS)
    assert isinstance(value, MetricUnavailable)
    assert other.requests == []


# --- a dripping server: the fetch, close() and the worker threads end in time ---------------


async def test_dripping_server_releases_the_fetch_and_its_thread() -> None:
    """A server dripping a byte at a time: the fetch ends at the timeout with "answer too
    slow", and after close() no worker thread is left to hold up the interpreter's exit."""
    drip = Answer(body=one_value() + b" " * 100_000, chunk=1, drip=0.01)
    with HostileServer(answering(drip)) as server:
        value, elapsed, _ = await fetch(server.url)
        stopped = time.monotonic()
        # Threads the interpreter waits for at exit (the pool's workers; not daemons).
        workers = [t for t in threading.enumerate() if not t.daemon
                   and t.name.startswith("prometheus")]
        for thread in workers:
            thread.join(timeout=TIMEOUT + MARGIN)
    assert isinstance(value, MetricUnavailable)
    assert "(answer too slow)" in value.reason
    assert elapsed < TIMEOUT + MARGIN
    assert workers
    assert not [t for t in workers if t.is_alive()]
    assert time.monotonic() - stopped < TIMEOUT + MARGIN


async def test_close_returns_at_once_while_a_query_drips() -> None:
    """close() does not wait for a query in flight; that query still ends by its timeout."""
    drip = Answer(body=one_value() + b" " * 100_000, chunk=1, drip=0.01)
    with HostileServer(answering(drip)) as server:
        source = PrometheusSource({"default": prom_server(url=server.url, timeout=TIMEOUT)},
                                  retry=ONCE, clock=lambda: NOW)
        pending = asyncio.create_task(source.fetch([object_request()],
                                                   deadline=time.monotonic() + 10))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await source.close()
        closed = time.monotonic() - started
        result = await asyncio.wait_for(pending, timeout=TIMEOUT + MARGIN)
    assert closed < 0.1
    assert isinstance(result.values["shop/web"][0], MetricUnavailable)


# --- insecureSkipVerify ---------------------------------------------------------------------


async def test_insecure_skip_verify_warns_once_by_name(tmp_path: Path) -> None:
    """insecureSkipVerify logs one structured warning naming the server, and urllib3's
    per-request InsecureRequestWarning is silenced."""
    cert, key = self_signed_cert(tmp_path)
    with (LoopbackHTTPServer(lambda _: StubResponse(body=one_value()), tls=(cert, key)) as server,
          warnings.catch_warnings(record=True) as raised, structlog.testing.capture_logs() as logs):
        warnings.simplefilter("always")
        source = PrometheusSource({"tls": prom_server(name="tls", url=server.url,
                                                      insecure_skip_verify=True)},
                                  retry=ONCE, clock=lambda: NOW)
        request = target("shop/web", namespace="shop", pod_names=["web-0"], server="tls",
                         metrics=[(spec(OBJECT, "m"), metric_query(query="vector(1)"))])
        for _ in range(2):
            result = await source.fetch([request], deadline=time.monotonic() + 5)
            assert result.values["shop/web"][0] == ObjectMetricValue(value=1000)
        await source.close()
    said = [entry for entry in logs if "insecureSkipVerify" in entry["event"]]
    assert [(e["log_level"], e["server"]) for e in said] == [("warning", "tls")]
    assert not [w for w in raised if "Unverified HTTPS" in str(w.message)]


async def test_a_deeply_nested_answer_is_bad_data_without_a_traceback() -> None:
    """A 10 KB answer of 5,000 nested arrays (under maxSeries' byte threshold, so never
    counted) makes json.loads raise RecursionError: it is "not Prometheus query JSON" like
    any other garbage, not an unexpected error logged with a traceback every pass."""
    body = (b'{"status":"success","data":{"resultType":"vector","result":['
            + b"[" * 5000 + b"]" * 5000 + b"]}}")
    with HostileServer(answering(Answer(body=body))) as server:
        value, _, logs = await fetch(server.url)
    assert isinstance(value, MetricUnavailable)
    assert "unexpected" not in value.reason, value.reason
    assert not [entry for entry in logs if "exc_info" in entry or entry["log_level"] in (
        "error", "critical", "exception")]
