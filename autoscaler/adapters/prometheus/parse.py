"""Shape and value checks on what prometheus-api-client returns.

The client drops ``resultType``: an instant vector arrives as a list of
``{"metric": {...}, "value": [ts, "v"]}`` dicts, a scalar (or string) as ``[ts, "v"]``, a range
vector as dicts with ``"values"``. Values are strings and may be ``"NaN"``, ``"+Inf"`` or
``"-Inf"``. Everything that is not a usable number becomes a ``BadDataError`` naming the
problem; nothing here ever turns garbage into zero. Nor into a current value: with a
``Freshness``, a sample stamped more than ``max_age`` before the instant asked for, more than
``FUTURE_SKEW`` after it, or at no finite time, is missing (its pod is left out; an Object or
External metric is bad data).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, NamedTuple

from autoscaler.algorithm import Milli, PodSample
from autoscaler.errors import BadDataError

_MAX_ABS = 9e12
"""Beyond this, value * 1000 no longer fits a float's 53-bit integer range exactly."""


_KEYED = ("namespace", "pod", "container")

FUTURE_SKEW = 60.0
"""Seconds a sample may be stamped after the instant asked for: clocks of the daemon's node
and of a Prometheus (or a Thanos/Mimir behind it) may drift apart by that much."""


@dataclass(frozen=True, slots=True)
class Freshness:
    """The sample timestamps a pass accepts: from ``at - max_age`` to ``at + FUTURE_SKEW``."""

    at: float
    """The instant the pass asked for (Unix seconds)."""
    max_age: float

    @property
    def bounds(self) -> tuple[float, float]:
        return self.at - self.max_age, self.at + FUTURE_SKEW

    def problem(self, timestamp: float) -> str | None:
        """Why a sample stamped ``timestamp`` is not a current value, or ``None``."""
        earliest, latest = self.bounds
        if earliest <= timestamp <= latest:
            return None
        if not math.isfinite(timestamp):
            return f"sample timestamp is {_SPECIAL[str(timestamp)]}"
        if timestamp < earliest:
            return (f"sample is {self.at - timestamp:.0f}s old, older than maxSampleAge "
                    f"({self.max_age:g}s)")
        return (f"sample is stamped {timestamp - self.at:.0f}s in the future, more than the "
                f"{FUTURE_SKEW:g}s of clock skew allowed")


_ANY_TIME = (-math.inf, math.inf)
_SPECIAL = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}


class Sample:
    """One series of an instant-query answer; ``raw`` is the value as Prometheus sent it.

    The labels the adapter reads (namespace, pod, container) are attributes, their strings
    interned (a pod's name is shared by every answer that names it); other labels are kept
    as a sorted tuple and ``labels`` rebuilds the whole map for messages. A per-pod answer of
    50,000 series costs ~20 MB less than with a dict per series.
    """

    __slots__ = ("_other", "container", "namespace", "pod", "raw", "stale", "timestamp")

    def __init__(self, *, labels: Mapping[str, str], raw: str, timestamp: float,
                 stale: str | None = None) -> None:
        get = labels.get
        namespace, pod, container = get("namespace"), get("pod"), get("container")
        self.namespace = None if namespace is None else sys.intern(namespace)
        self.pod = None if pod is None else sys.intern(pod)
        self.container = None if container is None else sys.intern(container)
        self._other: tuple[tuple[str, str], ...] = () if len(labels) == (
            (namespace is not None) + (pod is not None) + (container is not None)) else tuple(
            sorted((k, v) for k, v in labels.items() if k not in _KEYED))
        self.raw = raw
        self.timestamp = timestamp
        self.stale = stale
        """Why the sample is not a current value (``Freshness.problem``), or ``None``."""

    @property
    def labels(self) -> dict[str, str]:
        keyed = zip(_KEYED, (self.namespace, self.pod, self.container), strict=True)
        return {**{k: v for k, v in keyed if v is not None}, **dict(self._other)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sample):
            return NotImplemented
        return (self.labels, self.raw, self.timestamp) == (other.labels, other.raw,
                                                           other.timestamp)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking value object: no hashing

    def __repr__(self) -> str:
        return f"Sample(labels={self.labels!r}, raw={self.raw!r}, timestamp={self.timestamp!r})"


