"""A real Prometheus for tests: the process, a test exporter it scrapes, and loopback stubs.

Everything listens on 127.0.0.1 only, on ports the OS picks. Nothing here is a mock of
Prometheus: the tests talk to Debian's ``/usr/bin/prometheus``; the stubs below only stand in
for *broken* Prometheus endpoints (slow, 500-ing, checking credentials) that a real one cannot
be made to be.

API (plain context managers; wrap them in fixtures of the scope you need)::

    with MetricsExporter() as exporter, start_prometheus(scrape_targets=[exporter.target]) as prom:
        exporter.set_gauge("queue_depth", {"namespace": "ns", "pod": "web-0"}, 7)
        exporter.set_counter("container_cpu_usage_seconds_total", labels, per_second=0.25)
        prom.wait_for('queue_depth{pod="web-0"}')          # until the series is scraped
        prom.query("sum(queue_depth)")                       # raw ``data.result`` list
        prom.url                                             # http://127.0.0.1:<port>
        prom.kill()                                          # SIGKILL: "Prometheus went away"

- ``MetricsExporter``: serves ``/metrics`` (text format 0.0.4) from series the test sets:
  ``set_gauge``, ``set_counter`` (a counter growing at ``per_second``, so ``rate()`` returns
  it), ``set_many`` (thousands of series at once), ``remove``, ``clear``. Values may be NaN or
  +/-Inf. ``target`` is ``"127.0.0.1:<port>"`` for a scrape config. The server runs in a
  child process, so a busy test process never makes Prometheus miss a scrape.
- ``start_prometheus(*, scrape_targets=(), scrape_interval=1.0, data_dir=None, extra_args=(),
  binary=None)``:
  starts the binary with a temp data dir (or ``data_dir``, e.g. one filled by ``backfill``),
  ``honor_labels: true`` (so exported ``namespace``/``pod`` labels are kept as they are), waits
  until ``/-/ready``, and kills the process and removes the temp dir on exit. A missing binary
  raises ``PrometheusMissingError`` (a hard failure, never a skip).
- ``backfill(data_dir, openmetrics_text)``: ``promtool tsdb create-blocks-from openmetrics``.
- ``LoopbackHTTPServer(handler, tls=None)``: an HTTP(S) server whose every request goes to
  ``handler(StubRequest) -> StubResponse`` and is kept in ``requests``; ``count(path)``;
  ``prometheus_vector(...)`` / ``prometheus_error(...)`` build ``/api/v1/query`` answers;
  ``self_signed_cert(dir)`` makes a (cert, key) for ``tls``.
- ``CountingProxy(upstream_url)``: forwards to a real Prometheus and counts requests per path
  (``count("/api/v1/query")``) and records the PromQL it saw (``queries``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.sim.exporter_process import format_value

PROMETHEUS_BIN = os.environ.get("PROMETHEUS_BIN", "/usr/bin/prometheus")
PROMTOOL_BIN = os.environ.get("PROMTOOL_BIN", "/usr/bin/promtool")


class PrometheusMissingError(RuntimeError):
    """The Prometheus (or promtool) binary is not installed: tests must fail, not skip."""


def require_binary(path: str) -> str:
    """Return ``path`` if it is an executable file, else raise ``PrometheusMissingError``."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise PrometheusMissingError(
            f"{path} not found or not executable: install Debian's 'prometheus' package "
            "(.ci/run does), or point PROMETHEUS_BIN/PROMTOOL_BIN at the binaries"
        )
    return path


