"""Configuration problems: one ``ConfigIssue`` per problem, all of them in one ``ConfigError``.

A field path is a tuple of keys and list indices (``("autoscaler", 2, "behavior")``) while
validating, and the dotted text ``autoscaler[2].behavior`` in messages, so an issue points at
the exact spot the user has to change.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from autoscaler.errors import InvalidConfigError

Loc = tuple[str | int, ...]
"""A field path while validating: keys and list indices."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigIssue:
    """One problem: where it is (file, TOML line when known, field path) and what is wrong."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


MAX_ISSUES = 100
"""Checking stops after this many problems (as clang's -ferror-limit), so a file that is
broken everywhere still gets a short answer in bounded time."""


class ConfigError(InvalidConfigError):
    """The configuration is invalid; ``issues`` lists the problems found, in file order.

    ``complete`` is false when checking stopped at ``MAX_ISSUES``: there may be more.
    """

    def __init__(self, issues: Sequence[ConfigIssue], *, complete: bool = True) -> None:
        self.issues: tuple[ConfigIssue, ...] = tuple(issues)
        self.complete = complete
        lines = [str(issue) for issue in self.issues]
        if not complete and self.issues:
            lines.append(f"{self.issues[0].file}: stopped after {len(self.issues)} problems; "
                         "fix these and check again")
        super().__init__("\n".join(lines))


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


_QUOTED_CHARACTERS = 80


def quote(text: str) -> str:
    """``text`` in double quotes with escapes, cut short so a one-line error stays short."""
    if len(text) > _QUOTED_CHARACTERS:
        return f"{json.dumps(text[:_QUOTED_CHARACTERS], ensure_ascii=False)}... " \
               f"({len(text)} characters)"
    return json.dumps(text, ensure_ascii=False)


def format_loc(loc: Loc) -> str:
    """``("autoscaler", 2, "behavior")`` -> ``"autoscaler[2].behavior"``.

    Keys that TOML would quote are quoted (``headers."X Org"``), so the path reads as TOML.
    """
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        key = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
        text += f".{key}" if text else key
    return text


def did_you_mean(word: str, candidates: Iterable[str], *, listing: str | None = "") -> str:
    """A "did you mean" suffix naming the closest candidate, else ``listing`` and the options.

    ``listing=None`` gives no suffix when nothing is close.
    """
    options = sorted(candidates)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not close:
        lowered = {option.lower(): option for option in options}
        close = [lowered[word.lower()]] if word.lower() in lowered else []
    if close:
        return f'; did you mean "{close[0]}"?'
    if listing is None or not options:
        return ""
    return f"; {listing or 'expected one of'}: {', '.join(options)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """An issue before it has a file and a line: a field path and a message."""

    loc: Loc
    message: str


class Problems:
    """Collects problems while checking, so every problem is reported at once, once each."""

    def __init__(self) -> None:
        self.items: list[Problem] = []
        self._seen: set[Problem] = set()  # a list scan made 5,000 broken targets take minutes

    def add(self, loc: Loc, message: str) -> None:
        problem = Problem(loc=loc, message=message)
        if problem not in self._seen:
            self._seen.add(problem)
            self.items.append(problem)

    def take_from(self, start: int) -> list[Problem]:
        """Remove and return the problems added since there were ``start`` of them."""
        taken = self.items[start:]
        del self.items[start:]
        self._seen.difference_update(taken)
        return taken

    def __bool__(self) -> bool:
        return bool(self.items)
