"""prometheus-adapter's naming read backwards: which series a rule calls by a metric's name.

The adapter names a series by running ``name.matches`` on it (Go's regexp, unanchored) and
expanding ``name.as`` (Go's ``ExpandString``); ``seriesQuery`` and ``seriesFilters`` decide
which series it considers. ``series_for`` finds, for a metric name, the series a rule would
give that name: one its seriesQuery names outright, or one built by reading ``as`` and
``matches`` backwards; each is checked forwards the way the adapter names it. Patterns run
on RE2 (``google-re2``): Go's syntax and results, in time linear in the input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import re2

from autoscaler.config.issues import Loc
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import plain

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_DOLLAR = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+)|\$?)")
_LITERAL = re.compile(r"(?:[^\\.^$*+?()\[\]{}|]|\\[^A-Za-z0-9])*")
_GROUP = re.compile(r"\((?:\?P<(\w+)>)?((?:[^()\\]|\\.)*)\)")
_SERIES_NAME = re.compile(r'^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{|$)')
_NAME_MATCHER = re.compile(r'__name__\s*(=~|=|!=|!~)\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True, kw_only=True)
class Naming:
    """How one rule finds and names series."""

    series_query: str
    filters: tuple[tuple[bool, Any], ...]
    """(``is`` rather than ``isNot``, compiled RE2 pattern)."""
    matches: Any
    as_: str


def compile_regex(pattern: str, loc: Loc) -> Any:
    """``pattern`` as Go compiles it (RE2), quietly: RE2 would log to stderr."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 8 << 20
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ManifestError(loc, f"not a valid regular expression: {plain(text)}") from None


def series_for(rule: Naming, name: str) -> list[tuple[int, str]]:
    """The series this rule would call ``name``: (0, a series its seriesQuery names) or
    (1, the series ``matches`` and ``as`` give when read backwards)."""
    literal = _SERIES_NAME.match(rule.series_query)
    named = [literal[1]] if literal else [
        re.sub(r"\\(.)", r"\1", value) for op, value in _NAME_MATCHER.findall(rule.series_query)
        if op == "="]
    candidates = [(0, series) for series in named]
    inverted = _invert(rule, name)
    if inverted is not None and inverted not in named:
        candidates.append((1, inverted))
    return [(tier, series) for tier, series in candidates
            if _admits(rule, series) and _name_of(rule, series) == name]


def _name_of(rule: Naming, series: str) -> str | None:
    """The API name the adapter gives ``series`` (Go's ``FindStringSubmatchIndex`` then
    ``ExpandString``), or None when ``matches`` does not match it."""
    found = rule.matches.search(series)
    if found is None:
        return None
    return expand(rule.as_, found, rule.matches.groupindex)


def expand(template: str, found: Any, names: Mapping[str, int]) -> str:
    """Go's ``Regexp.ExpandString``: ``$1``, ``${1}``, ``$name``, ``$$``; a reference to a
    group that did not match (or does not exist) is empty; a malformed one is kept as text."""
    out = []
    for part in _template_parts(template):
        if not isinstance(part, _Reference):
            out.append(part)
            continue
        index = int(part.name) if part.name.isdigit() and len(part.name) < 9 \
            else names.get(part.name, -1)
        if 0 <= index <= found.re.groups and found.group(index) is not None:
            out.append(found.group(index))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _Reference:
    name: str


def _template_parts(template: str) -> list[str | _Reference]:
    """An ``as`` template as text and references, read as Go reads it (``$1x`` names ``1x``;
    ``$$`` and a malformed ``$`` are a plain ``$``)."""
    parts: list[str | _Reference] = []
    at = 0
    for found in _DOLLAR.finditer(template):
        parts.append(template[at:found.start()])
        name = found[1] or found[2]
        parts.append(_Reference(name) if name else "$")
        at = found.end()
    parts.append(template[at:])
    return parts


def _invert(rule: Naming, name: str) -> str | None:
    """The series whose name ``matches`` and ``as`` turn into ``name``, when ``matches`` is
    literal text around capture groups and ``as`` refers to each group: ``^(.*)_total$`` with
    ``${1}_per_second`` turns ``http_requests_per_second`` back into ``http_requests_total``.
    """
    body = rule.matches.pattern.removeprefix("^")
    body = body.removesuffix("$") if not body.endswith("\\$") else body
    values = _references_in(rule.as_, name)
    if values is not None and "0" in values:
        return values["0"]  # the whole match: the series is (at least) the name
    pieces, groups = _pieces(body)
    if pieces is None or values is None:
        return None
    series = [pieces[0]]
    for (number, group_name), piece in zip(groups, pieces[1:], strict=True):
        value = values.get(str(number), values.get(group_name or ""))
        if value is None:
            return None
        series += [value, piece]
    return "".join(series)


def _references_in(template: str, name: str) -> dict[str, str] | None:
    """What each reference of the ``as`` template stands for in ``name``, or None."""
    parts = _template_parts(template)
    references = [part.name for part in parts if isinstance(part, _Reference)]
    # The template read as a pattern: its text literal, each reference a capture of
    # anything. RE2, since "$1$2$3..." would make Python's re backtrack without end.
    pattern = "".join("(.*)" if isinstance(part, _Reference) else _escaped(part)
                      for part in parts)
    try:
        found = compile_regex(f"(?s){pattern}", ()).fullmatch(name)
    except ManifestError:  # more groups than RE2 takes
        return None
    values: dict[str, str] = {}
    for ref, value in zip(references, found.groups() if found else (), strict=False):
        if values.setdefault(ref, value) != value:
            return None
    return values if found is not None else None


def _escaped(text: str) -> str:
    """``text`` as an RE2 pattern matching exactly it."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


def _pieces(body: str) -> tuple[list[str] | None, list[tuple[int, str | None]]]:
    """``body`` as literal text between capture groups (unescaped), and the groups' numbers
    and names; (None, []) when it is not of that shape."""
    pieces: list[str] = []
    groups: list[tuple[int, str | None]] = []
    at = 0
    for group in _GROUP.finditer(body):
        text = body[at:group.start()]
        if not _LITERAL.fullmatch(text) or group[2].startswith("?"):
            return None, []
        pieces.append(re.sub(r"\\(.)", r"\1", text))
        groups.append((len(groups) + 1, group[1]))
        at = group.end()
    if not _LITERAL.fullmatch(body[at:]):
        return None, []
    pieces.append(re.sub(r"\\(.)", r"\1", body[at:]))
    return pieces, groups


def _admits(rule: Naming, series: str) -> bool:
    """Whether the rule's seriesQuery names and seriesFilters let ``series`` through."""
    if not _METRIC_NAME.fullmatch(series):
        return False
    literal = _SERIES_NAME.match(rule.series_query)
    if literal and literal[1] != series:
        return False
    for op, value in _NAME_MATCHER.findall(rule.series_query):
        text = re.sub(r"\\(.)", r"\1", value)
        if op in ("=", "!=") and (text == series) != (op == "="):
            return False
        if op in ("=~", "!~"):
            try:
                anchored = compile_regex(f"^(?:{text})$", ())
            except ManifestError:
                return False
            if (anchored.search(series) is not None) != (op == "=~"):
                return False
    return all((pattern.search(series) is not None) == positive
               for positive, pattern in rule.filters)
