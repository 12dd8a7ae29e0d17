"""The /status document as JSON, written a piece at a time.

At 10,000 targets the document is ~37 MB of indented JSON. Built whole and encoded by
``json.dumps(indent=2)`` (Python's pure-Python encoder: the C one does not indent), it held
the event loop 2.8 s, in which no Lease was renewed and no pass ran, and 267 MB at once
(``bench/status_serve.py``). So a field given as an ``Entries`` mapping is built an entry
at a time as it is written, and the writer lets the loop run between pieces.

Like kube-apiserver, the JSON is compact unless it is asked for pretty (``?pretty=true``) or
the client looks like a person (a ``curl``, ``Wget`` or browser User-Agent; apiserver's
``isPrettyPrint``). Pretty output is exactly ``json.dumps(document, indent=2)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

PRETTY_AGENTS = ("curl", "Wget", "Mozilla/5.0")
"""User-Agent prefixes answered pretty when ``pretty`` is not given (kube-apiserver's)."""

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
"""What Go's ``strconv.ParseBool`` reads as true (kube-apiserver reads ``pretty`` with it)."""

PIECE = 64 * 1024
"""Characters written at a time (the loop runs between pieces)."""


class Entries(Mapping[str, Any]):
    """A document field whose entries are built one at a time, when each is written or
    looked up: a target's status exists only while it is encoded."""

    def __init__(self, keys: list[str], build: Callable[[str], Any]) -> None:
        self._keys, self._build = keys, build
        self._known = frozenset(keys)

    def __getitem__(self, key: str) -> Any:
        if key not in self._known:
            raise KeyError(key)
        return self._build(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def wants_pretty(query: Mapping[str, str], user_agent: str) -> bool:
    """kube-apiserver's rule: ``pretty`` if given (anything but Go's true values is
    false), else the User-Agent."""
    given = query.get("pretty", "")
    if given:
        return given in _TRUE
    return user_agent.startswith(PRETTY_AGENTS)


def encode(value: Any, *, pretty: bool) -> str:
    """One value as the handler has always encoded it (``default=str``: times, enums)."""
    if pretty:
        return json.dumps(value, indent=2, default=str)
    return json.dumps(value, default=str)


def pieces(document: Mapping[str, Any], *, pretty: bool) -> Iterator[str]:
    """``document`` as JSON text in pieces of about ``PIECE`` characters, then a newline;
    the entries of a top-level ``Entries`` field are built and encoded one at a time."""
    buffer: list[str] = []
    size = 0
    for text in _parts(document, pretty=pretty):
        buffer.append(text)
        size += len(text)
        if size >= PIECE:
            yield "".join(buffer)
            buffer, size = [], 0
    buffer.append("\n")
    yield "".join(buffer)


def _parts(document: Mapping[str, Any], *, pretty: bool) -> Iterator[str]:
    """The document's top-level fields; an ``Entries`` field is itself written an entry at
    a time."""
    def fields() -> Iterator[tuple[str, Iterator[str]]]:
        for name, value in document.items():
            if isinstance(value, Entries):
                yield name, _object(((key, iter((_nested(value[key], 2, pretty),)))
                                     for key in value), depth=1, pretty=pretty)
            else:
                yield name, iter((_nested(value, 1, pretty),))
    yield from _object(fields(), depth=0, pretty=pretty)


def _object(members: Iterator[tuple[str, Iterator[str]]], *, depth: int,
            pretty: bool) -> Iterator[str]:
    """A JSON object at ``depth`` whose members' values come as text pieces. Pretty: two
    spaces a level, as json.dumps(indent=2); compact: json.dumps's separators."""
    inner, outer = ("\n" + "  " * (depth + 1), "\n" + "  " * depth) if pretty else ("", "")
    first = True
    for key, value in members:
        yield ("{" + inner if first else "," + (inner or " ")) + encode(key, pretty=False) + ": "
        yield from value
        first = False
    yield "{}" if first else outer + "}"


def _nested(value: Any, depth: int, pretty: bool) -> str:
    """``value`` encoded at ``depth``: each of its lines after the first indented by 2*depth
    more (JSON strings hold no raw newline)."""
    text = encode(value, pretty=pretty)
    return text.replace("\n", "\n" + "  " * depth) if pretty else text