class SeriesStream:
    """An instant vector's series, decoded one at a time as they are read (the transport's
    plain Prometheus answers): the whole answer never exists as one list of dicts. Iterated
    once."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[Any]:
        return self._items


def parse_result(result: Any, fresh: Freshness | None = None) -> list[Sample]:
    """Turn the client's ``data.result`` into samples; raise ``BadDataError`` on any other shape.

    With ``fresh``, each sample's ``stale`` says why it is too old or too new to use."""
    if not isinstance(result, list):
        if isinstance(result, SeriesStream):
            return [_series(item, fresh) for item in result]
        raise BadDataError(f"unexpected answer of type {type(result).__name__}")
    if len(result) == 2 and not isinstance(result[0], dict):
        return [_pair({}, result, fresh)]  # a scalar or string result: [ts, "v"]
    return [_series(item, fresh) for item in result]


def _series(item: Any, fresh: Freshness | None = None) -> Sample:
    if not isinstance(item, dict):
        raise BadDataError(f"unexpected series of type {type(item).__name__}")
    if "values" in item:
        raise BadDataError("query returned a range vector; an instant vector is needed")
    labels = item.get("metric")
    if not isinstance(labels, dict) or "value" not in item:
        raise BadDataError("series without 'metric' labels or 'value'")
    if not all(type(v) is str for v in labels.values()):  # JSON keys are always str
        labels = {k: str(v) for k, v in labels.items()}
    return _pair(labels, item["value"], fresh)


def _pair(labels: Mapping[str, str], pair: Any, fresh: Freshness | None) -> Sample:
    if not (isinstance(pair, list | tuple) and len(pair) == 2):
        raise BadDataError(f"malformed sample value {str(pair)[:80]!r}")
    try:
        timestamp = float(pair[0])
    except (TypeError, ValueError) as error:
        raise BadDataError(f"malformed sample timestamp {str(pair[0])[:40]!r}") from error
    stale = None if fresh is None else fresh.problem(timestamp)
    return Sample(labels=labels, raw=str(pair[1]), timestamp=timestamp, stale=stale)


def sample_milli(raw: str) -> Milli:
    """A Prometheus sample value as milli-units (0.25 cores -> 250; 1 byte -> 1000), rounded
    to the nearest (a quantity in the config rounds up: ``algorithm.quantity.milli_value``).

    NaN, infinities, negative and non-numeric values raise ``BadDataError``: none of them is
    a usage, and treating one as zero could scale a workload down.
    """
    try:
        value = float(raw)
    except ValueError:
        raise BadDataError(f"non-numeric value {raw[:40]!r}") from None
    if 0 <= value <= _MAX_ABS:  # the common case in one test (False for NaN and infinities)
        return Milli(round(value * 1000))
    if math.isnan(value):
        raise BadDataError("value is NaN")
    if math.isinf(value):
        raise BadDataError(f"value is {'+' if value > 0 else '-'}Inf")
    if value < 0:
        raise BadDataError(f"negative value {value:g}")
    if value > _MAX_ABS:
        raise BadDataError(f"value {value:g} is too large to use")
    return Milli(round(value * 1000))


def check_series_count(samples: Sized, max_series: int) -> None:
    """A series explosion (a broken label, a missing aggregation) is bad data, not a value."""
    if len(samples) > max_series:
        raise BadDataError(
            f"series explosion: {len(samples)} series, more than the limit of {max_series}"
        )


class PodSeries(NamedTuple):
    """One series of a per-pod answer: its value in milli-units, or why it has none."""

    namespace: str | None
    container: str | None
    value: Milli | None
    problem: str | None
    timestamp: float


_new_series = tuple.__new__
"""Builds a ``PodSeries`` without the Python-level ``__new__`` a NamedTuple call runs."""


