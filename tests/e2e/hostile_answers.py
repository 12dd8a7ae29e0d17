"""A scripted Prometheus for the daemon end to end: well-behaved, then hostile on demand.

``ScriptedPrometheus`` answers the per-pod queries the harness's config sends
(``app_load{namespace="...",pod=~"a|b"}``) with ``per_pod`` for each pod it names, until
``hostile`` is set: from then on every query gets the next answer of that stream. ``HOSTILE``
holds one of each kind of answer the transport must survive in bounded memory (oversized,
lying, a gzip bomb, garbage, near the series limit, dripping); ``hostile_stream(seed)`` draws
from it forever. Used by ``tests/e2e/test_hostile_answers.py`` and ``bench/hostile_memory.py``.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.adapters.prometheus.hostile import Answer, HostileServer, gzip_bomb, huge_vector, vector
from tests.e2e.harness import daemon_config
from tests.sim.prometheus import StubRequest

MB = 1 << 20
LIMIT = 16 * MB
"""The default maxResponseBytes."""

_PODS = re.compile(r'pod=~"([^"]*)"')
_BOMB = gzip_bomb(200 * MB)


def _chunked(_: random.Random) -> Answer:
    """45-200 MB with no Content-Length: read until the limit, then cut."""
    return Answer(body=huge_vector(_.randint(45, 200) * MB, at=time.time()))


def _content_length(_: random.Random) -> Answer:
    """45-200 MB announced: refused before the body is read."""
    body = huge_vector(_.randint(45, 200) * MB, at=time.time())
    return Answer(headers={"Content-Length": str(sum(map(len, body())))}, body=body)


def _gzip_bomb(_: random.Random) -> Answer:
    """200 MB of spaces in 200 KB of gzip."""
    return Answer(headers={"Content-Encoding": "gzip"}, body=_BOMB)


def _garbage(_: random.Random) -> Answer:
    """Just under the limit and not JSON: read whole, refused by the parser."""
    return Answer(body=b'{"status":"success","data":' + b"x" * (LIMIT - 64))


def _near_series_limit(_: random.Random) -> Answer:
    """99,000 small series of pods the target does not have: read, decoded, dropped."""
    at = time.time()
    one = b'{"metric":{"namespace":"other","pod":"p%06d"},"value":[%d,"1"]},'
    rows = b"".join(one % (i, at) for i in range(99_000))
    return Answer(body=b'{"status":"success","data":{"resultType":"vector","result":['
                  + rows[:-1] + b"]}}")


def _dripping(_: random.Random) -> Answer:
    """A valid start, then a byte every 50 ms: cut at the query's timeout."""
    return Answer(body=b'{"status":"success","data":{"resultType":"vector","result":['
                  + b" " * 1000, chunk=1, drip=0.05)


HOSTILE: dict[str, Callable[[random.Random], Answer]] = {
    "chunked": _chunked, "content-length": _content_length, "gzip-bomb": _gzip_bomb,
    "garbage": _garbage, "near-series-limit": _near_series_limit, "dripping": _dripping,
}


def hostile_stream(seed: int, kinds: tuple[str, ...] = tuple(HOSTILE)) -> Iterator[Answer]:
    """Hostile answers of ``kinds``, drawn at random for ever (the first ones of each kind
    in turn, so a short run sees every kind)."""
    draw = random.Random(seed)
    yield from (HOSTILE[kind](draw) for kind in kinds)
    while True:
        yield HOSTILE[draw.choice(kinds)](draw)


class ScriptedPrometheus(HostileServer):
    """``HostileServer`` answering well (``per_pod`` each) until ``hostile`` is set."""

    def __init__(self, *, per_pod: float = 50.0) -> None:
        self.per_pod = per_pod
        self.hostile: Iterator[Answer] | None = None
        self.answered: dict[str, int] = {}
        self._drawing = threading.Lock()  # one generator, many server threads
        super().__init__(self._answer)

    def _answer(self, request: StubRequest) -> Answer:
        with self._drawing:
            stream = self.hostile
            kind = "good" if stream is None else "hostile"
            self.answered[kind] = self.answered.get(kind, 0) + 1
            if stream is not None:
                return next(stream)
        query = request.params.get("query", [""])[0]
        found = _PODS.search(query)
        pods = found.group(1).split("|") if found else []
        series: list[tuple[dict[str, Any], str]] = [
            ({"namespace": "default", "pod": pod}, str(self.per_pod)) for pod in pods if pod]
        return Answer(body=vector(series, at=time.time()))


def targets_config(*, prometheus_url: str, kubeconfig: str, state_file: str,
                   names: list[str]) -> str:
    """The harness's daemon config with one target (and its own query) per deployment."""
    text = daemon_config(prometheus_url=prometheus_url, kubeconfig=Path(kubeconfig),
                         listen_port="__PORT__", state_file=Path(state_file))  # type: ignore[arg-type]
    head, _, target = text.partition("[[autoscaler]]")
    return head + "".join("[[autoscaler]]" + target.replace('name = "web"', f'name = "{name}"')
                          for name in names)