def free_port() -> int:
    """A port the OS considers free on 127.0.0.1 right now (racy, so callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- a generic loopback HTTP server ----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StubRequest:
    method: str
    path: str
    params: Mapping[str, list[str]]
    """Query-string and form parameters together (Prometheus accepts both)."""
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class StubResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0
    """Seconds to sleep before answering (a slow endpoint)."""


Handler = Callable[[StubRequest], StubResponse]


class LoopbackHTTPServer:
    """A threaded HTTP server on 127.0.0.1 that hands every request to ``handler``."""

    def __init__(self, handler: Handler, *, tls: tuple[Path, Path] | None = None) -> None:
        """``tls`` is (certificate, key) to serve HTTPS, e.g. from ``self_signed_cert``."""
        self.handler = handler
        self.requests: list[StubRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._request_class())
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile=tls[0], keyfile=tls[1])
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def count(self, path: str) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.path == path)

    def __enter__(self) -> LoopbackHTTPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _record(self, request: StubRequest) -> StubResponse:
        with self._lock:
            self.requests.append(request)
        return self.handler(request)

    def _request_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._serve(b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._serve(self.rfile.read(length))

            def _serve(self, body: bytes) -> None:
                url = urllib.parse.urlsplit(self.path)
                params = urllib.parse.parse_qs(url.query)
                if self.headers.get("Content-Type", "").startswith(
                    "application/x-www-form-urlencoded"
                ):
                    for key, values in urllib.parse.parse_qs(body.decode()).items():
                        params.setdefault(key, []).extend(values)
                request = StubRequest(
                    method=self.command, path=url.path, params=params,
                    headers=dict(self.headers.items()), body=body,
                )
                response = outer._record(request)
                if response.delay:
                    time.sleep(response.delay)
                try:
                    self.send_response(response.status)
                    self.send_header("Content-Type", response.content_type)
                    self.send_header("Content-Length", str(len(response.body)))
                    self.end_headers()
                    self.wfile.write(response.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def log_message(self, format: str, *args: Any) -> None:
                """Silence the per-request stderr line."""

        return _Handler


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own CA) and its key, made with ``openssl``."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


def prometheus_vector(
    series: Sequence[tuple[Mapping[str, str], float | str]], *, at: float | None = None
) -> bytes:
    """The JSON body of a successful instant-vector ``/api/v1/query`` answer."""
    when = time.time() if at is None else at
    result = [
        {"metric": dict(labels), "value": [when, format_value(value)]}
        for labels, value in series
    ]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


def prometheus_error(status: int, message: str, error_type: str = "bad_data") -> StubResponse:
    """A Prometheus-style error answer (``{"status": "error", ...}``)."""
    body = json.dumps({"status": "error", "errorType": error_type, "error": message})
    return StubResponse(status=status, body=body.encode())


class CountingProxy(LoopbackHTTPServer):
    """Forwards every request to ``upstream`` and remembers each PromQL query it forwarded."""

    def __init__(self, upstream: str, *, delay: float = 0.0) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.delay = delay
        """Seconds each forward is held, so overlapping queries overlap for sure."""
        self.in_flight = self.max_in_flight = 0
        super().__init__(self._forward)

    @property
    def queries(self) -> list[str]:
        with self._lock:
            return [q for r in self.requests for q in r.params.get("query", [])]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()

    def _forward(self, request: StubRequest) -> StubResponse:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        conn = http.client.HTTPConnection(self.upstream.netloc, timeout=30)
        try:
            time.sleep(self.delay)
            query = urllib.parse.urlencode(request.params, doseq=True)
            conn.request(request.method, f"{request.path}?{query}")
            answer = conn.getresponse()
            return StubResponse(
                status=answer.status, body=answer.read(),
                content_type=answer.getheader("Content-Type", "application/json"),
            )
        finally:
            conn.close()
            with self._lock:
                self.in_flight -= 1


# --- the test exporter -----------------------------------------------------------------------


class MetricsExporter:
    """Serves ``/metrics`` with the series a test sets, from a child process; thread-safe.

    The server lives in its own process (``exporter_process.py``) so that a test process busy
    holding the GIL cannot make Prometheus miss a scrape. Each edit returns once the next
    scrape will see it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def target(self) -> str:
        """``host:port`` for a Prometheus ``static_configs`` entry."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> MetricsExporter:
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("exporter_process.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        )
        self.port = int(self._answer()["port"])
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.close()  # the child's cue to stop
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        process.stdout.close()

    def set_gauge(self, name: str, labels: Mapping[str, str], value: float) -> None:
        self._edit({"op": "set", "name": name, "series": [[dict(labels), value, None]]})

    def set_counter(
        self, name: str, labels: Mapping[str, str], *, per_second: float, start: float = 0.0
    ) -> None:
        """A counter at ``start`` now, growing by ``per_second`` (so ``rate()`` gives it)."""
        self._edit({"op": "set", "name": name, "series": [[dict(labels), start, per_second]]})

    def set_many(self, name: str, label_sets: Sequence[Mapping[str, str]], value: float) -> None:
        series = [[dict(labels), value, None] for labels in label_sets]
        self._edit({"op": "set", "name": name, "series": series})

    def remove(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """Drop one series, or the whole family when ``labels`` is None."""
        self._edit({"op": "remove", "name": name,
                    "labels": None if labels is None else dict(labels)})

    def clear(self) -> None:
        self._edit({"op": "clear"})

    def _edit(self, edit: dict[str, Any]) -> None:
        with self._lock:
            if self._process is None or self._process.stdin is None:
                raise RuntimeError("the exporter is not running (use it as a context manager)")
            self._process.stdin.write(json.dumps(edit) + "\n")
            self._process.stdin.flush()
            answer = self._answer()
        if not answer.get("ok"):
            raise ValueError(f"the exporter refused {edit['op']}: {answer.get('error')}")

    def _answer(self) -> dict[str, Any]:
        assert self._process is not None
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the exporter process exited (code {self._process.poll()})")
        return dict(json.loads(line))



# --- the Prometheus process ------------------------------------------------------------------


class PrometheusProcess:
    """A running ``prometheus``; use ``start_prometheus`` to get one."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, promql: str, *, at: float | None = None) -> list[Any]:
        """The raw ``data.result`` of an instant query (raises on an error answer)."""
        params = {"query": promql} | ({"time": str(at)} if at is not None else {})
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as answer:  # loopback only
            return list(json.load(answer)["data"]["result"])

    def wait_for(
        self,
        promql: str,
        predicate: Callable[[list[Any]], bool] = bool,
        *,
        timeout: float = 30.0,
    ) -> list[Any]:
        """Poll ``promql`` until ``predicate(result)`` holds; raise ``TimeoutError`` if not."""
        limit = time.monotonic() + timeout
        result: list[Any] = []
        while time.monotonic() < limit:
            result = self.query(promql)
            if predicate(result):
                return result
            time.sleep(0.2)
        raise TimeoutError(f"{promql!r} never satisfied the predicate; last result {result!r}")

    def kill(self) -> None:
        """SIGKILL and reap: the server vanishes as in a crash."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


def _write_config(path: Path, scrape_targets: Sequence[str], interval: float) -> None:
    every = f"{round(interval * 1000)}ms"  # Prometheus durations take no fractions
    config = {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "scrape_configs": [
            {
                "job_name": "test",
                "honor_labels": True,
                "scrape_interval": every,
                "scrape_timeout": every,
                "static_configs": [{"targets": list(scrape_targets)}],
            }
        ]
        if scrape_targets
        else [],
    }
    path.write_text(json.dumps(config))  # JSON is YAML


def _launch(
    binary: str, workdir: Path, data_dir: Path, extra_args: Sequence[str]
) -> PrometheusProcess:
    port = free_port()
    log = workdir / f"prometheus-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={data_dir}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
                *extra_args,
            ],
            stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
        )
    return PrometheusProcess(process, port, log)


def _wait_ready(prom: PrometheusProcess, timeout: float) -> bool:
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        if prom.process.poll() is not None:
            return False
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{prom.url}/-/ready", timeout=1) as answer,
        ):
            if answer.status == 200:
                return True
        time.sleep(0.1)
    return False


@contextlib.contextmanager
def start_prometheus(
    *,
    scrape_targets: Sequence[str] = (),
    scrape_interval: float = 1.0,
    data_dir: Path | None = None,
    extra_args: Sequence[str] = (),
    ready_timeout: float = 30.0,
    binary: str | None = None,
) -> Iterator[PrometheusProcess]:
    """Run Prometheus on a free loopback port for the duration of the ``with`` block."""
    binary = require_binary(binary or PROMETHEUS_BIN)
    workdir = Path(tempfile.mkdtemp(prefix="prom-test-"))
    try:
        _write_config(workdir / "prometheus.yml", scrape_targets, scrape_interval)
        prom = None
        for _attempt in range(3):  # the free port may be taken between probe and bind
            prom = _launch(binary, workdir, data_dir or workdir / "data", extra_args)
            if _wait_ready(prom, ready_timeout):
                break
            prom.kill()
        else:
            tail = prom.log_tail() if prom else ""
            raise RuntimeError(f"Prometheus did not become ready:\n{tail}")
        try:
            yield prom
        finally:
            prom.kill()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def backfill(data_dir: Path, openmetrics_text: str) -> None:
    """Write TSDB blocks into ``data_dir`` from OpenMetrics text (``# EOF`` is appended)."""
    promtool = require_binary(PROMTOOL_BIN)
    data_dir.mkdir(parents=True, exist_ok=True)
    text = openmetrics_text if openmetrics_text.rstrip().endswith("# EOF") else (
        openmetrics_text.rstrip("\n") + "\n# EOF\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".om", delete=False) as source:
        source.write(text)
    try:
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", source.name, str(data_dir)],
            check=True, capture_output=True, timeout=60,
        )
    finally:
        os.unlink(source.name)