class PodAnswer:
    """A per-pod answer indexed by its ``pod`` label, values already converted.

    Built in the worker thread that fetched the answer (``parse_pod_answer``), so the event
    loop only looks up each target's own pods: a pass over 1,000 targets sharing two
    cluster-wide answers no longer builds a ``Sample`` per series and then reads them again.
    """

    __slots__ = ("by_pod", "size", "unlabelled")

    def __init__(self) -> None:
        self.by_pod: dict[str, PodSeries | list[PodSeries]] = {}
        """A pod's one series, or a list of its several: a list for every pod held 3 MB
        more at 47,000 pods, in the answer a pass keeps until its targets have their
        samples."""
        self.unlabelled = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def series_of(self, pod: str) -> Sequence[PodSeries]:
        """The series of ``pod`` (none if the answer has none)."""
        entries = self.by_pod.get(pod)
        if entries is None:
            return ()
        return entries if isinstance(entries, list) else (entries,)

    def add(self, pod: str | None, namespace: str | None, container: str | None, raw: str,
            timestamp: float, *, stale: str | None = None) -> None:
        self.size += 1
        if pod is None:
            self.unlabelled += 1
            return
        # Interned: 50,000 series repeat a few namespaces and container names.
        namespace = None if namespace is None else sys.intern(namespace)
        container = None if container is None else sys.intern(container)
        try:
            if stale is not None:  # a pod with only a stale sample is missing, as upstream's
                raise BadDataError(stale)
            series = PodSeries(namespace, container, sample_milli(raw), None, timestamp)
        except BadDataError as error:
            series = PodSeries(namespace, container, None, str(error), timestamp)
        _index(self.by_pod, pod, series, self.by_pod.get(pod))

    def check_labelled(self) -> None:
        """A series without a pod label spoils every target's share of the answer."""
        if self.unlabelled:
            raise BadDataError(f"{self.unlabelled} series have no 'pod' label; "
                               "aggregate with sum by (pod)")

    def add_sample(self, sample: Sample) -> None:
        self.add(sample.pod, sample.namespace, sample.container, sample.raw, sample.timestamp,
                 stale=sample.stale)

    @classmethod
    def of(cls, samples: Iterable[Sample]) -> PodAnswer:
        """The index of samples parsed for another use too (an answer shared by shapes)."""
        answer = cls()
        for sample in samples:
            answer.add_sample(sample)
        return answer


def parse_pod_answer(result: Any, fresh: Freshness | None = None) -> PodAnswer:
    """``parse_result``'s checks and messages, straight into a ``PodAnswer``."""
    if not isinstance(result, list) and not isinstance(result, SeriesStream):
        raise BadDataError(f"unexpected answer of type {type(result).__name__}")
    if isinstance(result, list) and len(result) == 2 and not isinstance(result[0], dict):
        return PodAnswer.of([_pair({}, result, fresh)])
    earliest, latest = _ANY_TIME if fresh is None else fresh.bounds
    answer = PodAnswer()
    by_pod = answer.by_pod
    interned: dict[str | None, str] = {}
    stamp = math.nan  # the last timestamp read: one evaluation time stamps every series
    for item in result:
        # The plain case, read inline (this loop runs once per pod of every target): a
        # series with string namespace/pod(/container) labels and a [ts, "v"] value in range.
        try:
            labels, pair = item["metric"], item["value"]
            if not (type(labels) is dict and type(pair) is list and len(pair) == 2
                    and "values" not in item):
                raise TypeError
            timestamp, raw = float(pair[0]), pair[1]
            get = labels.get
            pod, namespace, container = get("pod"), get("namespace"), get("container")
            # A label that is there but not a string (null, a number) is not the plain case.
            if type(pod) is not str or type(raw) is not str or not (
                    (type(namespace) is str or (namespace is None and "namespace" not in labels))
                    and (type(container) is str
                         or (container is None and "container" not in labels))):
                raise TypeError
            value = float(raw)
        except (TypeError, KeyError, ValueError, IndexError):
            answer.add_sample(_series(item, fresh))  # parse_result's error, or its reading
            continue
        if not (0 <= value <= _MAX_ABS and earliest <= timestamp <= latest):
            # NaN, infinities, negative, huge, stale: the full reading
            stale = None if fresh is None else fresh.problem(timestamp)
            answer.add(pod, namespace, container, raw, timestamp, stale=stale)
            continue
        # Interned: 50,000 series repeat a few namespaces and container names.
        ns, name = interned.get(namespace), interned.get(container)
        if ns is None and namespace is not None:
            ns = interned[namespace] = sys.intern(namespace)
        if name is None and container is not None:
            name = interned[container] = sys.intern(container)
        # Kept with each pod's sample: one float object for the answer, not one a series.
        stamp = timestamp = stamp if timestamp == stamp else timestamp
        answer.size += 1
        series = _new_series(PodSeries, (ns, name, round(value * 1000), None, timestamp))
        _index(by_pod, pod, series, by_pod.get(pod))
    return answer


