"""One instant query over HTTP, bounded in bytes, series, time and reach, whatever the server does.

prometheus-api-client reads an answer whole (``response.json()``) and lets requests follow
any redirect with the caller's headers, so the query call is ours, over a requests
``Session`` (connection pool, TLS, proxies from the environment). What it guarantees:

- bytes: a ``Content-Length`` over ``max_response_bytes`` is refused before the body is
  read; then the body is read in chunks, counting the bytes on the wire and, for gzip or
  deflate, the bytes inflated (zlib with ``max_length``: a gzip bomb never inflates past
  the limit). Other content codings are refused (we ask for gzip only). The bytes never
  outlive the exchange, whatever holds its error (the buffer is emptied on every way out),
  and one answer over ``LARGE_ANSWER`` at a time is read, decoded and parsed.
- series: the answer's JSON arrays and objects are counted before it is decoded (three per
  series: the series, its labels, its value), so neither ``max_series`` series (nor the
  fewer the query's askers allow) nor a flood of empty ``[]`` is ever built; decoding takes
  ~8 times the answer's bytes.
- time: a watchdog shuts the exchange's sockets down at ``timeout`` (``deadline``), so a
  server dripping its TLS handshake, headers or body a byte at a time (each byte restarting
  requests' per-read timeout) cannot hold a worker thread past it.
- reach: redirects are followed per ``follow_redirects`` (``same-origin`` by default);
  credentials and custom headers are only ever sent to the server's own origin.

Every failure is one of the daemon's errors (``autoscaler.errors``), with a message that
names the server and never a secret.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import urllib3

from autoscaler.adapters.prometheus.deadline import deadline
from autoscaler.adapters.prometheus.inputs import FollowRedirects
from autoscaler.adapters.prometheus.parse import SeriesStream
from autoscaler.errors import (
    AccessDeniedError,
    BadDataError,
    BadQueryError,
    ThrottledError,
    TimedOutError,
    TransientError,
)

MAX_REDIRECTS = 5
_CHUNK = 1 << 16
_ERROR_BODY = 1 << 16
"""Bytes of an error answer read for its message; the rest is not worth waiting for."""
_ENVELOPE = 3
"""The JSON containers of an answer that are not series: the answer, ``data``, ``result``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """Who is asked and how far the answer may go."""

    server: str
    """The server's name in the config, for messages."""
    url: str
    """Its base URL, without userinfo (``redact_url``): for messages."""
    timeout: float
    max_response_bytes: int
    max_series: int
    max_query_series: int | None = None
    """What this query's askers allow (fewer than ``max_series``, for one target): an
    answer over it is refused on its bytes too, before it costs its decoding."""
    follow_redirects: FollowRedirects


def query(session: requests.Session, endpoint: str, *, params: Mapping[str, str],
          headers: Mapping[str, str], auth: tuple[str, str] | None,
          exchange: Exchange, matrix: bool = False,
          parse: Callable[[Any], Any] | None = None) -> Any:
    """``data.result`` of an instant query at ``endpoint`` (``matrix``: a range query's),
    or what ``parse`` makes of it, or one of our errors."""
    body = bytearray()
    turn = LargeAnswerTurn(time.monotonic() + exchange.timeout, exchange)
    try:
        _exchange_into(body, turn, session, endpoint, params=params, headers=headers,
                       auth=auth, exchange=exchange)
        if parse is not None and not matrix:
            return _parse_streamed(body, exchange, parse)
        result = _decode(body, exchange, count=count_matrix_series if matrix else count_series)
        return result if parse is None else parse(result)
    finally:
        # Whatever is raised keeps the frames it passed through alive, with their locals
        # (this buffer among them), for as long as the error lives, and that can be a cycle
        # only the cyclic collector frees, seldom (runtime/heap.py): the answer's bytes
        # never wait for it (issue 40: 16 MB a pass kept for ~100 s).
        body.clear()
        turn.end()


