"""An instant vector written as Prometheus writes it is parsed a series at a time: the same
samples, the same refusals, as reading the whole document first (what every other answer
still gets), with no list of every series' dicts alive at once."""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest
import requests

from autoscaler.adapters.prometheus import transport
from autoscaler.adapters.prometheus.parse import (
    PodAnswer,
    SeriesStream,
    parse_pod_answer,
    parse_result,
)
from autoscaler.errors import BadDataError
from tests.sim.prometheus import LoopbackHTTPServer, StubResponse

NOW = time.time()
HEAD = '{"status":"success","data":{"resultType":"vector","result":['


def series(pod: str, value: str = "0.25", **labels: str) -> str:
    metric = {"namespace": "shop", "pod": pod, **labels}
    return json.dumps({"metric": metric, "value": [NOW, value]}, separators=(",", ":"))


PLAIN = HEAD + ",".join(series(f"web-{i}") for i in range(3)) + "]}}"

STREAM, WHOLE = "one at a time", "whole"

ANSWERS: dict[str, tuple[str, list[str]]] = {
    # name: (body, how the parse was given data.result, in turn)
    "plain": (PLAIN, [STREAM]),
    "warnings and infos": (PLAIN[:-1] + ',"warnings":["w"],"infos":["i"]}', [STREAM]),
    "spaces between series": (HEAD + series("a") + " ,\n " + series("b") + " ] } }\n",
                              [STREAM]),
    "labels beyond pod and namespace": (HEAD + series("a", container="app", job="x") + "]}}",
                                        [STREAM]),
    "values that are no number": (HEAD + ",".join(
        series(f"p{i}", value) for i, value in enumerate(["NaN", "+Inf", "-1", "x"])) + "]}}",
        [STREAM]),
    "a series of the wrong shape": (HEAD + series("a") + ',{"metric":{"pod":"b"}}]}}',
                                    [STREAM]),
    # Read whole after all: what follows the series changes what data.result is.
    "a later result replaces the series": (PLAIN[:-2] + ',"result":[' + series("z") + "]}}",
                                           [STREAM, WHOLE]),
    "a later status says error": (PLAIN[:-1] + ',"status":"error"}', [STREAM]),
    # Not JSON past a series: refused as "not Prometheus query JSON", as when read whole.
    "cut off after a series": (PLAIN[:len(HEAD) + len(series("web-0")) + 5], [STREAM]),
    "garbage between series": (HEAD + series("a") + ";" + series("b") + "]}}", [STREAM]),
    "a space JSON does not know": (HEAD + series("a") + "\u00a0," + series("b") + "]}}",
                                   [STREAM]),
    "garbage after the series": (PLAIN + "x", [STREAM]),
    "nested too deep": (HEAD + series("a") + "," + "[" * 100_000 + "]" * 100_000 + "]}}",
                        [STREAM]),
    # Never one at a time.
    "empty": (HEAD + "]}}", [WHOLE]),
    "a first series that is no object": (HEAD + '[1,"2"]]}}', [WHOLE]),
}
"""Answers that begin as Prometheus's do."""


def exchange(url: str) -> transport.Exchange:
    return transport.Exchange(server="default", url=url, timeout=5.0,
                              max_response_bytes=1 << 24, max_series=1_000_000,
                              follow_redirects="same-origin")


def served(body: str, parse: Callable[[Any], Any]) -> Any:
    """``parse`` of ``body`` fetched over loopback HTTP through the transport, as a query's
    worker thread does."""
    with LoopbackHTTPServer(lambda _: StubResponse(body=body.encode())) as server, \
            requests.Session() as session:
        try:
            return transport.query(session, f"{server.url}/api/v1/query",
                                   params={"query": "q"}, headers={}, auth=None,
                                   exchange=exchange(server.url), parse=parse)
        except BadDataError as error:  # named as read_whole names it
            raise BadDataError(str(error).replace(server.url, "http://x")) from None


def read_whole(body: str, parse: Callable[[Any], Any]) -> Any:
    """What the answer meant before: the whole document decoded, then parsed."""
    return parse(transport._decode(bytearray(body.encode()), exchange("http://x")))


def outcome(read: Callable[[], Any]) -> Any:
    """A comparable outcome: the samples or index, or the refusal's message."""
    try:
        got = read()
    except BadDataError as error:
        return ("refused", str(error))
    if isinstance(got, PodAnswer):
        return ("pods", got.size, got.unlabelled, got.by_pod)
    return ("samples", [(s.labels, s.raw, s.timestamp, s.stale) for s in got])


@pytest.mark.parametrize("parse", [parse_result, parse_pod_answer], ids=["samples", "by pod"])
@pytest.mark.parametrize("name", list(ANSWERS))
def test_an_answer_reads_as_the_whole_document_does(name: str,
                                                    parse: Callable[[Any], Any]) -> None:
    body, how = ANSWERS[name]
    given: list[str] = []

    def recording(result: Any) -> Any:
        given.append(STREAM if isinstance(result, SeriesStream) else WHOLE)
        return parse(result)

    expected = outcome(lambda: read_whole(body, parse))
    got = outcome(lambda: served(body, recording))
    assert got == expected
    assert given == how


def test_a_series_is_decoded_only_when_the_parse_reaches_it() -> None:
    """Lazy: a parse that stops after the first series never meets the garbage after it
    (read whole, the answer is refused before the parse starts)."""
    body = HEAD + series("web-0") + ",{oops]}}"

    def first_pod(result: Any) -> str:
        return str(next(iter(result))["metric"]["pod"])

    assert served(body, first_pod) == "web-0"
    with pytest.raises(BadDataError, match="not Prometheus query JSON"):
        read_whole(body, first_pod)


def test_an_answer_refused_whole_leaves_its_text_on_no_frame_of_the_error() -> None:
    """Read whole (any caller, including those that keep the error as it was raised): the
    refusal's traceback holds no frame with the answer's text, and it was raised during no
    other error (issue 40: each kept error held its answer until the next collection)."""
    body = b'{"status":"success","data":' + b"x" * 100_000
    with pytest.raises(BadDataError, match="not Prometheus query JSON") as caught:
        transport._decode(bytearray(body), exchange("http://x"))
    held = [name for frame, _ in traceback.walk_tb(caught.value.__traceback__)
            if frame.f_code.co_filename == transport.__file__
            for name, value in frame.f_locals.items()
            if isinstance(value, str | bytes | bytearray) and len(value) >= 100_000]
    assert held == []
    assert caught.value.__context__ is None