def _index(by_pod: dict[str, PodSeries | list[PodSeries]], pod: str, series: PodSeries,
           entries: PodSeries | list[PodSeries] | None) -> None:
    """Add ``series`` to ``pod``'s ``entries`` (what ``by_pod`` holds for it): alone, or in
    a list from its second on."""
    if entries is None:
        by_pod[pod] = series
    elif isinstance(entries, list):
        entries.append(series)
    else:
        by_pod[pod] = [entries, series]


def pod_samples(
    answer: PodAnswer, *, namespace: str, pods: AbstractSet[str], window: float,
    container: str | None = None,
) -> tuple[dict[str, PodSample], list[str]]:
    """Per-pod samples for the target's ``pods``, plus notes on pods dropped for bad values.

    A series without a ``pod`` label, or two series for one pod, make the whole vector bad
    data (the query lacks an aggregation). Series of other namespaces (when labelled) and
    other pods are ignored. A pod whose value is NaN, infinite, negative or non-numeric is
    left out, so the core treats it as missing (never as zero); the notes say which and why.
    With ``container``, only that container's series count (built-in per-container queries),
    and a pod with series but none for that container fails the metric, as upstream.
    """
    answer.check_labelled()
    if container is not None:
        _check_container_present(answer, pods, namespace, container)
    found: dict[str, PodSample] = {}
    dropped: dict[str, str] = {}
    for pod in pods:
        for series in answer.series_of(pod):
            if series.namespace not in (None, namespace):
                continue
            if container is not None and series.container != container:
                continue
            if pod in found or pod in dropped:
                raise BadDataError(f"pod {pod} has several series; aggregate with sum by (pod)")
            if series.value is None:
                dropped[pod] = f"pod {pod}: {series.problem}"
            else:
                found[pod] = PodSample(value=series.value, timestamp=series.timestamp,
                                       window=window)
    if not found:
        detail = f" ({'; '.join(dropped.values())})" if dropped else ""
        raise BadDataError(f"no usable sample for any of the target's {len(pods)} pods{detail}")
    return found, list(dropped.values())


def _check_container_present(answer: PodAnswer, pods: AbstractSet[str],
                             namespace: str, container: str) -> None:
    # Upstream: a pod with metrics but none for the named container fails the whole metric
    # ("container %s not present in metrics for pod %s/%s").
    def lacks_it(pod: str) -> bool:
        containers = [s.container for s in answer.series_of(pod) if s.namespace == namespace]
        return bool(containers) and container not in containers

    missing = sorted(filter(lacks_it, pods))
    if missing:
        raise BadDataError(
            f"container {container} not present in metrics for pod {namespace}/{missing[0]}")


def single_value(samples: Sequence[Sample]) -> Milli:
    """The one value an Object metric query must yield."""
    if not samples:
        raise BadDataError("empty result: the query matched no series")
    if len(samples) > 1:
        raise BadDataError(f"{len(samples)} series where exactly one is expected")
    if samples[0].stale is not None:
        raise BadDataError(samples[0].stale)
    return sample_milli(samples[0].raw)


def all_values(samples: Sequence[Sample]) -> tuple[Milli, ...]:
    """Every value of an External metric query (the core sums them); any bad one spoils all."""
    if not samples:
        raise BadDataError("empty result: the query matched no series")
    values = []
    for sample in samples:
        try:
            if sample.stale is not None:
                raise BadDataError(sample.stale)
            values.append(sample_milli(sample.raw))
        except BadDataError as error:
            raise BadDataError(f"series {_describe(sample.labels)}: {error}") from None
    return tuple(values)


def _describe(labels: Mapping[str, str]) -> str:
    name = labels.get("__name__", "")
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}"[:200]
