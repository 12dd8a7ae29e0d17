"""Writing TOML that reads like a hand-written config: inline tables, dotted keys, comments.

tomli-w writes nested tables as separate ``[a.b.c]`` sections and cannot write comments;
``import-hpa`` wants one compact block per target with a comment above each query to fill
in, so it assembles lines itself and uses these helpers for the values. Scalars go through
tomli-w, so strings are escaped exactly as TOML requires.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import tomli_w

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def key(name: str) -> str:
    """A key, quoted unless it is a bare key."""
    return name if _BARE_KEY.fullmatch(name) else scalar(name)


def scalar(value: str | int | float | bool) -> str:
    return tomli_w.dumps({"v": value}).removeprefix("v = ").rstrip("\n")


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
    """``path = value``; an array of tables gets one element per line."""
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return [f"{path} = [", *(f"  {inline(v)}," for v in value), "]"]
    return [f"{path} = {inline(value)}"]