def _exchange_into(body: bytearray, turn: LargeAnswerTurn, session: requests.Session,
                   endpoint: str, *,
                   params: Mapping[str, str], headers: Mapping[str, str],
                   auth: tuple[str, str] | None, exchange: Exchange) -> None:
    """The answer's body into ``body``, within the exchange's deadline."""
    with deadline(exchange.timeout) as watch:
        try:
            _exchange(body, turn, session, endpoint, params=params, headers=headers,
                      auth=auth, exchange=exchange)
        except (requests.RequestException, urllib3.exceptions.HTTPError) as error:
            # (urllib3's own errors: from reading the raw body, which requests does not wrap)
            if watch.expired:
                raise _too_slow(exchange) from None
            raise _translate(error, exchange) from None
    if watch.expired:  # a body cut short ends like a complete one when it has no length
        raise _too_slow(exchange)


def _too_slow(exchange: Exchange) -> TimedOutError:
    """A read timeout or the exchange's deadline: either way the answer was not there in time."""
    return TimedOutError(f"{exchange.url} timed out after {exchange.timeout:.2f}s "
                          "(answer too slow)")


def _exchange(body: bytearray, turn: LargeAnswerTurn, session: requests.Session,
              endpoint: str, *,
              params: Mapping[str, str], headers: Mapping[str, str],
              auth: tuple[str, str] | None, exchange: Exchange) -> None:
    response = follow(session, endpoint, params=params, headers=headers, auth=auth,
                      exchange=exchange)
    with response:
        if response.status_code != 200:
            raise _status_error(response.status_code, _read_error(response))
        read_body(body, turn, response, exchange)


# --- redirects -------------------------------------------------------------------------------


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port made explicit."""
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def follow(session: requests.Session, endpoint: str, *, params: Mapping[str, str],
           headers: Mapping[str, str], auth: tuple[str, str] | None,
           exchange: Exchange) -> requests.Response:
    """The first answer that is not a redirect, following redirects as the policy allows.

    ``headers`` and ``auth`` go only to ``endpoint``'s origin: a hop to another origin is
    made with our protocol headers alone, and only when ``follow_redirects = "any"``.
    """
    home, url = origin(endpoint), endpoint
    for _ in range(MAX_REDIRECTS + 1):
        own = origin(url) == home
        response = session.get(
            url, params=params if url == endpoint else None,
            headers={**_PROTOCOL_HEADERS, **headers} if own else _PROTOCOL_HEADERS,
            auth=auth if own else None, timeout=exchange.timeout, stream=True,
            allow_redirects=False,
            # Explicit: else $REQUESTS_CA_BUNDLE would replace the session's caFile.
            verify=session.verify)
        if not response.is_redirect:
            return response
        response.close()
        url = _next_hop(url, response.headers["Location"], home, exchange)
    raise BadDataError(f"{exchange.url} redirected more than {MAX_REDIRECTS} times")


_PROTOCOL_HEADERS = {"Accept": "application/json", "Accept-Encoding": "gzip"}


def _next_hop(url: str, location: str, home: tuple[str, str, int | None],
              exchange: Exchange) -> str:
    target = urljoin(url, location)
    shown = _without_userinfo(target)
    policy = exchange.follow_redirects
    if urlsplit(target).scheme not in ("http", "https"):
        raise BadDataError(f"{exchange.url} redirected to {shown[:200]}: not http(s)")
    if policy == "never" or (policy == "same-origin" and origin(target) != home):
        raise BadDataError(
            f"{exchange.url} redirected to {shown[:200]}; not followed (followRedirects = "
            f'"{policy}" for Prometheus server {exchange.server!r})')
    return target


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    return parts._replace(netloc=f"{netloc}:{parts.port}" if parts.port else netloc).geturl()


# --- the body, bounded -----------------------------------------------------------------------


def read_body(body: bytearray, turn: LargeAnswerTurn, response: requests.Response,
              exchange: Exchange) -> None:
    """The whole body, decompressed, into ``body``; ``BadDataError`` once it passes
    ``max_response_bytes``."""
    limit = exchange.max_response_bytes
    length = response.headers.get("Content-Length", "").strip()
    if length.isdigit() and int(length) > limit:
        raise _too_large(exchange, f"Content-Length {int(length):,}")
    if length.isdigit():
        turn.need(int(length))
    coding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if coding not in ("identity", "gzip", "x-gzip", "deflate"):
        raise BadDataError(f"{exchange.url} answered with Content-Encoding {coding[:40]!r}; "
                           "only gzip was asked for")
    wire = _wire_chunks(response)
    if coding == "identity":
        for chunk in wire:
            body += chunk
            if len(body) > limit:
                raise _too_large(exchange, f"more than {limit:,} bytes arrived")
            turn.need(len(body))
        return
    _inflate(body, turn, wire, limit=limit, exchange=exchange, coding=coding)


def _wire_chunks(response: requests.Response) -> Iterator[bytes]:
    # Raw bytes as they arrived (transfer coding undone, content coding kept): inflating is
    # ours, so that it can stop at the limit.
    yield from response.raw.stream(_CHUNK, decode_content=False)


def _inflate(body: bytearray, turn: LargeAnswerTurn, wire: Iterator[bytes], *, limit: int,
             exchange: Exchange, coding: str) -> None:
    received = 0
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or a zlib header
    try:
        for chunk in wire:
            received += len(chunk)
            if received > limit:
                raise _too_large(exchange, f"more than {limit:,} {coding} bytes arrived")
            pending = chunk
            while pending:
                body += inflater.decompress(pending, limit - len(body) + 1)
                if len(body) > limit:
                    raise _too_large(exchange, f"more than {limit:,} bytes once inflated "
                                     f"from {received:,} {coding} bytes")
                turn.need(len(body))
                pending = inflater.unconsumed_tail
                if inflater.eof and inflater.unused_data:  # another gzip member follows
                    pending = inflater.unused_data
                    inflater = zlib.decompressobj(wbits=47)
    except zlib.error:
        raise BadDataError(f"{exchange.url} sent a broken {coding} body") from None
    if not inflater.eof:
        raise BadDataError(f"{exchange.url} sent a truncated {coding} body")


LARGE_ANSWER = 1 << 20
"""Bytes (inflated) past which an answer needs the process's large-answer turn."""
_large_answers = threading.Lock()


