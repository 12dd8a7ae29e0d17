"""Writing TOML that reads like a hand-written config: inline tables, dotted keys, comments.

A TOML writer (tomli-w) writes nested tables as separate ``[a.b.c]`` sections and cannot
write comments; ``import-hpa`` and ``import-keda`` want one compact block per target with a
comment above each query to fill in, so they assemble lines themselves and use these helpers
for keys and values.

Whatever a string holds, it stays inside its quotes: ``string`` escapes quotes, backslashes
and every character that is not printable (control characters, U+2028, U+0085, bidi
overrides...), so no value can end its line, open a table, or show as more than it is.
Numbers are Python's own text, which is TOML's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                  "\f": "\\f", "\r": "\\r"}


def key(name: str) -> str:
    """A key, quoted unless it is a bare key."""
    return name if _BARE_KEY.fullmatch(name) else string(name)


def string(text: str) -> str:
    """``text`` as a TOML basic string in which every character is visible.

    Its escapes (``\\" \\\\ \\n \\t \\uXXXX \\UXXXXXXXX``...) are Go's too, so the same text
    is a valid PromQL string literal.
    """
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + "".join(_escaped(char) for char in text) + '"'


def literal(text: str) -> str:
    """``text`` as a TOML literal string (``'...'``, no escapes) when it can be one, else
    ``string(text)``: PromQL reads as written, quotes and backslashes included."""
    if text.isprintable() and "'" not in text:
        return f"'{text}'"
    return string(text)


def _escaped(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def scalar(value: str | int | float | bool) -> str:
    if isinstance(value, str):
        return string(value)
    if isinstance(value, bool):  # before int: a bool is an int
        return "true" if value else "false"
    return str(value)  # 42, -1.5, 1e+20, inf, nan: each is TOML as Python prints it


def inline(value: Any) -> str:
    """Any value on one line: tables as ``{ k = v }``, arrays as ``[a, b]``."""
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{key(k)} = {inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    if isinstance(value, str | int | float | bool):
        return scalar(value)
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def assignment(path: str, value: Any) -> list[str]:
    """``path = value``; an array of tables gets one element per line.

    ``path`` is written as given: build it from ``key`` for names that are not bare.
    """
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return [f"{path} = [", *(f"  {inline(v)}," for v in value), "]"]
    return [f"{path} = {inline(value)}"]


def comment(text: str) -> str:
    """``# text``; ``text`` must be one printable line (see ``manifests.plain``)."""
    if not text.isprintable():
        raise ValueError(f"a comment must be one printable line: {text!r}")
    return f"# {text}" if text else "#"
