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
    if not document:
        yield "{}"
        return
    # Pretty: two spaces a level, as json.dumps(indent=2); a value at depth d has each of
    # its lines after the first indented by 2*d more (JSON strings hold no raw newline).
    open_field, between, close = (("\n  ", ",\n  ", "\n}") if pretty else ("", ", ", "}"))
    yield "{"
    for index, (name, value) in enumerate(document.items()):
        yield (open_field if index == 0 else between) + encode(name, pretty=False) + ": "
        if isinstance(value, Entries):
            yield from _entries(value, pretty=pretty)
        else:
            yield _nested(encode(value, pretty=pretty), depth=1, pretty=pretty)
    yield close


def _entries(entries: Entries, *, pretty: bool) -> Iterator[str]:
    if not len(entries):
        yield "{}"
        return
    open_entry, between, close = (("\n    ", ",\n    ", "\n  }") if pretty
                                  else ("", ", ", "}"))
    yield "{"
    for index, key in enumerate(entries):
        value = entries[key]
        yield ((open_entry if index == 0 else between) + encode(key, pretty=False) + ": "
               + _nested(encode(value, pretty=pretty), depth=2, pretty=pretty))
    yield close


def _nested(text: str, *, depth: int, pretty: bool) -> str:
    return text.replace("\n", "\n" + "  " * depth) if pretty else text
