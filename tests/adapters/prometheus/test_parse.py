"""Shape and value checks on the client's raw answers (pure functions, no server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.adapters.prometheus.parse import (
    Freshness,
    PodAnswer,
    Sample,
    all_values,
    check_series_count,
    parse_pod_answer,
    parse_result,
    pod_samples,
    sample_milli,
    single_value,
)
from autoscaler.errors import BadDataError


@pytest.mark.parametrize(("raw", "milli"), [
    ("0.25", 250), ("1", 1000), ("0", 0), ("1e-3", 1), ("104857600", 104857600000),
    ("0.0004", 0), ("0.0005", 0), ("0.0015", 2),
], ids=["quarter-core", "one", "zero", "one-milli", "100MiB", "rounds-down", "half-even",
        "half-even-up"])
def test_sample_milli(raw: str, milli: int) -> None:
    """Values become integer milli-units, rounded to nearest (ties to even)."""
    assert sample_milli(raw) == milli


@pytest.mark.parametrize(("raw", "message"), [
    ("NaN", "value is NaN"), ("+Inf", "value is +Inf"), ("-Inf", "value is -Inf"),
    ("-0.5", "negative value -0.5"), ("abc", "non-numeric value 'abc'"),
    ("1e300", "too large"),
], ids=["nan", "pos-inf", "neg-inf", "negative", "text", "huge"])
def test_sample_milli_rejects(raw: str, message: str) -> None:
    """Unusable values raise BadDataError naming the problem; none becomes zero."""
    with pytest.raises(BadDataError, match=message.replace("+", r"\+")):
        sample_milli(raw)


@pytest.mark.parametrize(("result", "expected"), [
    ([], []),
    ([1700000000.5, "3"], [Sample(labels={}, raw="3", timestamp=1700000000.5)]),
    ([{"metric": {"pod": "a"}, "value": [1.0, "2"]}],
     [Sample(labels={"pod": "a"}, raw="2", timestamp=1.0)]),
    ([{"metric": {"a": "1"}, "value": [1.0, "1"]}, {"metric": {"a": "2"}, "value": [1.0, "2"]}],
     [Sample(labels={"a": "1"}, raw="1", timestamp=1.0),
      Sample(labels={"a": "2"}, raw="2", timestamp=1.0)]),
], ids=["empty", "scalar", "vector", "two-series-vector"])
def test_parse_result(result: Any, expected: list[Sample]) -> None:
    """Vectors and scalars (as the client hands them over) become samples."""
    assert parse_result(result) == expected


REJECTED = [
    ({"resultType": "vector"}, "unexpected answer"),
    ([{"metric": {}, "values": [[1.0, "1"]]}], "range vector"),
    ([{"metric": {}, "value": [1.0, "1"], "values": [[1.0, "1"]]}], "range vector"),
    ([{"value": [1.0, "1"]}], "without 'metric'"),
    ([{"metric": {"pod": "a"}}], "without 'metric'"),
    ([["pod", "a"]], "unexpected series"),
    (["x"], "unexpected series"),
    ([{"metric": {}, "value": ["later", "1"]}], "malformed sample timestamp"),
    ([{"metric": {}, "value": [None, "1"]}], "malformed sample timestamp"),
    ([{"metric": {}, "value": [1.0]}], "malformed sample value"),
    ([{"metric": {}, "value": "1"}], "malformed sample value"),
]


@pytest.mark.parametrize(("result", "message"), REJECTED)
def test_parse_rejects(result: Any, message: str) -> None:
    """Any other shape is bad data with a specific message, whether the answer is read whole
    or indexed per pod while parsing."""
    with pytest.raises(BadDataError, match=message):
        parse_result(result)
    with pytest.raises(BadDataError, match=message):
        parse_pod_answer(result)


def _contents(answer: PodAnswer) -> tuple[dict[str, list[Any]], int, int]:
    return ({pod: [tuple(series) for series in answer.series_of(pod)]
             for pod in answer.by_pod}, answer.unlabelled, len(answer))


@pytest.mark.parametrize("result", [
    [],
    [1700000000.5, "3"],
    [{"metric": {"pod": "a", "namespace": "ns"}, "value": [1.0, "2"]},
     {"metric": {"pod": "a", "namespace": "other", "container": "c"}, "value": ["1.5", "NaN"]},
     {"metric": {"pod": "b"}, "value": [2, "-1"]},
     {"metric": {"job": "x"}, "value": [2, "1"]}],
    [{"metric": {"pod": 7, "namespace": "ns"}, "value": [1.0, 3]}],
    [{"metric": {"pod": "a"}, "value": (1.0, "4")}],
    [{"metric": {"pod": "a", "namespace": None}, "value": [1.0, "2"]},
     {"metric": {"pod": None, "namespace": "ns"}, "value": [1.0, "2"]},
     {"metric": {"pod": "b", "namespace": "ns", "container": None}, "value": [1.0, "2"]}],
], ids=["empty", "scalar", "mixed", "non-string-labels", "tuple-pair", "null-labels"])
def test_pod_answer_reads_as_parse_result_then_index(result: Any) -> None:
    """The fast path in the worker thread gives what parsing then indexing would: the same
    series under each pod, the same values (milli) or problems, unlabelled series counted."""
    fast, slow = parse_pod_answer(result), PodAnswer.of(parse_result(result))
    assert _contents(fast) == _contents(slow)
    assert len(fast) == (len(result) if result and isinstance(result[0], dict)
                         else 1 if result else 0)


def _mostly(draw: st.DrawFn, usual: st.SearchStrategy[Any], *odd: st.SearchStrategy[Any],
            in_twenty: int = 14) -> Any:
    """``usual`` ``in_twenty`` times in twenty, else one of the ``odd`` ones."""
    pick = draw(st.integers(0, 19))
    return draw(usual) if pick < in_twenty else draw(odd[pick % len(odd)])


@st.composite
def _series(draw: st.DrawFn) -> Any:
    """Mostly well-formed series (else nearly every list fails whole), with every kind of
    oddity mixed in: labels missing, null or not strings; values out of range or not text;
    malformed timestamps and pairs; a key missing."""
    names = st.sampled_from(["a", "b", "ns", "", "c"])
    labels = {key: _mostly(draw, names, st.none(), st.integers(0, 3))
              for key in ("pod", "namespace", "container", "job")
              if draw(st.integers(0, 9)) < (9 if key == "pod" else 4)}
    raw = _mostly(draw, st.sampled_from(
        ["0.25", "1", "0", "1e3", "-1", "-0", "NaN", "+Inf", "-Inf", "1e13", "9e12", "x"]),
        st.floats(allow_nan=True).map(repr), st.floats(allow_nan=True),
        st.integers(-5, 5), st.booleans(), st.none())
    stamp = _mostly(draw, st.floats(0, 2e9), st.integers(0, 5), st.just("1.5"), st.just("later"),
                    st.none(), in_twenty=18)
    pair = _mostly(draw, st.just([stamp, raw]), st.just((stamp, raw)), st.just([stamp]),
                   st.just([stamp, raw, raw]), in_twenty=18)
    item: dict[str, Any] = {"metric": labels, "value": pair}
    if draw(st.integers(0, 60)) == 0:
        item.pop(draw(st.sampled_from(["metric", "value"])))
    return item


@settings(max_examples=400)
@given(st.lists(_series(), max_size=4))
def test_pod_answer_fast_path_reads_as_the_slow_one(result: list[Any]) -> None:
    """Whatever the series look like, the inline fast path indexes exactly what parsing
    then indexing gives, or fails with the same message."""
    assert _outcome(lambda: PodAnswer.of(parse_result(result))) == _outcome(
        lambda: parse_pod_answer(result))


def _outcome(read: Callable[[], PodAnswer]) -> object:
    try:
        return _contents(read())
    except BadDataError as error:
        return f"BadDataError: {error}"


def test_pod_answer_values_and_problems() -> None:
    """Values are milli-units; an unusable one keeps its reason, and never becomes zero."""
    answer = parse_pod_answer([
        {"metric": {"pod": "a", "namespace": "ns"}, "value": [5.0, "0.25"]},
        {"metric": {"pod": "b", "namespace": "ns"}, "value": [5.0, "+Inf"]},
        {"metric": {"namespace": "ns"}, "value": [5.0, "1"]},
    ])
    assert [(s.value, s.problem) for s in answer.series_of("a")] == [(250, None)]
    assert [(s.value, s.problem) for s in answer.series_of("b")] == [(None, "value is +Inf")]
    assert answer.series_of("c") == ()
    # A pod's one series is kept as itself, not in a list of one (3 MB at 47,000 pods).
    assert not any(isinstance(entries, list) for entries in answer.by_pod.values())
    with pytest.raises(BadDataError, match="1 series have no 'pod' label"):
        answer.check_labelled()


def s(raw: str, **labels: str) -> Sample:
    return Sample(labels=labels, raw=raw, timestamp=100.0)


def test_pod_samples_keep_only_the_targets_pods() -> None:
    """Other namespaces and pods are ignored; each sample keeps its time and the window."""
    found, notes = pod_samples(
        PodAnswer.of([s("1", pod="a", namespace="ns"), s("2", pod="b", namespace="other"),
                      s("3", pod="z", namespace="ns")]),
        namespace="ns", pods=frozenset({"a", "b"}), window=30.0)
    assert (set(found), notes) == ({"a"}, [])
    assert (found["a"].value, found["a"].timestamp, found["a"].window) == (1000, 100.0, 30.0)


def test_pod_samples_drop_bad_pods_and_say_why() -> None:
    """A NaN for one pod leaves that pod out (missing, not zero) with a note."""
    found, notes = pod_samples(PodAnswer.of([s("NaN", pod="a"), s("2", pod="b")]), namespace="ns",
                               pods=frozenset({"a", "b"}), window=60.0)
    assert (set(found), notes) == ({"b"}, ["pod a: value is NaN"])


def test_pod_samples_by_container() -> None:
    """With a container, only that container's series count."""
    found, _ = pod_samples(PodAnswer.of([s("1", pod="a", container="app"),
                                         s("9", pod="a", container="x")]),
                           namespace="ns", pods=frozenset({"a"}), window=60.0,
                           container="app")
    assert found["a"].value == 1000


