"""KEP-5866 ``shardSelector`` on LIST and WATCH: its grammar, its hash, and the server's modes.

The released alpha grammar (Kubernetes 1.36, gate ``ShardedListAndWatch``; the query parameter
``shardSelector`` that kubernetes-asyncio 36.1.0's ``shard_selector=`` sends): requirements
``shardRange(object.metadata.uid|object.metadata.namespace, '0x<hex>', '0x<hex>')`` joined by
``||``, all on one field. An object matches when the 64-bit FNV-1a hash of that field's UTF-8
falls in ``[start, end)`` of a requirement; the end may be ``'0x10000000000000000'`` (2^64).
An earlier alpha grammar used bare hex and ``,`` between requirements. Anything else is a 400
that names the selector. The hash is written here, not imported from autoscaler.runtime.ring:
the simulator checks our code rather than sharing it.

``SimApiServer.shard_selector_mode`` says what the server does with the parameter:
``on`` honours it on LIST (echoed as ``metadata.shardInfo.selector``) and WATCH (echoed on the
initial-events bookmark); ``off`` ignores it and echoes nothing (gate off, older server);
``list-only`` honours it on LIST and ignores it on WATCH (an HA control plane mid-rollout);
``old-grammar`` accepts only the earlier grammar and refuses the released one.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ApiError, bad_request

ShardMode = Literal["on", "off", "list-only", "old-grammar"]
Grammar = Literal["released", "old"]

PARAMETER = "shardSelector"
HASH_SPACE = 1 << 64
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_FIELDS = {"object.metadata.uid": "uid", "object.metadata.namespace": "namespace"}
_HEX = r"0x([0-9a-fA-F]{1,17})"
_REQUIREMENT = {
    "released": re.compile(rf"\s*shardRange\(\s*([A-Za-z_.]+)\s*,\s*'{_HEX}'\s*,"
                           rf"\s*'{_HEX}'\s*\)\s*"),
    "old": re.compile(rf"\s*shardRange\(\s*([A-Za-z_.]+)\s*,\s*{_HEX}\s*,\s*{_HEX}\s*\)\s*"),
}
_OUTSIDE_PARENTHESES = re.compile(r",(?![^()]*\))")


def fnv1a64(text: str) -> int:
    """FNV-1a, 64 bits, over the UTF-8 of ``text`` (Go's ``hash/fnv.New64a``)."""
    value = _FNV_OFFSET
    for byte in text.encode():
        value = ((value ^ byte) * _FNV_PRIME) % HASH_SPACE
    return value


@dataclass(frozen=True, slots=True)
class ShardSelector:
    """A parsed selector: the field it hashes and its ``[start, end)`` ranges."""

    text: str
    field: str
    """The ObjectMeta key hashed: ``uid`` or ``namespace``."""
    ranges: tuple[tuple[int, int], ...]
    starts: tuple[int, ...] = ()
    """The ranges' starts, sorted and merged (``_merged``): a match is one bisection, as a
    LIST of 200,000 pods against a selector of hundreds of namespaces must be."""
    merged: tuple[tuple[int, int], ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        value = _hashed(str(obj["metadata"].get(self.field) or ""))
        index = bisect.bisect_right(self.starts, value) - 1
        return index >= 0 and value < self.merged[index][1]


@functools.lru_cache(maxsize=1 << 16)
def _hashed(text: str) -> int:
    return fnv1a64(text)  # namespaces repeat across objects: hashed once each


def _merged(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def _invalid(text: str, why: str) -> ApiError:
    return bad_request(f'{PARAMETER}: Invalid value: "{text}": {why}')


def parse(text: str, grammar: Grammar = "released") -> ShardSelector:
    """The selector ``text`` in ``grammar``, or the 400 a server gives it."""
    parts = text.split("||") if grammar == "released" else _OUTSIDE_PARENTHESES.split(text)
    fields: set[str] = set()
    ranges = []
    for part in parts:
        found = _REQUIREMENT[grammar].fullmatch(part)
        if found is None:
            expected = ("shardRange(<field>, '0x<hex>', '0x<hex>') joined by ||"
                        if grammar == "released" else
                        "shardRange(<field>, 0x<hex>, 0x<hex>) joined by ,")
            raise _invalid(text, f"expected {expected}")
        path, start, end = found[1], int(found[2], 16), int(found[3], 16)
        if path not in _FIELDS:
            raise _invalid(text, f"unsupported field path {path!r}: supported are "
                                 f"{', '.join(sorted(_FIELDS))}")
        if not start < end <= HASH_SPACE:
            raise _invalid(text, f"range [{found[2]}, {found[3]}) must have start < end "
                                 "<= 0x10000000000000000")
        fields.add(_FIELDS[path])
        ranges.append((start, end))
    if len(fields) != 1:
        raise _invalid(text, "all shardRange requirements must use the same field")
    merged = _merged(tuple(ranges))
    return ShardSelector(text, fields.pop(), tuple(ranges),
                         starts=tuple(start for start, _ in merged), merged=merged)


def requested(query: Mapping[str, str], mode: ShardMode, *,
              watch: bool) -> ShardSelector | None:
    """The selector a LIST or WATCH asked for, as a server in ``mode`` honours it: None when
    absent or ignored; a 400 when malformed for this server."""
    text = query.get(PARAMETER, "")
    if not text or mode == "off" or (watch and mode == "list-only"):
        return None
    return parse(text, "old" if mode == "old-grammar" else "released")