class LargeAnswerTurn:
    """One answer over ``LARGE_ANSWER`` at a time in the process, from that byte until it is
    decoded and parsed: an answer near maxResponseBytes and maxSeries costs ~80 MB at its
    peak (its text, its JSON, its parsed samples), and several at once would add up. Any
    number of small ones go on meanwhile; a large one waits its turn within its deadline,
    and its smaller bytes so far are all it holds while it waits."""

    def __init__(self, deadline: float, exchange: Exchange) -> None:
        self.deadline, self.exchange = deadline, exchange
        self.held = False

    def need(self, size: int) -> None:
        """Return once an answer of ``size`` bytes may go on; ``TimedOutError`` if the
        deadline passes first."""
        if self.held or size <= LARGE_ANSWER:
            return
        if not _large_answers.acquire(timeout=max(0.0, self.deadline - time.monotonic())):
            raise TimedOutError(f"{self.exchange.url} timed out after "
                                f"{self.exchange.timeout:.2f}s (waiting to read a large answer "
                                "while another was read)")
        self.held = True

    def end(self) -> None:
        if self.held:
            self.held = False
            _large_answers.release()


def _too_large(exchange: Exchange, detail: str) -> BadDataError:
    return BadDataError(
        f"answer larger than maxResponseBytes = {exchange.max_response_bytes:,} of Prometheus "
        f"server {exchange.server!r} ({detail})")


def _read_error(response: requests.Response) -> bytes:
    body = bytearray()
    for chunk in response.iter_content(4096):
        body += chunk
        if len(body) >= _ERROR_BODY:
            break
    return bytes(body[:_ERROR_BODY])


# --- decoding --------------------------------------------------------------------------------