@pytest.mark.parametrize(("samples", "message"), [
    ([s("1", namespace="ns")], "no 'pod' label"),
    ([s("1", pod="a"), s("2", pod="a")], "pod a has several series"),
    ([s("1", pod="zz")], "no usable sample for any of the target's 1 pods"),
    ([s("-1", pod="a")], r"no usable sample .* \(pod a: negative value -1\)"),
], ids=["no-pod-label", "duplicate-pod", "no-target-pod", "all-bad"])
def test_pod_samples_reject(samples: list[Sample], message: str) -> None:
    """Vectors that cannot be read per pod are bad data."""
    with pytest.raises(BadDataError, match=message):
        pod_samples(PodAnswer.of(samples), namespace="ns", pods=frozenset({"a"}), window=60.0)


def test_single_value() -> None:
    """An Object metric takes its one series' value."""
    assert single_value([s("4.5")]) == 4500


@pytest.mark.parametrize(("samples", "message"), [
    ([], "empty result"), ([s("1"), s("2"), s("3")], "3 series where exactly one")],
    ids=["empty", "three"])
def test_single_value_rejects(samples: list[Sample], message: str) -> None:
    """Zero or several series for an Object metric are bad data."""
    with pytest.raises(BadDataError, match=message):
        single_value(samples)


