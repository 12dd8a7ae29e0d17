"""How bodies go on the wire: compact JSON and a newline, as Go's json.Encoder writes them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Change, Store

JSON = "application/json"
_COMPACT = (",", ":")


def encode(body: Any) -> bytes:
    return json.dumps(body, separators=_COMPACT).encode() + b"\n"


class EncodedItems:
    """Each stored object's JSON as a LIST item, encoded once per version, as the real
    server's watch cache keeps an object's serialization for every reader (cachingObject).
    Without it the simulator's one thread spent ~40 ms encoding each page of 500 pods, for
    every member of a ring listing them: a renewal waited behind the pages and lapsed.

    An entry is keyed by the item's ``metadata`` dict, which a stored version owns alone
    (every write stores a fresh one, and a LIST item is a shallow copy sharing it); the entry
    holds that dict, so its id is not reused while cached, and it is dropped when the
    version is replaced or deleted (the store tells every change)."""

    def __init__(self, store: Store) -> None:
        self._encoded: dict[int, tuple[dict[str, Any], bytes]] = {}
        store.listeners.append(self._forget)

    def item(self, obj: dict[str, Any]) -> bytes:
        """``obj`` must be a current stored version as a LIST shows it (or a shallow copy)."""
        meta = obj["metadata"]
        entry = self._encoded.get(id(meta))
        if entry is not None and entry[0] is meta:
            return entry[1]
        data = json.dumps(obj, separators=_COMPACT).encode()
        self._encoded[id(meta)] = (meta, data)
        return data

    def __len__(self) -> int:
        """How many versions are kept encoded (only current ones)."""
        return len(self._encoded)

    def _forget(self, change: Change) -> None:
        if change.old is not None:
            self._encoded.pop(id(change.old["metadata"]), None)


def list_body(head: dict[str, Any], items: list[bytes]) -> bytes:
    """``encode({**head, "items": [...]})`` from items already encoded: the same bytes."""
    prefix = json.dumps({**head, "items": []}, separators=_COMPACT).encode()
    assert prefix.endswith(b"[]}")
    return prefix[:-2] + b",".join(items) + b"]}\n"
