"""``check``'s look at the queries: each parsed offline, then (``--prometheus``) run once.

Queries are rendered as ``check`` can render them without Kubernetes: for every pod of the
target's namespace (``${pod_regex}`` = ``.*``, ``${pod_selector}`` = ``namespace="<ns>"``).
``query_issues`` parses each user query with a real PromQL parser, so an unclosed parenthesis
fails ``check`` with no Prometheus at all, whether or not the rest of the config is valid.

``run_probes`` sends every query once through the daemon's own Prometheus client (credentials,
TLS, limits), all at once (bounded), each within its server's timeout. A server that accepts
no connection is one problem, not one per query; a server answering 404 to every query is
asked whether its URL is the Prometheus base URL. An answer with no series is a warning
(nothing matches *now*: no traffic yet, or a wrong label); a rejected query, a wrong shape
or an unusable value is an error. The shape each metric type needs: a per-pod query
(Resource override, Pods) one series per pod with a ``pod`` label, an Object query exactly
one series, an External query at least one; every value finite and non-negative.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from autoscaler.adapters.prometheus.client import PrometheusClient, RetryPolicy, redact_url
from autoscaler.adapters.prometheus.parse import (
    Sample,
    all_values,
    parse_result,
    sample_milli,
    single_value,
)
from autoscaler.adapters.prometheus.queries import promql_string, requests_query, usage_query
from autoscaler.algorithm import MetricSourceType, MetricSpec
from autoscaler.commands.reach import unreachable
from autoscaler.config import Config, ConfigIssue, MetricQuery, TargetConfig, render_query
from autoscaler.config.files import UnusableFileError, read_config_file
from autoscaler.config.issues import Loc, format_loc
from autoscaler.config.locate import LineFinder
from autoscaler.config.query import promql_problem, template_problems
from autoscaler.errors import AutoscalerError, BadDataError

CONCURRENCY = 8
"""Queries in flight at once (the daemon's own cap on Prometheus workers)."""

_SOURCE_KEYS = {
    MetricSourceType.RESOURCE: "resource", MetricSourceType.CONTAINER_RESOURCE:
    "containerResource", MetricSourceType.PODS: "pods", MetricSourceType.OBJECT: "object",
    MetricSourceType.EXTERNAL: "external",
}


class Shape(StrEnum):
    PER_POD = "one series per pod"
    PER_CONTAINER = "one series per pod and container"
    SINGLE = "exactly one series"
    ANY = "at least one series"


class Verdict(StrEnum):
    OK = "ok"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One query to run for one metric of one target."""

    target: str
    metric: str
    server: str
    promql: str
    shape: Shape
    container: str | None = None
    """For a per-container answer: the container whose series must be present."""
    user: bool = True
    """The user's template (not a built-in query)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeResult:
    probe: Probe
    series: int
    verdict: Verdict
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"target": self.probe.target, "metric": self.probe.metric,
                "server": self.probe.server, "query": self.probe.promql,
                "result": self.verdict.value, "series": self.series, "problem": self.problem}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerProblem:
    """A problem with a whole server: said once instead of once per query."""

    server: str
    message: str
    queries: int
    ran: bool = False
    """Whether its queries were sent (a 404 to all) or not (no connection)."""


# --- which queries ----------------------------------------------------------------------------


def probes_for(target: TargetConfig) -> list[Probe]:
    """Every query the daemon would run for ``target``, rendered for all its namespace's pods."""
    found = []
    for index, (spec, query) in enumerate(zip(target.spec.metrics, target.metric_queries,
                                              strict=True)):
        label = f"metrics[{index}] {spec.type} {spec.name}"
        for promql, shape, user in _queries(target, spec, query):
            container = spec.container if shape is Shape.PER_CONTAINER else None
            found.append(Probe(target=target.key, metric=label, server=target.prometheus,
                               promql=promql, shape=shape, container=container, user=user))
    return found


def render_for_check(target: TargetConfig, template: str, container: str = "") -> str:
    return render_query(
        template, namespace=target.namespace, name=target.scale_target_ref.name,
        kind=target.scale_target_ref.kind, pod_regex=".*",
        pod_selector=f'namespace="{promql_string(target.namespace)}"', container=container)


