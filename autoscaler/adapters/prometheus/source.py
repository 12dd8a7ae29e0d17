"""``PrometheusSource``: the metrics source the daemon calls once per reconcile pass.

One ``fetch`` plans every target's metrics, runs each distinct (server, query) once and
concurrently, evaluated at one instant (so all targets see the same snapshot), and splits the
answers per target. It never raises: an unknown server, a query error, a timeout, an
unreachable server, a wrong shape, a bad value, a series explosion, an answer over its
server's limits (``maxResponseBytes``, ``maxSeries``, ``timeout``) or a stale sample becomes
a ``MetricUnavailable`` with the reason (a stale sample of one pod: that pod is missing), for
that target's metric only, and is logged with the target and metric bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

import structlog

from autoscaler.adapters.prometheus import batch
from autoscaler.adapters.prometheus.batch import Answer, Answers, Plan, QueryKey, Slot
from autoscaler.adapters.prometheus.client import PrometheusClient, RetryPolicy
from autoscaler.adapters.prometheus.inputs import ServerSettings, TargetRequest
from autoscaler.adapters.prometheus.kube_requests import fold_requests
from autoscaler.adapters.prometheus.metric_history import (
    HistoryRequest,
    Point,
    history_promql,
    parse_matrix,
)
from autoscaler.adapters.prometheus.parse import (
    Freshness,
    check_series_count,
    parse_pod_answer,
    parse_result,
)
from autoscaler.adapters.prometheus.split import Splitter
from autoscaler.algorithm import MetricUnavailable, MetricValues, Pod
from autoscaler.errors import (
    AutoscalerError,
    BadDataError,
    BadQueryError,
    TimedOutError,
    detached,
)
from autoscaler.observability.repeats import RepeatedWarnings
from autoscaler.runtime.ports import FetchedMetrics

log = structlog.get_logger(__name__)

QueryObserver = Callable[[str, float, AutoscalerError | None], None]
"""Told of each query's end: its server, its seconds (retries included) and its error."""


class PrometheusSource:
    """Metrics for many targets from one or more Prometheus servers, batched per pass."""

    def __init__(
        self,
        servers: Mapping[str, ServerSettings],
        *,
        max_workers: int = 4,
        max_series_per_metric: int = 5000,
        retry_attempts: int = 3,
        retry: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        series_in_flight: int = 60_000,
        observe: QueryObserver | None = None,
        share: bool = False,
    ) -> None:
        """``max_workers`` bounds concurrent queries (all servers);
        ``max_series_per_metric`` is the number of series one (target, metric) may bring
        before the answer counts as an explosion (a query shared by N of them may return N
        times as many; each server's ``max_series`` bounds any one answer, whoever shares it);
        ``retry_attempts`` counts attempts per query, ``retry`` overrides it with a whole
        policy (tests: short waits); ``clock`` gives the Unix time each pass evaluates at;
        ``series_in_flight`` bounds the series of the answers being fetched and decoded at
        once (by the plan's estimate; a larger query runs alone): a decoded answer costs ~750
        bytes per series, and two 50,000-series answers at once were most of the daemon's
        peak memory at 10,000 targets; ``observe`` is told of every query's end; ``share``:
        the daemon reads a share of the fleet (a ring member, a static shard), so a query
        that answers for the whole fleet is cut to the share (``batch.plan``)."""
        policy = retry or RetryPolicy(attempts=retry_attempts)
        self._client = PrometheusClient(servers, max_workers=max_workers, retry=policy)
        self._servers = servers
        self._max_series = max_series_per_metric
        self._series_in_flight = series_in_flight
        self._clock = clock
        self._repeats = RepeatedWarnings(log)
        self._observe = observe
        self._share = share

    def __repr__(self) -> str:
        return (f"PrometheusSource({self._client!r}, "
                f"max_series_per_metric={self._max_series})")

    async def fetch(self, requests: Sequence[TargetRequest], *, deadline: float) -> FetchedMetrics:
        """Values for every target, aligned with its metrics; ``deadline`` is monotonic time."""
        try:
            plan = batch.plan(requests, self._client.knows, share=self._share)
            answers = await self._run_all(plan, deadline)
            return _assemble(requests, plan, answers, queries_issued=len(answers),
                             repeats=self._repeats)
        except Exception as error:  # a bug must not stop the daemon: hold every target
            log.exception("metrics fetch failed")
            reason = MetricUnavailable(reason=f"metrics fetch failed: {type(error).__name__}")
            return FetchedMetrics(values={t.key: (reason,) * len(t.metrics) for t in requests},
                                  pods={})

    async def history(self, request: HistoryRequest, *, start: float, end: float, step: float,
                      deadline: float) -> list[Point]:
        """The metric's total every ``step`` seconds from ``start`` to ``end`` (Unix times),
        for the forecaster; raises ``TransientError``, ``AccessDeniedError``,
        ``BadQueryError`` or ``BadDataError``."""
        if not self._client.knows(request.server):
            raise BadQueryError(f"unknown Prometheus server {request.server!r}")
        points: list[Point] = await self._client.query_range(
            request.server, history_promql(request), start=start, end=end, step=step,
            deadline=deadline, parse=parse_matrix)
        return points

    async def close(self) -> None:
        """Returns at once: queries still running are cut off by their own timeout."""
        self._client.close()

    async def _run_all(self, plan: Plan, deadline: float) -> Answers:
        at = self._clock()
        # A query shared by N slots may return N times the per-slot limit (a built-in query
        # over many targets' namespaces legitimately has one series per pod of them all).
        expected = plan.expected_series()
        per_pod = plan.per_pod()
        budget = _SeriesBudget(self._series_in_flight)
        fresh = {name: Freshness(at, server.max_sample_age)
                 for name, server in self._servers.items()}
        tasks = {
            asyncio.ensure_future(self._run(key, at, deadline,
                                            max_series=self._max_series * sharers,
                                            budget=budget, expected=expected[key],
                                            per_pod=key in per_pod,
                                            fresh=fresh[key.server])): key
            for key, sharers in plan.sharers().items()
        }
        if not tasks:
            return {}
        # The client stops at the deadline on its own; this only guards against a stuck task.
        done, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic())
                                           + 0.5)
        for task in pending:
            task.cancel()
        answers: dict[QueryKey, Answer | AutoscalerError] = {
            tasks[task]: task.result() for task in done}
        for task in pending:
            answers[tasks[task]] = TimedOutError("no answer before the pass's deadline")
        return answers

    async def _run(
        self, key: QueryKey, at: float, deadline: float, *, max_series: int,
        budget: _SeriesBudget, expected: int, per_pod: bool, fresh: Freshness,
    ) -> Answer | AutoscalerError:
        bound = log.bind(server=key.server, query=key.promql[:300])
        parse = functools.partial(parse_pod_answer if per_pod else parse_result, fresh=fresh)
        started: float | None = None
        outcome: AutoscalerError | None = TimedOutError("cut off at the pass's deadline")
        try:
            async with budget.hold(expected):
                started = time.monotonic()
                answer: Answer = await self._client.query(
                    key.server, key.promql, at=at, deadline=deadline, parse=parse,
                    max_series=max_series)
            check_series_count(answer, max_series)
            outcome = None
        except AutoscalerError as error:
            bound.warning("query failed", error=str(error), kind=type(error).__name__)
            outcome = detached(error)
            return outcome
        except Exception as error:
            bound.exception("query failed unexpectedly")
            outcome = BadDataError(f"unexpected {type(error).__name__} while querying")
            return outcome
        finally:
            if started is not None and self._observe is not None:
                self._observe(key.server, time.monotonic() - started, outcome)
        bound.debug("query answered", series=len(answer))
        return answer


