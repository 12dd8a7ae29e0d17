"""Which line of a TOML file defines a field path: a best effort without a position-aware parser.

``tomllib`` keeps no positions, so we ask it instead: the line that defines a value is the
shortest prefix of the file whose parse already contains the value's path. Any prefix cut
inside a multi-line array is closed with ``]`` to make it parse; a prefix that still does not
parse counts as the longest shorter one that does, which keeps the search monotonic and lets
it bisect. A path that does not exist (a missing key) is located at its deepest existing
parent (the target's ``[[autoscaler]]`` line for a missing ``maxReplicas``).

Parsing prefixes costs time in the prefix's length, so a path inside a target written as an
``[[autoscaler]]`` block is searched in that block alone (a TOML document of its own, where
the target is ``autoscaler[0]``): a file with hundreds of broken targets still reports fast.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from autoscaler.config.issues import Loc

_CLOSERS = ("", "\n]", "\n]]", "\n]]]")
_TARGET_HEADER = re.compile(r"\s*\[\[\s*autoscaler\s*\]\]\s*(#.*)?$")


class LineFinder:
    """Locates paths in one file's text; remembers the prefixes it parsed."""

    def __init__(self, text: str, *, parsed: dict[str, Any] | None = None) -> None:
        """``parsed``: the whole text's parse, when the caller has it (saves parsing it again)."""
        self._lines = text.splitlines(keepends=True)
        self._parsed: dict[int, dict[str, Any] | None] = {}
        if parsed is not None:
            self._parsed[len(self._lines)] = parsed
        self._blocks: dict[int, LineFinder] = {}
        self._starts = [i for i, line in enumerate(self._lines) if _TARGET_HEADER.match(line)]

    def line_of(self, loc: Loc) -> int | None:
        if len(loc) > 1 and loc[0] == "autoscaler" and isinstance(loc[1], int):
            found = self._in_block(loc[1], loc[2:])
            if found is not None:
                return found
        return self._search(loc)

    def _in_block(self, index: int, rest: Loc) -> int | None:
        """The line within target ``index``'s ``[[autoscaler]]`` block, if it has one."""
        whole = self._parse(len(self._lines))
        targets = whole.get("autoscaler") if whole else None
        if not isinstance(targets, list) or len(targets) != len(self._starts):
            return None  # targets not (all) written as [[autoscaler]] blocks
        if index not in self._blocks:
            start = self._starts[index]
            end = self._starts[index + 1] if index + 1 < len(self._starts) else len(self._lines)
            self._blocks[index] = LineFinder("".join(self._lines[start:end]))
        found = self._blocks[index]._search(("autoscaler", 0, *rest))
        return None if found is None else found + self._starts[index]

    def _search(self, loc: Loc) -> int | None:
        whole = self._parse(len(self._lines))
        if whole is None:
            return None
        existing = _deepest(whole, loc)
        if not existing:
            return None
        low, high = 1, len(self._lines)
        while low < high:
            middle = (low + high) // 2
            if _contains(self._parsed_at_most(middle), existing):
                high = middle
            else:
                low = middle + 1
        return low

    def _parsed_at_most(self, count: int) -> dict[str, Any] | None:
        """The parse of the longest prefix of at most ``count`` lines that parses."""
        for size in range(count, 0, -1):
            parsed = self._parse(size)
            if parsed is not None:
                return parsed
        return None

    def _parse(self, count: int) -> dict[str, Any] | None:
        if count not in self._parsed:
            text = "".join(self._lines[:count])
            self._parsed[count] = _try_parse(text)
        return self._parsed[count]


def _try_parse(text: str) -> dict[str, Any] | None:
    for closer in _CLOSERS:
        try:
            return tomllib.loads(text + closer)
        except tomllib.TOMLDecodeError:
            continue
    return None


def _deepest(document: dict[str, Any], loc: Loc) -> Loc:
    """The longest prefix of ``loc`` that exists in ``document``."""
    current: Any = document
    for depth, part in enumerate(loc):
        child = _child(current, part)
        if child is _MISSING:
            return loc[:depth]
        current = child
    return loc


def _contains(document: dict[str, Any] | None, loc: Loc) -> bool:
    if document is None:
        return False
    current: Any = document
    for part in loc:
        current = _child(current, part)
        if current is _MISSING:
            return False
    return True


_MISSING = object()


def _child(value: Any, part: str | int) -> Any:
    if isinstance(part, int):
        return value[part] if isinstance(value, list) and 0 <= part < len(value) else _MISSING
    return value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