def _queries(
    target: TargetConfig, spec: MetricSpec, query: MetricQuery
) -> list[tuple[str, Shape, bool]]:
    resource = spec.type in {MetricSourceType.RESOURCE, MetricSourceType.CONTAINER_RESOURCE}
    if query.query is not None:
        shape = {MetricSourceType.OBJECT: Shape.SINGLE, MetricSourceType.EXTERNAL: Shape.ANY}
        rendered = render_for_check(target, query.query, spec.container or "")
        found = [(rendered, shape.get(spec.type, Shape.PER_POD), True)]
    else:
        per_container = spec.type is MetricSourceType.CONTAINER_RESOURCE
        usage = usage_query(spec.name, namespaces=[target.namespace],
                            per_container=per_container, window=query.window)
        found = [(usage, Shape.PER_CONTAINER if per_container else Shape.PER_POD, False)]
    if resource and query.requests_source == "kube-state-metrics":
        found.append((requests_query(spec.name, namespaces=[target.namespace]),
                      Shape.PER_CONTAINER, False))
    return found


# --- offline: does each query parse -------------------------------------------------------------


def query_issues(path: Path) -> list[ConfigIssue]:
    """A ``FILE:LINE: FIELD: message`` issue for each user query that is not valid PromQL.

    Read from the file itself, not from a loaded config, so a config with other problems
    has its queries checked too: ``check`` lists every problem at once, and says it has
    (``complete``) only when it has."""
    import tomllib

    from autoscaler.config.loader import merge

    try:
        text = read_config_file(path).decode("utf-8")
        document = tomllib.loads(text)
    except (UnusableFileError, ValueError, RecursionError):
        return []  # not TOML this can read (the loader says why): no query to parse
    finder = LineFinder(text, parsed=document)
    defaults = document.get("defaults")
    defaults = defaults if isinstance(defaults, dict) else {}
    raw_targets = document.get("autoscaler")
    issues: dict[str, ConfigIssue] = {}
    for index, raw in enumerate(raw_targets if isinstance(raw_targets, list) else ()):
        if not isinstance(raw, dict):
            continue
        owner: Loc = ("autoscaler", index) if "metrics" in raw else ("defaults",)
        target = merge(defaults, raw)
        for number, key, promql in _raw_queries(target):
            problem = promql_problem(promql)
            loc: Loc = (*owner, "metrics", number, key, "query")
            if problem is not None:
                issues.setdefault(format_loc(loc), ConfigIssue(
                    file=str(path), line=finder.line_of(loc), path=format_loc(loc),
                    message=problem))
    return sorted(issues.values(), key=lambda i: (i.line is None, i.line or 0))


