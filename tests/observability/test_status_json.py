"""The /status document written a piece at a time is the JSON ``json.dumps`` would write."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from autoscaler.observability.status_json import PIECE, Entries, pieces, wants_pretty

WHEN = datetime.datetime(2026, 11, 30, 15, 0, tzinfo=datetime.UTC)


def target(key: str) -> dict[str, Any]:
    return {"target": key, "conditions": [{"type": "AbleToScale", "message": "é \"q\"\n"}],
            "decision": {"steps": [], "bounds": {}}, "lastScaleTime": WHEN, "none": None}


DOCUMENTS = {
    "empty": {},
    "no targets": {"identity": "me", "targets": Entries([], target), "ring": None},
    "targets": {"identity": "me", "history": {"kept": [1, 2]},
                "targets": Entries(["ns/a", "ns/b"], target), "ring": {"buckets": []}},
    "targets last": {"targets": Entries(["a"], target)},
    "plain": {"a": [], "b": {"c": {}}, "d": "x"},
    "many": {"targets": Entries([f"t{n}" for n in range(500)], target)},
}


def whole(document: dict[str, Any]) -> dict[str, Any]:
    return {name: dict(value) if isinstance(value, Entries) else value
            for name, value in document.items()}


@pytest.mark.parametrize("name", list(DOCUMENTS))
@pytest.mark.parametrize("pretty", [False, True], ids=["compact", "pretty"])
def test_the_pieces_are_what_json_dumps_writes(name: str, pretty: bool) -> None:
    document = DOCUMENTS[name]
    expected = json.dumps(whole(document), indent=2 if pretty else None, default=str) + "\n"
    written = list(pieces(document, pretty=pretty))
    assert "".join(written) == expected
    assert all(len(piece) < 2 * PIECE for piece in written)


def test_a_large_document_comes_in_pieces_and_each_entry_is_built_once() -> None:
    built: list[str] = []

    def build(key: str) -> dict[str, Any]:
        built.append(key)
        return target(key)

    keys = [f"t{n}" for n in range(1_000)]
    written = pieces({"targets": Entries(keys, build)}, pretty=False)
    first = next(written)
    assert 0 < len(built) < len(keys)  # built as written, not all before the first piece
    assert len(first) >= PIECE
    rest = "".join(written)
    assert built == keys
    assert list(json.loads(first + rest)["targets"]) == keys


@pytest.mark.parametrize(("query", "agent", "pretty"), [
    ({}, "Python/3.11 aiohttp/3.9", False),
    ({}, "curl/8.5.0", True),
    ({}, "Wget/1.21", True),
    ({}, "Mozilla/5.0 (X11)", True),
    ({"pretty": "true"}, "", True),
    ({"pretty": "1"}, "", True),
    ({"pretty": "false"}, "curl/8.5.0", False),
    ({"pretty": "no"}, "curl/8.5.0", False),  # given, and not true to Go's ParseBool
    ({"pretty": ""}, "curl/8.5.0", True),  # empty: not given
])
def test_pretty_as_kube_apiserver_decides(query: dict[str, str], agent: str,
                                          pretty: bool) -> None:
    assert wants_pretty(query, agent) is pretty
