"""The test exporter's server process: serves ``/metrics`` on 127.0.0.1, takes edits on stdin.

It runs apart from the test process on purpose: a test process that holds the GIL for a
second (a long C call, a full collection of a large heap) would otherwise make a scrape time
out, and a missing scrape makes ``rate()`` extrapolate short of the truth (a counter of
0.05/s read as 0.02/s). A real exporter is its own process too.

Protocol (one JSON object per line; stdlib only, so it starts fast):
- on start it writes ``{"port": N}`` to stdout;
- each stdin line is ``{"op": "set", "name": ..., "series": [[labels, value, per_second]]}``,
  ``{"op": "remove", "name": ..., "labels": labels | null}`` or ``{"op": "clear"}`` (NaN and
  infinities travel as Python's json writes them); it answers ``{"ok": true}`` once the edit
  is what the next scrape sees;
- stdin closing (the test process exiting, however it exits) stops the server.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LabelKey = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class Series:
    value: float
    per_second: float | None = None
    since: float = field(default_factory=time.time)

    def sample(self) -> str:
        """The exposition value; a counter carries its own timestamp (ms) so ``rate()`` is exact
        however late the scrape is served on a busy machine."""
        if self.per_second is None:
            return format_value(self.value)
        millis = int(time.time() * 1000)
        value = self.value + self.per_second * (millis / 1000 - self.since)
        return f"{format_value(value)} {millis}"


def format_value(value: float | str) -> str:
    if isinstance(value, str):
        return value
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def label_key(labels: dict[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[str, dict[LabelKey, Series]] = {}

    def apply(self, edit: dict[str, Any]) -> None:
        with self._lock:
            if edit["op"] == "set":
                family = self._series.setdefault(edit["name"], {})
                for labels, value, per_second in edit["series"]:
                    family[label_key(labels)] = Series(float(value), per_second)
            elif edit["op"] == "remove":
                if edit["labels"] is None:
                    self._series.pop(edit["name"], None)
                else:
                    self._series.get(edit["name"], {}).pop(label_key(edit["labels"]), None)
            elif edit["op"] == "clear":
                self._series.clear()
            else:
                raise ValueError(f"unknown edit {edit['op']!r}")

    def render(self) -> bytes:
        with self._lock:
            lines = []
            for name in sorted(self._series):
                for labels, series in self._series[name].items():
                    rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                    lines.append(f"{name}{{{rendered}}} {series.sample()}")
        return ("\n".join(lines) + "\n").encode()


def serve_metrics(render: Callable[[], bytes]) -> ThreadingHTTPServer:
    """Serve ``render()`` as ``/metrics`` on a free 127.0.0.1 port from a daemon thread (the
    bench's synthetic exporter uses it too); ``shutdown()`` and ``server_close()`` stop it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            found = self.path.split("?", 1)[0] == "/metrics"
            body = render() if found else b""
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the per-request stderr line."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server


def main() -> None:
    registry = Registry()
    server = serve_metrics(registry.render)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    for line in sys.stdin:
        try:
            registry.apply(json.loads(line))
            answer: dict[str, Any] = {"ok": True}
        except (ValueError, KeyError, TypeError) as error:
            answer = {"ok": False, "error": repr(error)}
        print(json.dumps(answer), flush=True)
    server.shutdown()


if __name__ == "__main__":
    main()