def count_series(body: bytes | bytearray) -> int:
    """Series in an answer, counted on its bytes: three JSON containers each beyond the
    envelope's. Brackets inside strings count too, so this errs towards too many."""
    return max(0, (body.count(b"{") + body.count(b"[") - _ENVELOPE) // 3)


def count_matrix_series(body: bytes | bytearray) -> int:
    """Series in a range query's answer: each has one ``"values"`` key (its points are
    containers too, so ``count_series`` would count a point as a third of a series).
    The key inside a label value counts too: this errs towards too many as well."""
    return body.count(b'"values"')


def _checked_size(body: bytearray, exchange: Exchange,
                  count: Callable[[bytes | bytearray], int]) -> None:
    # A series takes at least six bytes: a smaller body cannot be over the limit, and is not
    # worth counting (0.7 ms a 5,000-series answer).
    limit = min(exchange.max_series, exchange.max_query_series or exchange.max_series)
    short = len(body) < 6 * limit + 2 * _ENVELOPE
    series = 0 if short else count(body)
    if series > exchange.max_series:
        raise BadDataError(
            f"answer holds {series:,} series, more than maxSeries = {exchange.max_series:,} "
            f"of Prometheus server {exchange.server!r}")
    if series > limit:  # parse.check_series_count's words: it counts them once decoded
        raise BadDataError(f"series explosion: {series} series, more than the limit of "
                           f"{limit}")


def _decode(body: bytearray, exchange: Exchange,
            count: Callable[[bytes | bytearray], int] = count_series) -> Any:
    _checked_size(body, exchange, count)
    return _checked(_result_of(_text_of(body)), exchange)


def _checked(result: Any, exchange: Exchange) -> Any:
    """``result``, unless the answer was not query JSON: raised here, where no frame on its
    traceback holds the answer's text."""
    if result is _NOT_QUERY_JSON:
        raise _not_query_json(exchange)
    return result


def _not_query_json(exchange: Exchange) -> BadDataError:
    return BadDataError(f"{exchange.url} answered with something that is not Prometheus "
                        "query JSON")


_NOT_QUERY_JSON = object()


def _text_of(body: bytearray) -> str | None:
    """The answer as text, its bytes let go (halving the peak); None if it is not UTF-8."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    del body[:]
    return text


def _result_of(text: str | None) -> Any:
    """``data.result`` of a successful answer, else ``_NOT_QUERY_JSON``; the parser's error
    (whose frames hold the text) ends here, so no error raised after carries the answer."""
    if text is None:
        return _NOT_QUERY_JSON
    try:
        document = json.loads(text)
        if document["status"] == "success":
            return document["data"]["result"]
    except (ValueError, KeyError, TypeError, RecursionError):  # deep nesting: garbage too
        pass
    return _NOT_QUERY_JSON


_VECTOR_HEAD = '{"status":"success","data":{"resultType":"vector","result":['
"""How Prometheus begins an instant vector's answer: its fields in this order, no spaces."""
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""json.loads' own (C) scanner and settings: one value from an index, and where it ends
(shared by the worker threads, as json.loads' is)."""
_BETWEEN = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")  # JSON's whitespace, no other
_STREAMED = "\u0000streamed"


class _NotPlainError(Exception):
    """The answer went on past its series in a way only the whole document can tell."""


def _parse_streamed(body: bytearray, exchange: Exchange, parse: Callable[[Any], Any]) -> Any:
    """``parse`` of the answer's ``data.result``. A successful instant vector as Prometheus
    writes it is handed over a series at a time, each decoded as it is reached: the whole
    answer never exists as one list of dicts beside what ``parse`` builds of it (at 100,000
    series, 46 MB less allocated at the peak: bench/answer_decode.py). Anything else, and a
    vector whose first series is not an object or that does not end as a plain answer does,
    is read whole as before, with the same checks and messages. (An answer that stops being
    JSON after some series is still "not Prometheus query JSON", unless ``parse`` refused one
    of those series first.) An error raised while streaming holds the text on its traceback,
    as one raised by ``parse`` held the decoded answer before: ``source`` detaches every
    error it keeps."""
    _checked_size(body, exchange, count_series)
    text = _text_of(body)
    if text is not None and text.startswith(_VECTOR_HEAD):
        start = _first_series(text)
        if start is not None:
            try:
                return parse(SeriesStream(_series_from(text, start, exchange)))
            except _NotPlainError:
                pass  # rare: a repeated field after the series
    result = _result_of(text)
    del text  # not on the traceback of what the check or the parse raises
    return parse(_checked(result, exchange))


def _first_series(text: str) -> int | None:
    """Where the first series begins, if the vector has any and it is an object."""
    index = len(_VECTOR_HEAD)
    while index < len(text) and text[index] in " \t\n\r":
        index += 1
    return index if text.startswith("{", index) else None


def _series_from(text: str, index: int, exchange: Exchange) -> Iterator[Any]:
    """The series from ``index`` on, one at a time; at their end, the rest of the answer is
    checked (``_NotPlainError`` if it is not plain: the caller reads it whole)."""
    try:
        while True:
            item, index = _SCAN(text, index)
            yield item
            between = _BETWEEN.match(text, index)
            if between is None:
                raise ValueError("no separator")
            index = between.end()
            if between.group(1) == "]":
                break
    except (StopIteration, ValueError, RecursionError):  # deep nesting: garbage too
        raise _not_query_json(exchange) from None
    if not _ends_as_read(text[index:]):
        raise _NotPlainError


def _ends_as_read(rest: str) -> bool:
    """Whether the answer, its series set aside, is one whose ``data.result`` they are:
    ``rest`` (what follows them: ``}}``, or warnings and infos too) closes it, and repeats
    neither ``status`` nor ``result`` (the last of a repeated key is the one JSON keeps)."""
    try:
        document = json.loads(_VECTOR_HEAD[:-1] + json.dumps(_STREAMED) + rest)
        return bool(document["status"] == "success" and document["data"]["result"] == _STREAMED)
    except (ValueError, KeyError, TypeError, RecursionError):
        return False


# --- errors ----------------------------------------------------------------------------------


def _status_error(status: int, body: bytes) -> Exception:
    detail = _error_detail(body)
    text = f"HTTP {status}" + (f": {detail[:300]}" if detail else "")
    if status in (401, 403):
        return AccessDeniedError(f"{text} (check the credentials)")
    if status == 429:
        return ThrottledError(text)
    if status >= 500:
        return TransientError(text)
    return BadQueryError(text)


def _error_detail(body: bytes) -> str:
    """Prometheus's ``error`` field; "" for anything else (a proxy's HTML page)."""
    try:
        return str(json.loads(body)["error"])
    except (ValueError, TypeError, KeyError):
        return ""


def _translate(error: requests.RequestException | urllib3.exceptions.HTTPError,
               exchange: Exchange) -> Exception:
    """Our taxonomy for what requests and urllib3 raise (order matters)."""
    url = exchange.url
    if isinstance(error, requests.exceptions.SSLError | urllib3.exceptions.SSLError):
        # Not worth retrying within a pass: a certificate does not become valid in seconds.
        return AccessDeniedError(f"TLS verification of {url} failed (check caFile)")
    cause = _root_cause(error)
    if isinstance(error, requests.Timeout | urllib3.exceptions.TimeoutError) or cause.startswith(
            ("TimeoutError", "ReadTimeout")):
        return _too_slow(exchange)
    if isinstance(error, requests.ConnectionError):
        return TransientError(f"cannot connect to {url}: {cause}")
    if isinstance(error, urllib3.exceptions.HTTPError):
        return TransientError(f"answer from {url} cut short: {cause}")
    return TransientError(f"request to {url} failed: {type(error).__name__}")


def _root_cause(error: BaseException) -> str:
    """The innermost cause's class name ("ConnectionRefusedError"): short, and secret-free."""
    seen = error
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    if isinstance(seen, OSError) and seen.strerror:
        return f"{type(seen).__name__}: {seen.strerror}"
    return type(seen).__name__