def _assemble(
    requests: Sequence[TargetRequest], plan: Plan, answers: Answers, *, queries_issued: int,
    repeats: RepeatedWarnings,
) -> FetchedMetrics:
    values: dict[str, tuple[MetricValues, ...]] = {}
    pods: dict[str, tuple[Pod, ...]] = {}
    warnings: dict[str, tuple[str, ...]] = {}
    splitter = Splitter(answers)
    for target in requests:
        slots = plan.slots[target.key]
        with_requests, failed, notes = fold_requests(target.pods, target.namespace, slots, answers,
                                                     splitter)
        names = frozenset(pod.name for pod in target.pods)
        row: list[MetricValues] = []
        for index, (spec, slot) in enumerate(zip(target.metrics, slots, strict=True)):
            value, more = _value(slot, target, names, splitter, failed.get(index))
            row.append(value)
            if more or isinstance(value, MetricUnavailable):  # rare: not paid per metric
                notes.extend(f"{spec.name}: {note}" for note in more)
                _log_value(repeats, target.key, spec.name, kind=str(spec.type), value=value,
                           notes=more)
            elif repeats:  # only while some warning is ongoing: a pass at rest pays nothing
                _log_recovered(repeats, target.key, spec.name)
        values[target.key] = tuple(row)
        if with_requests is not None:
            pods[target.key] = with_requests
        if notes:
            warnings[target.key] = tuple(notes)
    return FetchedMetrics(values=values, queries_issued=queries_issued, pods=pods,
                          warnings=warnings)


def _value(
    slot: Slot | MetricUnavailable, target: TargetRequest, names: frozenset[str],
    splitter: Splitter, requests_failure: MetricUnavailable | None,
) -> tuple[MetricValues, list[str]]:
    if isinstance(slot, MetricUnavailable):
        return slot, []
    value, notes = splitter.extract(slot, target, names)
    if requests_failure is not None and not isinstance(value, MetricUnavailable):
        return requests_failure, notes
    return value, notes


def _log_value(
    repeats: RepeatedWarnings, target: str, metric: str, *, kind: str, value: MetricValues,
    notes: Sequence[str],
) -> None:
    """Said when it starts, changes or ends, and every few minutes while it repeats."""
    if isinstance(value, MetricUnavailable):
        repeats.clear((target, metric, "notes"), "samples no longer left out", target=target,
                      metric=metric)
        repeats.warn((target, metric), "metric unavailable", reason=value.reason,
                     target=target, metric=metric, metric_type=kind)
    else:
        repeats.clear((target, metric), "metric available again", target=target,
                      metric=metric)
        repeats.warn((target, metric, "notes"), "samples left out", reason="; ".join(notes),
                     target=target, metric=metric, metric_type=kind)


def _log_recovered(repeats: RepeatedWarnings, target: str, metric: str) -> None:
    repeats.clear((target, metric), "metric available again", target=target, metric=metric)
    repeats.clear((target, metric, "notes"), "samples no longer left out", target=target,
                  metric=metric)


class _SeriesBudget:
    """A weighted semaphore over expected series; a query over the whole budget runs alone."""

    def __init__(self, limit: int) -> None:
        self._limit, self._used = limit, 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, series: int) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(
                lambda: self._used == 0 or self._used + series <= self._limit)
            self._used += series
        try:
            yield
        finally:
            async with self._changed:
                self._used -= series
                self._changed.notify_all()