def test_all_values() -> None:
    """An External metric keeps every value, in order, for the core to sum."""
    assert all_values([s("1"), s("2.5")]) == (1000, 2500)


def test_all_values_one_bad_spoils_all() -> None:
    """One bad series makes the whole External metric unavailable, naming the series."""
    with pytest.raises(BadDataError, match=r'q\{queue="b"\}: value is NaN'):
        all_values([s("1", __name__="q", queue="a"), s("NaN", __name__="q", queue="b")])


def test_series_explosion() -> None:
    """More series than the limit is bad data; the limit itself is fine."""
    check_series_count([s("1")] * 3, 3)
    with pytest.raises(BadDataError, match="series explosion: 4 series"):
        check_series_count([s("1")] * 4, 3)


AT = 1_800_000_000.0
FRESH = Freshness(AT, 300.0)


@pytest.mark.parametrize(("stamped", "problem"), [
    (AT, None), (AT - 300, None), (AT + 60, None),
    (AT - 301, "sample is 301s old, older than maxSampleAge (300s)"),
    (AT + 61, "sample is stamped 61s in the future, more than the 60s of clock skew allowed"),
    (float("nan"), "sample timestamp is NaN"), (float("inf"), "sample timestamp is +Inf"),
], ids=["now", "max-age", "max-skew", "too-old", "too-new", "nan", "inf"])
def test_freshness(stamped: float, problem: str | None) -> None:
    """A sample is current from maxSampleAge before the instant asked for to 60 s after it."""
    assert FRESH.problem(stamped) == problem


@pytest.mark.parametrize("parse", [
    lambda r: PodAnswer.of(parse_result(r, FRESH)), lambda r: parse_pod_answer(r, FRESH)],
    ids=["via-samples", "direct"])
def test_a_stale_pod_is_dropped_with_its_reason(parse: Callable[[Any], PodAnswer]) -> None:
    """A stale sample leaves its pod out (missing) and says why; fresh pods stay."""
    answer = parse([{"metric": {"pod": "a"}, "value": [AT, "1"]},
                    {"metric": {"pod": "b"}, "value": [AT - 3600, "1"]}])
    found, notes = pod_samples(answer, namespace="ns", pods={"a", "b"}, window=60)
    assert set(found) == {"a"}
    assert notes == ["pod b: sample is 3600s old, older than maxSampleAge (300s)"]


@pytest.mark.parametrize("read", [single_value, all_values], ids=["object", "external"])
def test_a_stale_single_value_is_bad_data(read: Callable[[list[Sample]], Any]) -> None:
    """An Object or External value with a stale sample is bad data, not a value."""
    samples = parse_result([{"metric": {}, "value": [AT + 3600, "1"]}], FRESH)
    with pytest.raises(BadDataError, match="3600s in the future"):
        read(samples)
