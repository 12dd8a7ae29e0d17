"""Pure pieces of the simulated API server: selectors, patches, the store's watch window."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.sim.apiserver.errors import ApiError
from tests.sim.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from tests.sim.apiserver.selectors import (
    format_label_selector,
    parse_field_selector,
    parse_label_selector,
)
from tests.sim.apiserver.store import Store
from tests.sim.apiserver.tables import human_duration

LABELS = {"app": "web", "tier": "fe", "env": "prod"}


@pytest.mark.parametrize(("selector", "matches"), [
    ("", True), ("app=web", True), ("app==web", True), ("app!=web", False),
    ("app=web,tier=be", False), ("env in (prod,staging)", True), ("env notin (prod)", False),
    ("tier", True), ("!tier", False), ("missing!=x", True), ("app in (a, web),!missing", True),
], ids=["empty", "eq", "double-eq", "neq", "and", "in", "notin", "exists", "not-exists",
        "neq-missing", "set-and-not-exists"])
def test_label_selector(selector: str, matches: bool) -> None:
    """Label selector grammar matches as apimachinery's labels.Parse."""
    assert parse_label_selector(selector)(LABELS) is matches


def test_bad_label_selector_is_a_400() -> None:
    """An unparsable selector is a 400 BadRequest."""
    with pytest.raises(ApiError) as caught:
        parse_label_selector("app===web")
    assert caught.value.code == 400


@pytest.mark.parametrize(("selector", "expected"), [
    ({"matchLabels": {"tier": "fe", "app": "web"}}, "app=web,tier=fe"),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["b", "a"]}]},
     "env in (a,b)"),
    ({"matchLabels": {"b": "1"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]},
     "a,b=1"),
    ({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}, "!x"),
    ({}, ""),
], ids=["labels-sorted", "in-sorted-values", "mixed-sorted-by-key", "does-not-exist", "empty"])
def test_format_label_selector(selector: dict[str, Any], expected: str) -> None:
    """A LabelSelector renders as the Scale status.selector string upstream writes."""
    assert format_label_selector(selector) == expected


def test_field_selector_rejects_unknown_fields() -> None:
    """Only declared fields are selectable; others are a 400."""
    fields = {"status.phase": "status.phase"}
    assert parse_field_selector("status.phase!=Running", fields)({"status": {"phase": "Pending"}})
    with pytest.raises(ApiError):
        parse_field_selector("spec.x=1", fields)


@pytest.mark.parametrize(("target", "patch", "expected"), [
    ({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}}, {"a": 1, "b": {"d": 3}}),
    ({"l": [1, 2]}, {"l": [3]}, {"l": [3]}),
], ids=["nested-delete", "lists-replace"])
def test_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    """RFC 7386 merge patch."""
    assert merge_patch(target, patch) == expected


def test_strategic_merge_patch_merges_named_lists() -> None:
    """Strategic merge patches containers by name instead of replacing the list."""
    target = {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}
    patched = strategic_merge_patch(target, {"containers": [{"name": "b", "image": "2"}]})
    assert patched == {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}


@pytest.mark.parametrize(("ops", "expected"), [
    ([{"op": "replace", "path": "/spec/replicas", "value": 3}], {"spec": {"replicas": 3}}),
    ([{"op": "add", "path": "/spec/x", "value": [1]}], {"spec": {"replicas": 1, "x": [1]}}),
    ([{"op": "remove", "path": "/spec/replicas"}], {"spec": {}}),
    ([{"op": "test", "path": "/spec/replicas", "value": 1},
      {"op": "replace", "path": "/spec/replicas", "value": 2}], {"spec": {"replicas": 2}}),
], ids=["replace", "add", "remove", "test-then-replace"])
def test_json_patch(ops: list[dict[str, Any]], expected: Any) -> None:
    """RFC 6902 JSON Patch operations."""
    assert json_patch({"spec": {"replicas": 1}}, ops) == expected


@pytest.mark.parametrize(("ops", "code"), [
    ({"spec": {"replicas": 2}}, 400),
    ([{"op": "test", "path": "/spec/replicas", "value": 9}], 422),
    ([{"op": "replace", "path": "/nope/x", "value": 1}], 422),
], ids=["dict-body", "failed-test", "missing-path"])
def test_json_patch_errors(ops: Any, code: int) -> None:
    """A dict body is a 400 as upstream's decoder answers; failed ops are 422."""
    with pytest.raises(ApiError) as caught:
        json_patch({"spec": {"replicas": 1}}, ops)
    assert caught.value.code == code


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": name}}}


async def test_watch_replays_history_and_expires_after_compaction() -> None:
    """A watch from a resourceVersion replays later changes; after compact() it is 410."""
    store = Store()
    key = ("", "pods")
    first = store.create(key, _pod("a"))
    store.create(key, _pod("b"))
    watcher = store.watch(key, namespace="default", matches=lambda o: True,
                          since=int(first["metadata"]["resourceVersion"]), bookmarks=False)
    event, obj = await asyncio.wait_for(watcher.queue.get(), 1)
    assert (event, obj["metadata"]["name"]) == ("ADDED", "b")
    store.compact()
    with pytest.raises(ApiError) as caught:
        store.watch(key, namespace=None, matches=lambda o: True, since=int(
            first["metadata"]["resourceVersion"]), bookmarks=False)
    assert (caught.value.code, caught.value.reason) == (410, "Expired")


async def test_filtered_watch_sees_objects_leave_as_deleted() -> None:
    """When a change makes an object stop matching a selector, the watch gets DELETED."""
    store = Store()
    key = ("", "pods")
    store.create(key, _pod("a"))
    watcher = store.watch(key, namespace=None, since=store.resource_version, bookmarks=False,
                          matches=lambda o: o["metadata"]["labels"].get("app") == "a")
    moved = _pod("a")
    moved["metadata"]["labels"] = {"app": "other"}
    store.replace(key, moved)
    assert (await asyncio.wait_for(watcher.queue.get(), 1))[0] == "DELETED"


@pytest.mark.parametrize(("seconds", "text"), [
    (5, "5s"), (119, "119s"), (130, "2m10s"), (600, "10m"), (3 * 3600 + 60, "3h1m"),
    (30 * 3600, "30h"), (50 * 3600, "2d2h"), (400 * 86400, "400d"),
], ids=["5s", "119s", "2m10s", "10m", "3h1m", "30h", "2d2h", "400d"])
def test_human_duration(seconds: int, text: str) -> None:
    """Ages print as apimachinery's HumanDuration."""
    assert human_duration(seconds) == text