def _raw_queries(target: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(metric index, source key, PromQL) of each query template in a raw target table that
    can be rendered (a template the config refuses is the config's problem)."""
    metrics = target.get("metrics")
    namespace = _text(target.get("namespace"), "default")
    ref = target.get("scaleTargetRef")
    ref = ref if isinstance(ref, dict) else {}
    found: list[tuple[int, str, str]] = []
    for number, metric in enumerate(metrics if isinstance(metrics, list) else ()):
        kind = metric.get("type") if isinstance(metric, dict) else None
        key = _RAW_SOURCE_KEYS.get(kind) if isinstance(kind, str) else None
        source = metric.get(key) if key is not None else None
        if key is None or not isinstance(source, dict):
            continue
        template = source.get("query")
        if not isinstance(template, str) or template_problems(template):
            continue
        found.append((number, key, render_query(
            template, namespace=namespace, name=_text(ref.get("name"), "name"),
            kind=_text(ref.get("kind"), "Kind"), pod_regex=".*",
            pod_selector=f'namespace="{promql_string(namespace)}"',
            container=_text(source.get("container"), ""))))
    return found


_RAW_SOURCE_KEYS = {kind.value: key for kind, key in _SOURCE_KEYS.items()}


def _text(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


# --- online: run each query once ------------------------------------------------------------------


def judge(samples: Sequence[Sample], shape: Shape,
          container: str | None = None) -> tuple[Verdict, str | None]:
    """Whether an answer for a query of ``shape`` is usable: no series is a warning (nothing
    matches now), a wrong shape or value an error."""
    if not samples:
        return Verdict.WARNING, "no series: the query matches nothing now (no traffic yet, " \
                                "or a label that does not match?)"
    if container is not None:
        samples = [s for s in samples if s.container == container]
        if not samples:
            return Verdict.WARNING, f"no series for container {container!r}"
    try:
        if shape is Shape.SINGLE:
            single_value(samples)
        elif shape is Shape.ANY:
            all_values(samples)
        else:
            _per_pod(samples, per_container=shape is Shape.PER_CONTAINER)
    except BadDataError as error:
        return Verdict.ERROR, str(error)
    return Verdict.OK, None


def _per_pod(samples: Sequence[Sample], *, per_container: bool) -> None:
    seen: set[tuple[str, str]] = set()
    for sample in samples:
        pod = sample.pod
        if pod is None:
            raise BadDataError("a series has no 'pod' label; aggregate with sum by (pod)")
        key = (pod, (sample.container or "") if per_container else "")
        if key in seen:
            raise BadDataError(f"pod {pod} has several series; aggregate with sum by (pod)")
        seen.add(key)
        try:
            sample_milli(sample.raw)
        except BadDataError as error:
            raise BadDataError(f"pod {pod}: {error}") from None


Progress = Callable[[int, int], None]


def run_probes(config: Config, *, timeout: float | None = None,
               progress: Progress | None = None,
               ) -> tuple[list[ProbeResult], list[ServerProblem]]:
    """Run every target's queries once, concurrently; results in the config's order, and
    the problems of whole servers (unreachable, or 404 to everything)."""
    probes = [probe for target in config.targets for probe in probes_for(target)]
    return asyncio.run(_run_all(config, probes, timeout, progress))


async def _run_all(
    config: Config, probes: Sequence[Probe], timeout: float | None, progress: Progress | None,
) -> tuple[list[ProbeResult], list[ServerProblem]]:
    servers = config.prometheus_servers
    used = {probe.server for probe in probes if probe.server in servers}
    down = await unreachable({servers[name].url for name in used})
    problems = [ServerProblem(
        server=name, queries=sum(p.server == name for p in probes),
        message=f"cannot reach Prometheus server {name!r} at {redact_url(servers[name].url)}: "
                f"{down[servers[name].url]}; check its url in the [prometheus] table")
        for name in sorted(used) if servers[name].url in down]
    skipped = {problem.server for problem in problems}
    runnable = [p for p in probes if p.server not in skipped]
    client = PrometheusClient(servers, max_workers=CONCURRENCY, retry=RetryPolicy(attempts=1))
    done = 0
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(probe: Probe) -> ProbeResult:
        nonlocal done
        async with limit:
            result = await _run(client, config, probe, timeout)
        done += 1
        if progress is not None:
            progress(done, len(runnable))
        return result

    try:
        results = await asyncio.gather(*(one(probe) for probe in runnable))
    finally:
        client.close()
    return list(results), problems + _not_found(config, results)


async def _run(
    client: PrometheusClient, config: Config, probe: Probe, timeout: float | None
) -> ProbeResult:
    server = config.prometheus_servers.get(probe.server)
    if server is None:
        return ProbeResult(probe=probe, series=0, verdict=Verdict.ERROR,
                           problem=f"unknown Prometheus server {probe.server!r}")
    limit = timeout or server.timeout
    try:
        raw = await client.query(probe.server, probe.promql, at=time.time(),
                                 deadline=time.monotonic() + limit)
        samples = parse_result(raw)
    except AutoscalerError as error:
        return ProbeResult(probe=probe, series=0, verdict=Verdict.ERROR,
                           problem=f"{type(error).__name__}: {error}")
    verdict, problem = judge(samples, probe.shape, probe.container)
    return ProbeResult(probe=probe, series=len(samples), verdict=verdict, problem=problem)


def _not_found(config: Config, results: Sequence[ProbeResult]) -> list[ServerProblem]:
    """A server that answered 404 to every query is most likely not the base URL."""
    problems = []
    for name in sorted({r.probe.server for r in results}):
        mine = [r for r in results if r.probe.server == name]
        if mine and all((r.problem or "").startswith("BadQueryError: HTTP 404") for r in mine):
            url = redact_url(config.prometheus_servers[name].url)
            problems.append(ServerProblem(
                server=name, queries=len(mine), ran=True,
                message=f"Prometheus server {name!r} at {url} answered HTTP 404 to every "
                        f"query: is that the Prometheus base URL? (queries go to "
                        f"{url.rstrip('/')}/api/v1/query)"))
    return problems
